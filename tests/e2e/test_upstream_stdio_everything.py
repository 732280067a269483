"""The official "everything" server's stdio mode as an upstream, through the stdio bridge.

The package comes from the npm registry, pinned (``tests/support/everything_server.py``),
installed once into a cache and run with Node directly: each MCP session is a child of the
bridge. Its tools are imported by the sync, and its long-running operation, elicitation,
sampling, environment and simulated logging reach the official SDK client through a live
Daphne process. ``toggle-simulated-logging`` is the issue's example of per-session state: two
users toggling it each start their own, neither switches the other's off.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
import mcp.types as types
import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.test import override_settings
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_app.executors import mcp_upstream
from mcp_app.models import Endpoint, Tool, Upstream
from mcp_app.services.credentials import credential_create
from mcp_app.services.upstream_targets import upstream_list_offer
from tests.support.catalog import make_endpoint
from tests.support.everything_server import everything_server
from tests.support.live import SECRET_KEY, asgi_server, flush_database, free_port, wait_until_idle
from tests.support.oauth import issue_token
from tests.support.stdio_bridge import run_bridge

pytestmark = pytest.mark.django_db
TOKEN = "everything-api-token-value"
TOOLS = ("get-sum", "trigger-long-running-operation", "trigger-elicitation-request",
         "trigger-sampling-request", "get-env", "toggle-simulated-logging")  # fmt: skip


@dataclass
class Site:
    url: str
    tokens: dict[str, str]


def ours(remote: str) -> str:
    return "every_" + remote.replace("-", "_")


@pytest.fixture(scope="module")
def site(tmp_path_factory: Any, django_db_setup: None, django_db_blocker: Any) -> Iterator[Site]:
    command = everything_server()
    servers = json.dumps({"everything": {"command": command, "credential_env": ["API_TOKEN"]}})
    port = free_port()
    stdio_env = {"MCP_STDIO_SERVERS": servers, "MCP_STDIO_BRIDGE_URL": f"http://127.0.0.1:{port}"}
    with (
        override_settings(SECRET_KEY=SECRET_KEY, MCP_SECRET_KEYS="", **stdio_env),
        django_db_blocker.unblock(),
    ):
        credential_create(name="everything-token", kind="bearer", secret=TOKEN)
        upstream = Upstream(
            name="everything",
            transport="stdio",
            stdio_server="everything",
            stdio_env={"API_TOKEN": "everything-token"},
        )
        upstream.full_clean()
        upstream.save()
        public = make_endpoint("e2e-everything")
        secured = make_endpoint("e2e-everything-oauth", auth_mode=Endpoint.AuthMode.OAUTH)
        for remote in TOOLS:
            tool = Tool(
                name=ours(remote),
                description=f"The everything server's {remote}.",
                kind=Tool.Kind.MCP_UPSTREAM,
                config={"upstream": "everything", "tool": remote},
                input_schema={"type": "object"},
            )
            tool.full_clean()
            tool.save()
            public.tools.add(tool)
            secured.tools.add(tool)
        log = tmp_path_factory.mktemp("everything") / "bridge.log"
        with (
            run_bridge(servers, log, port),
            asgi_server("daphne", {**stdio_env, "CELERY_BROKER_URL": "memory://"}) as url,
        ):
            resource = [f"{url}/mcp/e2e-everything-oauth"]
            tokens = {
                name: issue_token(User.objects.create_user(name), resource=resource)
                for name in ("alice", "bob")
            }
            yield Site(url=url, tokens=tokens)
            wait_until_idle(url)
        flush_database(django_db_blocker)


@asynccontextmanager
async def connect(
    url: str, mode: str = "legacy", token: str | None = None, **kwargs: Any
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, **kwargs) as client,
    ):
        yield client


def text_of(result: types.CallToolResult) -> str:
    assert not result.is_error, result.content
    return " ".join(block.text for block in result.content if block.type == "text")


def test_sync_lists_the_everything_servers_tools(site: Site) -> None:
    with override_settings(SECRET_KEY=SECRET_KEY, MCP_SECRET_KEYS=""):
        offer = async_to_sync(_offer)("everything")
    assert set(TOOLS) <= {tool["name"] for tool in offer.tools}


async def _offer(name: str) -> Any:
    try:
        return await upstream_list_offer(name)
    finally:
        await mcp_upstream.close_sessions()


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_call_and_its_progress_are_relayed(site: Site, mode: str) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with asyncio.timeout(60), connect(f"{site.url}/mcp/e2e-everything", mode) as client:
        summed = await client.call_tool(ours("get-sum"), {"a": 2, "b": 3})
        ran = await client.call_tool(
            ours("trigger-long-running-operation"),
            {"duration": 0.2, "steps": 2},
            progress_callback=on_progress,
        )
    assert "5" in text_of(summed)
    assert "completed" in text_of(ran).lower()
    assert seen == [1, 2]


async def test_an_elicitation_question_is_relayed(site: Site) -> None:
    asked: list[str] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="decline")

    url = f"{site.url}/mcp/e2e-everything"
    async with asyncio.timeout(60), connect(url, elicitation_callback=answer) as client:
        result = await client.call_tool(ours("trigger-elicitation-request"), {})
    assert len(asked) == 1
    assert "decline" in text_of(result).lower()


async def test_a_sampling_question_is_relayed(site: Site) -> None:
    async def sample(context: Any, params: types.CreateMessageRequestParams) -> Any:
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="sampled by the test"),
            model="test-model",
            stop_reason="endTurn",
        )

    url = f"{site.url}/mcp/e2e-everything"
    async with asyncio.timeout(60), connect(url, sampling_callback=sample) as client:
        result = await client.call_tool(ours("trigger-sampling-request"), {"prompt": "hi"})
    assert "sampled by the test" in text_of(result)


async def test_the_child_sees_its_credential_redacted_and_none_of_the_bridges_env(
    site: Site,
) -> None:
    async with asyncio.timeout(60), connect(f"{site.url}/mcp/e2e-everything") as client:
        env = json.loads(text_of(await client.call_tool(ours("get-env"), {})))
    assert env["API_TOKEN"] == "[redacted]"  # there, and its value kept from our client
    assert set(env) <= {"PATH", "HOME", "LANG", "API_TOKEN"}


async def test_two_users_toggling_simulated_logging_never_affect_each_other(site: Site) -> None:
    url = f"{site.url}/mcp/e2e-everything-oauth"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the logging capability is deprecated in 2026-07-28
        async with (
            asyncio.timeout(60),
            connect(url, token=site.tokens["alice"]) as alice,
            connect(url, token=site.tokens["bob"]) as bob,
        ):
            first = text_of(await alice.call_tool(ours("toggle-simulated-logging"), {}))
            second = text_of(await bob.call_tool(ours("toggle-simulated-logging"), {}))
            third = text_of(await alice.call_tool(ours("toggle-simulated-logging"), {}))
    assert first.startswith("Started"), first
    assert second.startswith("Started"), second  # bob's own session, not alice's switched off
    assert third.startswith("Stopped"), third
