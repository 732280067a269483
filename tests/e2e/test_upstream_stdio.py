"""stdio upstreams: an allow-listed program, run by the stdio bridge, relayed like any upstream.

The production shape on loopback: ``manage.py mcp_stdio_bridge`` in a subprocess on the test
database, a live Daphne process reaching it at ``MCP_STDIO_BRIDGE_URL``, and the official SDK
client calling our endpoints. The stdio server is the SDK's MCPServer over stdio
(``tests/support/stdio_upstream_server.py``); each MCP session with it is a child process of
the bridge. Both processes share SECRET_KEY, so the bridge secret is derived the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import sys
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp.types as types
import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.db import connections
from django.test import override_settings
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_app.bridge.servers import SECRET_HEADER, bridge_secret
from mcp_app.executors import mcp_upstream
from mcp_app.models import CallLog, Endpoint, Tool, Upstream
from mcp_app.protocol.results import ToolError
from mcp_app.services.credentials import credential_create
from mcp_app.services.upstream_health import upstream_probe
from mcp_app.services.upstream_sync import upstream_sync_apply, upstream_sync_plan
from mcp_app.services.upstream_targets import (
    upstream_list_offer,
    upstream_list_tools,
    upstream_resolve,
)
from tests.support.catalog import make_endpoint
from tests.support.live import (
    ROOT,
    SECRET_KEY,
    asgi_server,
    flush_database,
    free_port,
    wait_until_idle,
)
from tests.support.oauth import issue_token
from tests.support.stdio_bridge import run_bridge
from tests.support.waiting import wait_until
from tests.support.worker import BACKGROUND_ENV, celery_worker

pytestmark = pytest.mark.django_db
TOKEN = "stdio-child-token-value"
SERVER = str(ROOT / "tests" / "support" / "stdio_upstream_server.py")
# Arguments an operator adds: passed verbatim, no shell to expand or split them.
VERBATIM_ARGS = ["--tag=a b;$(id)|`x`>y", "--verbose"]
MEMORY_MB = 2048
OPEN_FILES = 300
CPU_SECONDS = 600
TOOLS = ("progress", "ask_name", "ask_model", "remember", "pid", "die", "environment",
         "leak_env", "limits", "grow")  # fmt: skip


@dataclass
class Site:
    url: str
    bridge: str
    bridge_log: Path
    workdir: str
    tokens: dict[str, str]
    servers: str
    stdio_env: dict[str, str]
    restart_bridge: Callable[[], None]


def allow_list(workdir: Path) -> str:
    return json.dumps({
        "sdk": {
            "command": [sys.executable, SERVER],
            "args": ["--tag=*", "--verbose"],
            "env": {"FIXED_SETTING": "fixed"},
            "credential_env": ["UPSTREAM_TOKEN"],
            "cwd_allowed": [str(workdir)],
            "memory_mb": MEMORY_MB,
            "cpu_seconds": CPU_SECONDS,
            "open_files": OPEN_FILES,
        },
        "broken": {"command": [sys.executable, SERVER, "--fail-start"]},
    })  # fmt: skip


@pytest.fixture(scope="module")
def site(tmp_path_factory: Any, django_db_setup: None, django_db_blocker: Any) -> Iterator[Site]:
    workdir = tmp_path_factory.mktemp("stdio-cwd")
    servers = allow_list(workdir)
    port = free_port()
    bridge_url = f"http://127.0.0.1:{port}"
    stdio_env = {"MCP_STDIO_SERVERS": servers, "MCP_STDIO_BRIDGE_URL": bridge_url}
    with (
        override_settings(SECRET_KEY=SECRET_KEY, MCP_SECRET_KEYS="", **stdio_env),
        django_db_blocker.unblock(),
    ):
        credential = credential_create(name="stdio-token", kind="bearer", secret=TOKEN)
        for name, server, fields in (
            ("sdk", "sdk", {"stdio_args": VERBATIM_ARGS, "stdio_cwd": str(workdir),
                            "stdio_env": {"UPSTREAM_TOKEN": credential.name}}),
            ("capped", "sdk", {"max_sessions": 1}),
            ("broken", "broken", {}),
            ("brief", "sdk", {"session_idle_seconds": 1}),
            ("shared", "sdk", {"stateless": True}),
        ):  # fmt: skip
            upstream = Upstream(name=name, transport="stdio", stdio_server=server, **fields)
            upstream.full_clean()
            upstream.save()
        # An HTTP upstream at the bridge's address: the guard opens it for stdio rows only.
        Upstream.objects.create(name="at-bridge", url=f"{bridge_url}/sdk/mcp")
        public = make_endpoint("e2e-stdio")
        secured = make_endpoint("e2e-stdio-oauth", auth_mode=Endpoint.AuthMode.OAUTH)
        extra = [("broken", "pid"), ("shared", "pid")]
        for upstream_name, remote in [*(("sdk", t) for t in TOOLS), *extra]:
            tool = Tool(
                name=f"{upstream_name}_{remote}",
                description=f"The stdio server's {remote}.",
                kind=Tool.Kind.MCP_UPSTREAM,
                config={"upstream": upstream_name, "tool": remote},
                input_schema={"type": "object"},
                capture_mode=Tool.Capture.FULL,  # payloads in the call log, to scan them
            )
            tool.full_clean()
            tool.save()
            public.tools.add(tool)
            secured.tools.add(tool)
        log = workdir.parent / "bridge.log"
        with (
            contextlib.ExitStack() as bridges,
            asgi_server("daphne", {**stdio_env, "CELERY_BROKER_URL": "memory://"}) as url,
        ):
            bridge = bridges.enter_context(run_bridge(servers, log, port))

            def restart_bridge() -> None:
                """Stop the bridge (its children with it) and start another on its port."""
                bridge.process.terminate()
                bridge.process.wait(20)
                bridges.enter_context(run_bridge(servers, log, port))

            tokens = {
                name: issue_token(
                    User.objects.create_user(name), resource=[f"{url}/mcp/e2e-stdio-oauth"]
                )
                for name in ("alice", "bob")
            }
            yield Site(
                url=url, bridge=bridge.url, bridge_log=bridge.log, workdir=str(workdir),
                tokens=tokens, servers=servers, stdio_env=stdio_env,
                restart_bridge=restart_bridge,
            )  # fmt: skip
            wait_until_idle(url)
        flush_database(django_db_blocker)


@pytest.fixture(params=["legacy", "2026-07-28"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@asynccontextmanager
async def connect(
    url: str, mode: str, token: str | None = None, **kwargs: Any
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, **kwargs) as client,
    ):
        yield client


async def structured(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    result = await client.call_tool(tool, arguments or {})
    assert not result.is_error, result.content
    return result.structured_content


def test_sync_imports_the_stdio_servers_tools(site: Site) -> None:
    with override_settings(SECRET_KEY=SECRET_KEY, MCP_SECRET_KEYS=""):
        offer = async_to_sync(_offer)("sdk")
        upstream = Upstream.objects.get(name="sdk")
        plan = upstream_sync_plan(upstream, offer.tools)
        added = {remote["name"] for remote in plan.added}
        outcome = upstream_sync_apply(
            upstream, offer.tools, add={"echo", "add"}, update=set(), remove=set()
        )
    assert {"echo", "add", "mixed"} <= added
    assert "environment" not in added  # already served by a tool of ours
    assert {t.name for t in outcome.created} == {"echo", "add"}
    assert Tool.objects.get(name="add").config == {"upstream": "sdk", "tool": "add"}
    assert {resource["uri"] for resource in offer.resources} >= {"up://readme"}


async def _offer(name: str) -> Any:
    try:
        return await upstream_list_offer(name)
    finally:
        await mcp_upstream.close_sessions()


def test_the_probe_finds_a_stdio_upstream_active(site: Site) -> None:
    with override_settings(SECRET_KEY=SECRET_KEY, MCP_SECRET_KEYS=""):
        state = async_to_sync(_probe)("sdk")
    assert state == Upstream.ProbeState.ACTIVE


async def _probe(name: str) -> str:
    try:
        return await upstream_probe(name)
    finally:
        await mcp_upstream.close_sessions()


async def test_a_call_relays_the_result_and_its_progress(site: Site, mode: str) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with asyncio.timeout(60), connect(f"{site.url}/mcp/e2e-stdio", mode) as client:
        result = await client.call_tool("sdk_progress", {"steps": 3}, progress_callback=on_progress)
    assert not result.is_error, result.content
    assert result.content[0].text == "done"
    assert seen == [1, 2, 3]


async def test_an_elicitation_question_is_relayed_and_answered(site: Site, mode: str) -> None:
    asked: list[str] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    url = f"{site.url}/mcp/e2e-stdio"
    async with asyncio.timeout(60), connect(url, mode, elicitation_callback=answer) as client:
        result = await client.call_tool("sdk_ask_name", {})
    assert not result.is_error, result.content
    assert result.content[0].text == "Hello Ada!"
    assert set(asked) == {"What is your name?"}


async def test_a_sampling_question_is_relayed_to_the_clients_model(site: Site) -> None:
    async def sample(context: Any, params: types.CreateMessageRequestParams) -> Any:
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"echo {params.messages[0].content.text}"),
            model="test-model",
            stop_reason="endTurn",
        )

    url = f"{site.url}/mcp/e2e-stdio"
    async with asyncio.timeout(60), connect(url, "legacy", sampling_callback=sample) as client:
        result = await client.call_tool("sdk_ask_model", {"prompt": "hi"})
    assert not result.is_error, result.content
    assert result.content[0].text == "model said: echo hi"


async def test_two_users_get_two_children_unless_the_upstream_is_stateless(site: Site) -> None:
    url = f"{site.url}/mcp/e2e-stdio-oauth"
    async with (
        asyncio.timeout(60),
        connect(url, "legacy", site.tokens["alice"]) as alice,
        connect(url, "legacy", site.tokens["bob"]) as bob,
    ):
        alice_pid = await structured(alice, "sdk_pid")
        bob_pid = await structured(bob, "sdk_pid")
        assert (await alice.call_tool("sdk_remember", {"value": "alice's"})).content[0].text == (
            "holds:alice's"
        )
        assert (await bob.call_tool("sdk_remember", {"value": ""})).content[0].text == "holds:"
        assert (await alice.call_tool("sdk_remember", {"value": ""})).content[0].text == (
            "holds:alice's"
        )
        assert await structured(alice, "sdk_pid") == alice_pid
        # An upstream the operator marked stateless: one session, one child for everyone.
        shared = [await structured(client, "shared_pid") for client in (alice, bob)]
    assert alice_pid["result"] != bob_pid["result"]
    assert shared[0] == shared[1]


async def test_the_child_has_its_credential_and_nothing_of_the_bridges_environment(
    site: Site,
) -> None:
    async with asyncio.timeout(60), connect(f"{site.url}/mcp/e2e-stdio", "legacy") as client:
        seen = await structured(client, "sdk_environment")
        limits = await structured(client, "sdk_limits")
    assert "UPSTREAM_TOKEN" in seen["names"]
    assert seen["token_sha256"] == hashlib.sha256(TOKEN.encode()).hexdigest()
    assert seen["fixed"] == "fixed"
    for name in ("DATABASE_URL", "SECRET_KEY", "MCP_STDIO_SERVERS", "MCP_STDIO_BRIDGE_URL"):
        assert name not in seen["names"]
    assert set(seen["names"]) <= {"PATH", "HOME", "LANG", "LC_CTYPE", "FIXED_SETTING",
                                  "UPSTREAM_TOKEN"}  # fmt: skip
    assert seen["argv"] == VERBATIM_ARGS
    assert seen["cwd"] == site.workdir
    assert limits == {
        "memory": MEMORY_MB * 1024 * 1024, "cpu": CPU_SECONDS, "open_files": OPEN_FILES,
    }  # fmt: skip


async def test_the_credential_reaches_no_client_call_log_or_log_line(site: Site) -> None:
    logged: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(str(params.data))

    url = f"{site.url}/mcp/e2e-stdio"
    async with asyncio.timeout(60), connect(url, "legacy", logging_callback=on_log) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated in 2026-07-28, not in this session
            await client.set_logging_level("info")
        result = await client.call_tool("sdk_leak_env", {})
    assert result.content[0].text == "token=[redacted]"
    assert logged == ["log token=[redacted]"]
    secret = bridge_secret("", SECRET_KEY)
    await asyncio.to_thread(wait_until_idle, site.url)

    def call_log_text() -> str:
        try:
            return json.dumps(list(CallLog.objects.values()), default=str)
        finally:
            connections.close_all()  # this thread's own connection

    rows = await asyncio.to_thread(call_log_text)
    assert "token=[redacted]" in rows
    assert TOKEN not in rows and secret not in rows
    log = site.bridge_log.read_text()
    assert "leaking token=[redacted]" in log
    assert TOKEN not in log and secret not in log


async def test_a_crashed_child_is_replaced_on_the_next_call(site: Site) -> None:
    async with asyncio.timeout(60), connect(f"{site.url}/mcp/e2e-stdio", "legacy") as client:
        before = await structured(client, "sdk_pid")
        died = await client.call_tool("sdk_die", {})
        assert died.is_error
        after = await structured(client, "sdk_pid")
    assert after["result"] != before["result"]


async def test_a_server_failing_at_start_is_backed_off_with_a_clear_error(site: Site) -> None:
    async with asyncio.timeout(60), connect(f"{site.url}/mcp/e2e-stdio", "legacy") as client:
        first = await client.call_tool("broken_pid", {})
        second = await client.call_tool("broken_pid", {})
    assert first.is_error and second.is_error
    assert "exited before it answered initialize (exit status 4)" in first.content[0].text
    assert "failed to start 1 time(s) in a row" in second.content[0].text
    assert "failing at start as asked" in site.bridge_log.read_text()


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


async def test_a_request_without_the_bridge_secret_is_refused(site: Site) -> None:
    secret = bridge_secret("", SECRET_KEY)
    async with httpx.AsyncClient(base_url=site.bridge, timeout=30) as http:
        missing = await http.post("/sdk/mcp", json=INITIALIZE)
        wrong = await http.post("/sdk/mcp", json=INITIALIZE, headers={SECRET_HEADER: "guess"})
        right = await http.post("/sdk/mcp", json=INITIALIZE, headers={SECRET_HEADER: secret})
        session = right.headers["mcp-session-id"]
        await http.delete("/sdk/mcp", headers={SECRET_HEADER: secret, "Mcp-Session-Id": session})
    assert (missing.status_code, wrong.status_code) == (401, 401)
    assert right.status_code == 200 and right.json()["result"]["serverInfo"]


async def test_the_child_limit_of_an_upstream_holds(site: Site) -> None:
    headers = {SECRET_HEADER: bridge_secret("", SECRET_KEY)}
    async with httpx.AsyncClient(base_url=site.bridge, timeout=30, headers=headers) as http:
        first = await http.post("/capped/mcp", json=INITIALIZE)
        refused = await http.post("/capped/mcp", json=INITIALIZE)
        session = {"Mcp-Session-Id": first.headers["mcp-session-id"]}
        ended = await http.delete("/capped/mcp", headers=session)
        gone = await http.post("/capped/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
                               headers=session)  # fmt: skip
        again = await http.post("/capped/mcp", json=INITIALIZE)
        await http.delete(
            "/capped/mcp", headers={"Mcp-Session-Id": again.headers["mcp-session-id"]}
        )
    assert "result" in first.json()
    assert "mcp-session-id" not in refused.headers
    assert "1 sessions open, its limit" in refused.json()["error"]["message"]
    assert (ended.status_code, gone.status_code) == (200, 404)
    assert "result" in again.json()


def test_a_stdio_target_lets_the_network_guard_open_only_the_bridge(site: Site) -> None:
    with override_settings(SECRET_KEY=SECRET_KEY, MCP_SECRET_KEYS=""):
        target = async_to_sync(upstream_resolve)("sdk").target
        with pytest.raises(ToolError) as refused:
            async_to_sync(_tools)("at-bridge")
    assert target.url == f"{site.bridge}/sdk/mcp"
    assert (target.allow_hosts, target.allow_networks) == (("127.0.0.1",), ())
    assert "its address is not public" in refused.value.message


async def _tools(name: str) -> Any:
    try:
        return await upstream_list_tools(name)
    finally:
        await mcp_upstream.close_sessions()


def test_a_tool_list_change_of_the_program_marks_the_upstream_out_of_sync(site: Site) -> None:
    async def grow() -> None:
        async with asyncio.timeout(60), connect(f"{site.url}/mcp/e2e-stdio", "legacy") as client:
            assert (await client.call_tool("sdk_grow", {})).content[0].text == "grown"

    asyncio.run(grow())
    wait_until(
        lambda: Upstream.objects.get(name="sdk").tools_out_of_sync,
        "the list change reached the web side",
        timeout=20,
        interval=0.1,
    )


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _wait_gone(pid: int, timeout: float) -> None:
    wait_until(lambda: not _alive(pid), f"process {pid} ended", timeout=timeout)


async def _open_child(http: httpx.AsyncClient, upstream: str) -> tuple[str, int]:
    """Initialize a session of ``upstream`` on the bridge; return its id and child's pid."""
    opened = await http.post(f"/{upstream}/mcp", json=INITIALIZE)
    session = opened.headers["mcp-session-id"]
    notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await http.post(f"/{upstream}/mcp", json=notice, headers={"Mcp-Session-Id": session})
    return session, await _call(http, upstream, session, "pid")


async def _call(http: httpx.AsyncClient, upstream: str, session: str, tool: str) -> Any:
    """Call ``tool`` in the bridge session; return its structured result."""
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": tool, "arguments": {}}}  # fmt: skip
    answer = await http.post(f"/{upstream}/mcp", json=call, headers={"Mcp-Session-Id": session})
    data = [line[5:] for line in answer.text.splitlines() if line.startswith("data:")]
    return json.loads(data[-1])["result"]["structuredContent"]["result"]


async def test_ending_a_session_stops_everything_its_child_started(site: Site) -> None:
    headers = {SECRET_HEADER: bridge_secret("", SECRET_KEY)}
    async with httpx.AsyncClient(base_url=site.bridge, timeout=30, headers=headers) as http:
        session, pid = await _open_child(http, "sdk")
        sleeper = await _call(http, "sdk", session, "spawn_sleeper")
        assert _alive(sleeper)
        ended = await http.delete("/sdk/mcp", headers={"Mcp-Session-Id": session})
    assert ended.status_code == 200
    await asyncio.to_thread(_wait_gone, pid, 10.0)
    await asyncio.to_thread(_wait_gone, sleeper, 10.0)


async def test_the_bridge_ends_an_idle_session_and_its_child(site: Site) -> None:
    headers = {SECRET_HEADER: bridge_secret("", SECRET_KEY)}
    async with httpx.AsyncClient(base_url=site.bridge, timeout=30, headers=headers) as http:
        session, pid = await _open_child(http, "brief")
        await asyncio.to_thread(_wait_gone, pid, 20.0)
        ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
        gone = await http.post("/brief/mcp", json=ping, headers={"Mcp-Session-Id": session})
    assert gone.status_code == 404


async def test_the_bridge_stops_its_children_when_it_stops_streams_open(
    site: Site, tmp_path: Path
) -> None:
    headers = {SECRET_HEADER: bridge_secret("", SECRET_KEY)}
    with run_bridge(site.servers, tmp_path / "bridge.log", free_port()) as bridge:
        async with httpx.AsyncClient(base_url=bridge.url, timeout=30, headers=headers) as http:
            session, pid = await _open_child(http, "sdk")
            # The web side keeps a session's standalone stream open, and it never ends itself.
            session_header = {"Mcp-Session-Id": session}
            async with http.stream("GET", "/sdk/mcp", headers=session_header) as stream:
                assert stream.status_code == 200 and _alive(pid)
                bridge.process.terminate()
                await asyncio.to_thread(bridge.process.wait, 20)
    await asyncio.to_thread(_wait_gone, pid, 5.0)


@pytest.fixture(scope="module")
def background_url(site: Site, django_db_blocker: Any) -> Iterator[str]:
    """A web process and a Celery worker; the stdio upstream's tool runs on the worker."""
    with django_db_blocker.unblock():
        endpoint = make_endpoint("e2e-stdio-bg")
        tool = Tool(
            name="bg_progress",
            description="The stdio server's progress, on a worker.",
            kind=Tool.Kind.MCP_UPSTREAM,
            config={"upstream": "sdk", "tool": "progress"},
            input_schema={"type": "object"},
            execution_mode=Tool.Execution.BACKGROUND,
        )
        tool.full_clean()
        tool.save()
        endpoint.tools.add(tool)
    with (
        celery_worker(extra_env=site.stdio_env),
        asgi_server("daphne", {**BACKGROUND_ENV, **site.stdio_env}) as web,
    ):
        yield f"{web}/mcp/e2e-stdio-bg"


async def test_a_call_on_a_celery_worker_reaches_the_bridge(background_url: str) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with asyncio.timeout(60), connect(background_url, "legacy") as client:
        result = await client.call_tool("bg_progress", {"steps": 2}, progress_callback=on_progress)
    assert result.content[0].text == "done"
    assert seen == [1, 2]


# Last in the module: the web side follows list changes on a session the old bridge held, and
# notices the new bridge forgot it only when that session idles out (executors/mcp_upstream.py
# _listen), so a list-change test after this one would wait for that.
async def test_calls_recover_once_the_bridge_restarts(site: Site) -> None:
    async with asyncio.timeout(90), connect(f"{site.url}/mcp/e2e-stdio", "legacy") as client:
        before = await structured(client, "sdk_pid")
        await asyncio.to_thread(site.restart_bridge)
        # The web side's session is unknown to the new bridge (404): it starts a new one.
        after = await structured(client, "sdk_pid")
        assert await structured(client, "sdk_pid") == after
    assert not _alive(before["result"]) and after != before
