"""Tools of kind mcp_upstream against real upstream MCP servers on 127.0.0.1.

The upstream is the official SDK's server (``tests/support/mcp_upstream_server.py``) in a
subprocess, stateful and stateless; a tiny ``http.server`` answers junk. Calls go through
``services.execution.execute_tool`` as the runner makes them, so the Upstream row, its
credential, the SSRF guard and the breaker are all the real ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async

from mcp_app.executors import mcp_upstream
from mcp_app.models import Tool, Upstream
from mcp_app.protocol.catalog import ToolDef
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.results import ToolError, ToolResult
from mcp_app.services.credentials import credential_create
from mcp_app.services.execution import execute_tool
from mcp_app.services.snapshots import tool_def as build_tool_def
from mcp_app.services.upstream_targets import (
    upstream_list_tools,
    upstream_reset_breaker,
    upstream_target,
)
from tests.executors.conftest import Sent
from tests.support.mcp_upstream_server import RunningUpstream, run_mcp_upstream
from tests.support.upstream import OAUTH_CLIENT_ID, OAUTH_CLIENT_SECRET, run_upstream
from tests.support.waiting import await_until

pytestmark = pytest.mark.django_db(transaction=True)
LOOPBACK = "127.0.0.1/32"


@pytest.fixture(scope="module", params=["stateful", "stateless", "json"])
def server(request: pytest.FixtureRequest, tmp_path_factory: Any) -> Iterator[RunningUpstream]:
    markers = tmp_path_factory.mktemp(request.param)
    with run_mcp_upstream(
        markers, stateless=request.param == "stateless", json=request.param == "json"
    ) as running:
        yield running


@pytest.fixture(autouse=True)
async def _fresh_sessions() -> Any:
    yield
    await mcp_upstream.close_sessions()


def make_upstream(url: str, **fields: Any) -> Upstream:
    fields.setdefault("allow_networks", LOOPBACK)
    upstream = Upstream(name=fields.pop("name", "up"), url=url, **fields)
    upstream.full_clean()
    upstream.save()
    return upstream


def tool_def(remote: str, upstream: str = "up") -> ToolDef:
    tool = Tool(
        name=f"up_{remote}",
        description="An upstream tool.",
        kind=Tool.Kind.MCP_UPSTREAM,
        config={"upstream": upstream, "tool": remote},
    )
    tool.full_clean()
    tool.save()
    return build_tool_def(tool)


async def call(remote: str, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
    tool = await database_sync_to_async(tool_def)(remote)
    return await execute_tool(tool, arguments, ctx, 20)


async def reload(upstream: Upstream) -> Upstream:
    return await Upstream.objects.aget(pk=upstream.pk)


async def test_forwards_arguments_and_returns_text(server, ctx):
    await database_sync_to_async(make_upstream)(server.url)
    result = await call("echo", {"text": "hi there"}, ctx)
    assert not result.is_error
    assert result.content == [{"type": "text", "text": "hi there"}]


async def test_every_content_type_comes_back_unchanged(server, ctx):
    await database_sync_to_async(make_upstream)(server.url)
    result = await call("mixed", {}, ctx)
    assert [block["type"] for block in result.content] == ["text", "image", "resource"]
    assert result.content[1]["mimeType"] == "image/png"
    assert result.content[2]["resource"] == {
        "uri": "up://doc",
        "mimeType": "text/plain",
        "text": "doc",
    }
    assert result.structured == {"ok": True}
    assert result.meta == {"upstream": "yes"}


async def test_structured_content_and_error_results_pass_through(server, ctx):
    upstream = await database_sync_to_async(make_upstream)(server.url)
    added = await call("add", {"a": 2, "b": 40}, ctx)
    assert added.structured == {"sum": 42}
    failed = await call("fails", {}, ctx)
    assert failed.is_error
    assert failed.content == [{"type": "text", "text": "it broke"}]
    # An error the upstream reports is an answer: the upstream is healthy.
    row = await reload(upstream)
    assert row.consecutive_failures == 0
    assert row.last_success_at is not None
    assert row.protocol_version == "2025-11-25"


async def test_progress_and_logs_reach_our_caller(server, ctx, sent: Sent):
    await database_sync_to_async(make_upstream)(server.url)
    result = await call("progress", {"steps": 3}, ctx)
    assert result.content == [{"type": "text", "text": "done"}]
    if server.process.args[-1] == "--json":
        return  # a JSON-only upstream cannot stream notifications
    assert sent.methods() == ["notifications/message"] + ["notifications/progress"] * 3
    assert sent.messages[0]["params"]["data"] == "starting"
    progress = [message["params"] for message in sent.messages[1:]]
    assert progress[-1] == {
        "progressToken": "progress-1",
        "progress": 3,
        "total": 3,
        "message": "step 3",
    }


async def test_a_session_is_reused_across_calls(server, ctx):
    await database_sync_to_async(make_upstream)(server.url)
    await call("echo", {"text": "one"}, ctx)
    sessions = dict(mcp_upstream._sessions[asyncio.get_running_loop()])
    await call("echo", {"text": "two"}, ctx)
    assert mcp_upstream._sessions[asyncio.get_running_loop()] == sessions
    (session,) = sessions.values()
    if "--stateless" in server.process.args or "--json" in server.process.args:
        return
    assert session.session_id


async def test_calls_in_a_session_reuse_its_connection(server, ctx):
    # The answer ends the call's stream; reading it to that end keeps the connection for the
    # next call instead of opening one per call (docs/performance.md, "Upstream relay").
    await database_sync_to_async(make_upstream)(server.url)
    peers = [(await call("peer", {}, ctx)).content[0]["text"] for _ in range(5)]
    assert len(set(peers)) == 1, peers


async def test_concurrent_first_calls_open_one_session(server, ctx):
    await database_sync_to_async(make_upstream)(server.url)
    texts = [f"call {number}" for number in range(8)]
    results = await asyncio.gather(*(call("echo", {"text": text}, ctx) for text in texts))
    assert [result.content[0]["text"] for result in results] == texts
    assert len(mcp_upstream._sessions[asyncio.get_running_loop()]) == 1


async def test_cancelling_our_call_cancels_the_upstream_request(server, ctx, sent: Sent):
    if "--json" in server.process.args:
        pytest.skip("a JSON-only upstream sends no progress to wait for")
    await database_sync_to_async(make_upstream)(server.url)
    marker = server.markers / "cancelled"
    marker.unlink(missing_ok=True)
    task = asyncio.create_task(call("wait_for_cancel", {}, ctx))

    def inside() -> bool:  # the upstream is inside the tool once it reported progress
        assert not task.done()
        return bool(sent.messages)

    await await_until(inside, "progress from inside the tool", timeout=10, interval=0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await await_until(marker.exists, "the upstream saw the cancellation", timeout=10, interval=0.02)


async def test_a_question_our_caller_cannot_answer_is_refused_to_the_upstream(server, ctx):
    if "--stateless" in server.process.args or "--json" in server.process.args:
        pytest.skip("only a stateful streaming upstream can ask mid-call")
    await database_sync_to_async(make_upstream)(server.url)
    # ctx's client declared no elicitation: the upstream gets an error, which it (the SDK
    # server) turns into a JSON-RPC error of the call, naming what was missing.
    with pytest.raises(ToolError, match="elicitation capability"):
        await call("ask_name", {}, ctx)


async def test_a_short_lived_loop_closes_its_upstream_client(server):
    # As a Celery worker runs a background call: asyncio.run, one loop per call.
    target = mcp_upstream.UpstreamTarget(
        key="short-lived", name="up", url=server.url, allow_networks=(LOOPBACK,)
    )

    def one_call() -> mcp_upstream._Session:
        async def listed() -> mcp_upstream._Session:
            await mcp_upstream.list_tools(target)
            return mcp_upstream._sessions[asyncio.get_running_loop()]["short-lived"]

        return asyncio.run(listed())

    session = await asyncio.to_thread(one_call)
    assert session.client.is_closed


async def test_an_upstream_list_changed_marks_its_tools_out_of_sync(tmp_path: Path, ctx):
    with run_mcp_upstream(tmp_path) as running:
        upstream = await database_sync_to_async(make_upstream)(running.url)
        await call("echo", {"text": "open the session"}, ctx)
        (session,) = mcp_upstream._sessions[asyncio.get_running_loop()].values()
        # The upstream's own stream (GET) is open.
        await await_until(
            lambda: session.listening, "the notification stream open", timeout=10, interval=0.02
        )
        assert not (await reload(upstream)).tools_out_of_sync
        await call("grow", {}, ctx)

        async def recorded() -> bool:
            return (await reload(upstream)).tools_out_of_sync

        await await_until(recorded, "list_changed recorded", timeout=10, interval=0.02)
        tools = await upstream_list_tools("up")
    assert "grown" in {tool["name"] for tool in tools}


async def test_a_slow_upstream_times_out_and_is_cancelled_there(server, ctx):
    if "--json" in server.process.args:
        pytest.skip("a JSON-only upstream cannot be cancelled mid-response here")
    await database_sync_to_async(make_upstream)(server.url, call_timeout=1.0)
    marker = server.markers / "cancelled"
    marker.unlink(missing_ok=True)
    # The upstream still answers (a ping): its tool is slow, the upstream is not down.
    with pytest.raises(mcp_upstream.UpstreamToolSlow, match="within 1 s"):
        await call("wait_for_cancel", {}, ctx)
    await await_until(marker.exists, "the upstream saw the cancellation", timeout=10, interval=0.02)


async def test_a_loopback_upstream_is_refused_unless_allowed(server, ctx):
    await database_sync_to_async(make_upstream)(server.url, allow_networks="")
    with pytest.raises(ToolError, match="not allowed"):
        await call("echo", {"text": "x"}, ctx)


def test_allow_networks_must_be_networks():
    upstream = Upstream(name="bad", url="http://127.0.0.1/mcp", allow_networks="nonsense")
    with pytest.raises(Exception, match="CIDR"):
        upstream.full_clean()


async def test_the_credential_goes_upstream_and_never_back(server, ctx):
    def setup() -> None:
        credential = credential_create(name="up-token", kind="bearer", secret="s3cret-up")
        make_upstream(server.url, credential=credential)

    await database_sync_to_async(setup)()
    result = await call("headers", {}, ctx)
    # The upstream received the secret ...
    assert "Bearer s3cret-up" in (server.markers / "headers").read_text()
    # ... and our caller never sees it, even when the upstream echoes it.
    assert "s3cret-up" not in repr(result.content) + repr(result.structured)
    assert result.structured == {"authorization": "Bearer [redacted]", "x_api_key": None}


async def test_an_oauth_client_credentials_token_is_fetched_and_sent(server, ctx):
    if "--stateless" in server.process.args or "--json" in server.process.args:
        pytest.skip("the credential path does not depend on the transport mode")
    with run_upstream() as token_server:

        def setup() -> None:
            credential = credential_create(
                name="up-oauth",
                kind="oauth_client_credentials",
                secret=OAUTH_CLIENT_SECRET,
                client_id=OAUTH_CLIENT_ID,
                token_url=token_server.url("/token"),
                scopes="tools",
            )
            make_upstream(server.url, credential=credential)

        await database_sync_to_async(setup)()
        result = await call("headers", {}, ctx)
    assert "Bearer access-1-tools" in (server.markers / "headers").read_text()
    assert result.structured == {"authorization": "Bearer [redacted]", "x_api_key": None}


async def test_discovery_lists_every_tool_with_schemas(server):
    await database_sync_to_async(make_upstream)(server.url)
    tools = await upstream_list_tools("up")
    by_name = {tool["name"]: tool for tool in tools}
    assert {"echo", "add", "mixed", "progress", "headers"} <= set(by_name)
    assert by_name["add"]["inputSchema"]["required"] == ["a", "b"]


async def test_a_disabled_upstream_fails_at_once(server, ctx):
    await database_sync_to_async(make_upstream)(server.url, enabled=False)
    with pytest.raises(ToolError, match="disabled"):
        await call("echo", {"text": "x"}, ctx)


# --- failing upstreams -------------------------------------------------------------------


class _Junk(BaseHTTPRequestHandler):
    hits = 0

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    endless = False
    # Answers the handshake well, then every request with a result of the wrong shape.
    half_mcp = False

    def do_POST(self) -> None:  # noqa: N802  (http.server's name)
        type(self).hits += 1
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.endless:
            self._endless_event()
            return
        if self.half_mcp:
            self._half_mcp(json.loads(raw))
            return
        body = b"<html>this is not MCP</html>"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _half_mcp(self, message: dict[str, Any]) -> None:
        if "id" not in message:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if message["method"] == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"completions": {}, "prompts": {}},
                "serverInfo": {"name": "half", "version": "0"},
            }
        else:
            result = {"completion": {"values": [1, 2]}, "messages": "none", "contents": {}}
        body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _endless_event(self) -> None:
        # One SSE data line that never ends, past the response cap.
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b"data: ")
        chunk = b"x" * 65536
        with contextlib.suppress(OSError):  # the client hangs up once past its cap
            for _ in range(2 * mcp_upstream.MAX_RESPONSE_BYTES // len(chunk)):
                self.wfile.write(chunk)
            # Then hold the line open: a client that waits for its end waits forever.
            self.connection.settimeout(10)
            self.rfile.read(1)


@pytest.fixture
def junk() -> Iterator[str]:
    _Junk.hits = 0
    _Junk.endless = False
    _Junk.half_mcp = False
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Junk)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/mcp"
    httpd.shutdown()
    httpd.server_close()


class _Forgetful(BaseHTTPRequestHandler):
    """A stateful upstream that forgets its sessions when told (a restart), and can hold its
    404 for the forgotten session until the test releases it."""

    sessions = 0
    forgotten: set[str] = set()
    holding = threading.Event()
    release = threading.Event()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:  # noqa: N802  (no stream of its own: no listener races here)
        self._answer(405, b"")

    def do_POST(self) -> None:  # noqa: N802
        message = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        session = self.headers.get("Mcp-Session-Id", "")
        if "id" not in message:
            self._answer(202, b"")
            return
        if message["method"] == "initialize":
            type(self).sessions += 1
            result: dict[str, Any] = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "forgetful", "version": "0"},
            }
            self._answer(200, _reply(message, result), f"s{self.sessions}")
            return
        if session in self.forgotten:
            self.holding.set()
            self.release.wait(10)
            self._answer(404, b"")
            return
        text = message["params"]["arguments"]["text"]
        self._answer(200, _reply(message, {"content": [{"type": "text", "text": text}]}))

    def _answer(self, status: int, body: bytes, session: str = "") -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if session:
            self.send_header("Mcp-Session-Id", session)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _reply(message: dict[str, Any], result: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()


@pytest.fixture
def forgetful() -> Iterator[str]:
    _Forgetful.sessions = 0
    _Forgetful.forgotten = set()
    _Forgetful.holding.clear()
    _Forgetful.release.clear()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Forgetful)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/mcp"
    _Forgetful.release.set()
    httpd.shutdown()
    httpd.server_close()


async def test_a_404_for_a_session_reset_meanwhile_still_opens_a_new_one(forgetful, ctx):
    """The upstream restarted: a call and the session's listener both meet the 404, and the
    listener resets the session first. The call must still see a forgotten session (and open
    a new one), not an upstream answering 404."""
    await database_sync_to_async(make_upstream)(forgetful)
    assert (await call("echo", {"text": "first"}, ctx)).content[0]["text"] == "first"
    (session,) = mcp_upstream._sessions[asyncio.get_running_loop()].values()
    _Forgetful.forgotten.add("s1")

    pending = asyncio.create_task(call("echo", {"text": "again"}, ctx))
    assert await asyncio.to_thread(_Forgetful.holding.wait, 10)
    await mcp_upstream._expire(session, "s1")  # what the listener does on its own 404
    _Forgetful.release.set()
    result = await pending

    assert not result.is_error, result.content
    assert result.content == [{"type": "text", "text": "again"}]
    assert _Forgetful.sessions == 2


async def test_an_upstream_answering_garbage_is_an_error_and_recorded(junk, ctx):
    upstream = await database_sync_to_async(make_upstream)(junk)
    with pytest.raises(ToolError, match="invalid JSON"):
        await call("echo", {"text": "x"}, ctx)
    row = await reload(upstream)
    assert row.consecutive_failures == 1
    assert "invalid JSON" in row.last_error


@pytest.mark.parametrize(
    ("ask", "needle"),
    [
        (
            lambda t: mcp_upstream.complete(t, {"type": "ref/prompt", "name": "p"}, "a", "", {}),
            "malformed completion",
        ),
        (lambda t: mcp_upstream.get_prompt(t, "p", {}), "malformed prompt"),
        (lambda t: mcp_upstream.read_resource(t, "up://x"), "malformed contents"),
    ],
)
async def test_results_of_the_wrong_shape_are_refused(junk, ask, needle):
    _Junk.half_mcp = True
    await database_sync_to_async(make_upstream)(junk)
    target = await upstream_target("up")

    with pytest.raises(mcp_upstream.UpstreamUnavailable, match=needle):
        await ask(target)


async def test_an_endless_event_is_cut_at_the_response_cap(junk, ctx):
    _Junk.endless = True
    # Reading 16 MiB past the cap takes seconds on a busy machine: the limit is only there so
    # that a relay that never stops reading fails (by its time, not by the cap) instead of
    # hanging.
    await database_sync_to_async(make_upstream)(junk, call_timeout=30)
    with pytest.raises(ToolError, match="larger than the limit"):
        await call("echo", {"text": "x"}, ctx)


async def test_the_breaker_opens_after_consecutive_failures_and_fails_fast(junk, ctx):
    upstream = await database_sync_to_async(make_upstream)(
        junk, failure_threshold=2, cooldown_seconds=600
    )
    for _ in range(2):
        with pytest.raises(ToolError, match="invalid JSON"):
            await call("echo", {"text": "x"}, ctx)
    assert _Junk.hits == 2
    with pytest.raises(ToolError, match="circuit breaker open"):
        await call("echo", {"text": "x"}, ctx)
    assert _Junk.hits == 2  # failed fast: the upstream was not contacted
    row = await reload(upstream)
    assert row.circuit_open
    await database_sync_to_async(upstream_reset_breaker)(row)
    with pytest.raises(ToolError, match="invalid JSON"):
        await call("echo", {"text": "x"}, ctx)
    assert _Junk.hits == 3


async def test_an_upstream_that_dies_mid_call(tmp_path: Path, ctx):
    with run_mcp_upstream(tmp_path) as running:
        upstream = await database_sync_to_async(make_upstream)(running.url)
        with pytest.raises(ToolError, match="upstream"):
            await call("die", {}, ctx)
    row = await reload(upstream)
    assert row.consecutive_failures == 1
    assert row.last_error


async def test_a_restarted_upstream_gets_a_new_session(tmp_path: Path, ctx):
    with run_mcp_upstream(tmp_path) as first:
        await database_sync_to_async(make_upstream)(first.url)
        await call("echo", {"text": "before"}, ctx)
        port = first.port
    (session,) = mcp_upstream._sessions[asyncio.get_running_loop()].values()
    old_id = session.session_id
    with run_mcp_upstream(tmp_path, port=port):
        # The new process answers the old session id with 404: reopened, call succeeds.
        result = await call("echo", {"text": "after"}, ctx)
    assert result.content == [{"type": "text", "text": "after"}]
    assert session.session_id and session.session_id != old_id


async def _listening(session: mcp_upstream._Session, deadline: float) -> None:
    while not session.listening:  # the upstream's own stream (GET) is open
        assert time.monotonic() < deadline, "the notification stream never opened"
        await asyncio.sleep(0.02)


async def test_requests_on_the_upstreams_own_stream_are_answered_at_once(tmp_path: Path, ctx):
    with run_mcp_upstream(tmp_path) as running:
        upstream = await database_sync_to_async(make_upstream)(running.url)
        await call("echo", {"text": "open the session"}, ctx)
        (session,) = mcp_upstream._sessions[asyncio.get_running_loop()].values()
        await _listening(session, time.monotonic() + 10)
        result = await call("ask_unrelated", {}, ctx)
    assert result.content == [{"type": "text", "text": "asked"}]
    seen = json.loads((tmp_path / "unrelated").read_text())
    # A ping is answered; a question related to no call is refused with a reason, at once
    # (the upstream waits up to 5 s for each, and records "no answer" after that).
    assert seen["ping"] == "answered"
    assert seen["sampling"].startswith("error -32600: sampling/createMessage is relayed")
    assert "related to no call" in seen["sampling"]
    row = await reload(upstream)
    assert (row.consecutive_failures, row.last_error) == (0, "")


async def test_a_list_changed_right_after_an_upstream_restart_is_heard(tmp_path: Path, ctx):
    with run_mcp_upstream(tmp_path) as first:
        upstream = await database_sync_to_async(make_upstream)(first.url)
        await call("echo", {"text": "open the session"}, ctx)
        (session,) = mcp_upstream._sessions[asyncio.get_running_loop()].values()
        await _listening(session, time.monotonic() + 10)
        port, old_id = first.port, session.session_id
    # Restarted, and no call comes: only the listener can notice that its session is gone.
    with run_mcp_upstream(tmp_path, port=port, announce=True):

        async def changed() -> bool:
            return (await reload(upstream)).tools_changed_at is not None

        await await_until(changed, "the list_changed after the restart", timeout=30)
    assert session.session_id != old_id
