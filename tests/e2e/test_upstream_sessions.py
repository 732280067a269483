"""Sessions with an upstream MCP server are kept per caller: users never see each other's state.

The upstream is the official SDK's server (``tests/support/mcp_upstream_server.py``), whose
``remember`` tool keeps a value per MCP session. Our endpoints run in a live Daphne process
with the embedded worker (no broker: background calls run on the web process's loop, where
its upstream sessions are), and the SDK client calls them in both eras: two OAuth users on
one endpoint, two anonymous legacy sessions on a public one, and the same through an upstream
the operator marked ``stateless``, whose one session every caller shares.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
from django.contrib.auth.models import User
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_app.executors import mcp_upstream
from mcp_app.models import Endpoint, Resource, Tool, Upstream
from mcp_app.protocol.catalog import CatalogSnapshot, EndpointInfo
from mcp_app.protocol.context import RequestContext, ToolCallContext
from mcp_app.services.catalog_io import catalog_export, catalog_import
from mcp_app.services.resources import CatalogResourceReader
from mcp_app.services.runner import CatalogToolRunner
from tests.support.catalog import make_endpoint
from tests.support.live import asgi_server, flush_database, wait_until_idle
from tests.support.mcp_upstream_server import RunningUpstream, run_mcp_upstream
from tests.support.oauth import issue_token

pytestmark = pytest.mark.django_db
# (our tool, the upstream row it calls, where it runs)
TOOLS = (
    ("remember", "mem", Tool.Execution.INLINE),
    ("remember_bg", "mem", Tool.Execution.BACKGROUND),
    ("remember_shared", "mem-shared", Tool.Execution.INLINE),
)


@dataclass
class Site:
    url: str
    tokens: dict[str, str]


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: Any) -> Iterator[RunningUpstream]:
    with run_mcp_upstream(tmp_path_factory.mktemp("e2e-upstream-sessions"), extras=True) as running:
        yield running


@pytest.fixture(scope="module")
def site(
    upstream: RunningUpstream, django_db_setup: None, django_db_blocker: Any
) -> Iterator[Site]:
    with django_db_blocker.unblock():
        Upstream.objects.create(name="mem", url=upstream.url, allow_networks="127.0.0.1/32")
        Upstream.objects.create(
            name="mem-shared", url=upstream.url, allow_networks="127.0.0.1/32", stateless=True
        )
        public = make_endpoint("e2e-mem")
        secured = make_endpoint("e2e-mem-oauth", auth_mode=Endpoint.AuthMode.OAUTH)
        for name, upstream_name, execution in TOOLS:
            tool = Tool(
                name=name,
                description="Keeps a value in the caller's upstream session.",
                kind=Tool.Kind.MCP_UPSTREAM,
                config={"upstream": upstream_name, "tool": "remember"},
                input_schema={
                    "type": "object",
                    "properties": {"value": {"type": "string"}},
                    "required": ["value"],
                },
                execution_mode=execution,
            )
            tool.full_clean()
            tool.save()
            public.tools.add(tool)
            secured.tools.add(tool)
        # What the caller's session holds, read as a resource (the same session as its tools).
        resource = Resource(
            uri="ours://remembered", name="remembered", upstream=Upstream.objects.get(name="mem")
        )
        resource.remote_uri = "up://remembered/it"
        resource.full_clean()
        resource.save()
        public.resources.add(resource)
        secured.resources.add(resource)
    # No broker: the embedded worker runs background calls on the web process's loop.
    with asgi_server("daphne", {"CELERY_BROKER_URL": "memory://"}) as url:
        with django_db_blocker.unblock():
            resource = [f"{url}/mcp/e2e-mem-oauth"]
            tokens = {
                name: issue_token(User.objects.create_user(name), resource=resource)
                for name in ("alice", "bob")
            }
        yield Site(url=url, tokens=tokens)
        wait_until_idle(url)
    flush_database(django_db_blocker)


@asynccontextmanager
async def connect(url: str, mode: str, token: str | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=20) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


async def held(client: Client, tool: str, value: str = "") -> str:
    result = await client.call_tool(tool, {"value": value})
    assert not result.is_error, result.content
    text = result.content[0].text
    assert text.startswith("holds:"), text
    return text.removeprefix("holds:")


async def read_held(client: Client) -> str:
    read = await client.read_resource("ours://remembered")
    text = read.contents[0].text
    assert text.startswith("holds:"), text
    return text.removeprefix("holds:")


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_two_users_never_see_each_others_upstream_session(site, mode):
    url = f"{site.url}/mcp/e2e-mem-oauth"
    mine, theirs = f"alice-{mode}", f"bob-{mode}"
    async with (
        asyncio.timeout(60),
        connect(url, mode, site.tokens["alice"]) as alice,
        connect(url, mode, site.tokens["bob"]) as bob,
    ):
        assert await held(alice, "remember", mine) == mine
        assert await held(bob, "remember") != mine
        assert await held(bob, "remember", theirs) == theirs
        assert await held(alice, "remember") == mine
        # A background call of a user runs in that user's session too, as do resource reads.
        assert await held(alice, "remember_bg") == mine
        assert await held(bob, "remember_bg") == theirs
        assert await read_held(alice) == mine
        assert await read_held(bob) == theirs
    # The session is the user's, not the client connection's: a new connection finds it.
    async with asyncio.timeout(30), connect(url, mode, site.tokens["alice"]) as again:
        assert await held(again, "remember") == mine


async def test_two_anonymous_client_sessions_never_share_an_upstream_session(site):
    url = f"{site.url}/mcp/e2e-mem"
    async with (
        asyncio.timeout(60),
        connect(url, "legacy") as first,
        connect(url, "legacy") as second,
    ):
        assert await held(first, "remember", "first-client") == "first-client"
        assert await held(second, "remember") == ""
        assert await held(first, "remember_bg") == "first-client"
        assert await held(second, "remember_bg") == ""
        assert await read_held(first) == "first-client"
        assert await read_held(second) == ""


async def test_an_anonymous_2026_caller_keeps_nothing_between_calls(site):
    # Without a user or a session nothing ties two calls together: each gets a fresh session.
    async with asyncio.timeout(60), connect(f"{site.url}/mcp/e2e-mem", "2026-07-28") as client:
        assert await held(client, "remember", "once") == "once"
        assert await held(client, "remember") == ""


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_stateless_marked_upstream_shares_one_session(site, mode):
    url = f"{site.url}/mcp/e2e-mem-oauth"
    value = f"shared-{mode}"
    async with (
        asyncio.timeout(60),
        connect(url, mode, site.tokens["alice"]) as alice,
        connect(url, mode, site.tokens["bob"]) as bob,
    ):
        assert await held(alice, "remember_shared", value) == value
        assert await held(bob, "remember_shared") == value


# --- the executor's bounds: idle time and the cap per upstream --------------------------------


def caller_ctx(caller: str) -> ToolCallContext:
    request = RequestContext(
        version="2025-11-25",
        catalog=CatalogSnapshot(endpoint=EndpointInfo(slug="sessions")),
        tools=CatalogToolRunner(),
        resources=CatalogResourceReader(),
        server_info={},
        caller=caller,
    )
    return ToolCallContext(request, "remember")


async def remembered(target: mcp_upstream.UpstreamTarget, caller: str, value: str = "") -> str:
    result = await mcp_upstream.call_tool(target, "remember", {"value": value}, caller_ctx(caller))
    return str(result["content"][0]["text"]).removeprefix("holds:")


async def closed(session: mcp_upstream._Session) -> None:
    async with asyncio.timeout(10):
        while not session.client.is_closed:
            await asyncio.sleep(0.02)


@pytest.fixture
async def target(upstream: RunningUpstream) -> AsyncIterator[mcp_upstream.UpstreamTarget]:
    yield mcp_upstream.UpstreamTarget(
        key="bounded", name="bounded", url=upstream.url, allow_networks=("127.0.0.1/32",),
        max_sessions=2, session_idle_seconds=60,
    )  # fmt: skip
    await mcp_upstream.close_sessions()


async def test_beyond_the_cap_the_least_recently_used_session_is_closed(target):
    assert await remembered(target, "user:1", "one") == "one"
    assert await remembered(target, "user:2", "two") == "two"
    assert await remembered(target, "user:1") == "one"  # user:2 is now the least recent
    sessions = mcp_upstream._sessions[asyncio.get_running_loop()]
    second = sessions["bounded#user:2"]
    assert await remembered(target, "user:3", "three") == "three"
    await closed(second)
    assert set(sessions) == {"bounded#user:1", "bounded#user:3"}
    assert await remembered(target, "user:1") == "one"
    assert await remembered(target, "user:3") == "three"
    # Its caller gets a fresh session (the upstream ended the old one: DELETE), and user:1,
    # now the least recently used, makes room.
    assert await remembered(target, "user:2") == ""
    assert set(sessions) == {"bounded#user:3", "bounded#user:2"}


async def test_an_idle_session_is_closed_when_the_next_one_opens(target):
    assert await remembered(target, "user:1", "one") == "one"
    sessions = mcp_upstream._sessions[asyncio.get_running_loop()]
    first = sessions["bounded#user:1"]
    # As if it had been unused for longer than the idle time.
    first.last_used -= target.session_idle_seconds + 1
    assert await remembered(target, "user:2", "two") == "two"
    await closed(first)
    assert set(sessions) == {"bounded#user:2"}
    assert await remembered(target, "user:1") == ""


def test_how_an_upstreams_sessions_are_kept_survives_export_and_import():
    Upstream.objects.create(
        name="exported",
        url="https://peer.example.com/mcp",
        stateless=True,
        session_idle_seconds=30,
        max_sessions=7,
    )
    document = catalog_export()
    [entry] = [item for item in document["upstreams"] if item["name"] == "exported"]
    settings = ("stateless", "session_idle_seconds", "max_sessions")
    assert [entry[name] for name in settings] == [True, 30, 7]
    Upstream.objects.filter(name="exported").update(
        stateless=False, session_idle_seconds=600, max_sessions=100
    )
    catalog_import(document=document)
    row = Upstream.objects.get(name="exported")
    assert [getattr(row, name) for name in settings] == [True, 30, 7]


async def test_an_idle_session_is_closed_as_its_time_passes(upstream):
    target = mcp_upstream.UpstreamTarget(
        key="short-idle", name="short-idle", url=upstream.url, allow_networks=("127.0.0.1/32",),
        session_idle_seconds=0.2,
    )  # fmt: skip
    try:
        assert await remembered(target, "user:1", "one") == "one"
        sessions = mcp_upstream._sessions[asyncio.get_running_loop()]
        first = sessions["short-idle#user:1"]
        # Nothing else happens: the loop's sweeper closes it, and ends with no sessions left.
        await closed(first)
        assert "short-idle#user:1" not in sessions
        sweeper = mcp_upstream._sweepers[asyncio.get_running_loop()]
        async with asyncio.timeout(10):
            while not sweeper.done():
                await asyncio.sleep(0.02)
        assert await remembered(target, "user:1") == ""
    finally:
        await mcp_upstream.close_sessions()
