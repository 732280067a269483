"""A running 2026-07-28 call cut short by the server (its shutdown, Daphne's close timeout)
or by its client (the stream closed); and a legacy call whose client departs, which goes on.

Pinned for any change to how the consumer runs the handler (issue #29 tried running it in
the ASGI task): the server's cancellation leaves the application as a ``CancelledError``, a
client that goes away is not one and the application returns normally; either way no answer
goes out and the call is recorded as cancelled. In-process, on real PostgreSQL and Redis.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from mcp_app.models import CallLog
from mcp_app.services.calllog.writer import call_log_flush
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.inprocess import acall, encode_headers, http_scope
from tests.support.waiting import await_until, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

SLUG = "server-cancel"


def _headers(agent: str) -> list[tuple[bytes, bytes]]:
    return encode_headers(
        {
            "host": "127.0.0.1",
            "user-agent": agent,
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/call",
            "mcp-name": "sleep_with_progress",
        }
    )


def _body() -> bytes:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "progressToken": "p",
    }
    arguments = {"seconds": 5, "steps": 50}
    params = {"name": "sleep_with_progress", "arguments": arguments, "_meta": meta}
    return json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    ).encode()


def _keep_alives() -> list[asyncio.Task[Any]]:
    """The response streams' keep-alive tasks on the running loop."""
    return [
        task
        for task in asyncio.all_tasks()
        if getattr(task.get_coro(), "__qualname__", "") == "RequestStream._keep_alive"
    ]


async def _run(
    agent: str,
    *,
    client_leaves: bool,
    headers: list[tuple[bytes, bytes]] | None = None,
    body: bytes | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """Start the call (a 2026-07-28 one unless ``headers`` and ``body`` say otherwise); then
    the server cancels it, or the client goes: how the app ended, and what it sent."""
    from mcpsite.asgi import application

    body = _body() if body is None else body
    headers = _headers(agent) if headers is None else headers
    incoming = [{"type": "http.request", "body": body, "more_body": False}]
    leave = asyncio.Event()
    streaming = asyncio.Event()
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop()
        await leave.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if b"notifications/progress" in message.get("body", b""):
            streaming.set()

    app = asyncio.ensure_future(application(http_scope(f"/mcp/{SLUG}", headers), receive, send))
    # The call runs once its first progress notification is out.
    async with asyncio.timeout(10):
        await streaming.wait()
    # The stream is SSE now: its keep-alive task runs.
    assert _keep_alives()
    if client_leaves:
        leave.set()
    else:
        app.cancel()
    async with asyncio.timeout(10):
        try:
            await app
        except asyncio.CancelledError:
            return "cancelled", sent
    return "returned", sent


@pytest.mark.parametrize(("client_leaves", "ended"), [(False, "cancelled"), (True, "returned")])
def test_a_cancelled_call_leaves_the_app_as_before_and_is_recorded_cancelled(
    client_leaves: bool, ended: str
) -> None:
    make_endpoint(SLUG).tools.add(make_python_tool("sleep_with_progress", "sleep_with_progress"))
    agent = f"server-cancel-{uuid.uuid4()}"

    how, sent = async_to_sync(_run)(agent, client_leaves=client_leaves)

    assert how == ended
    # No response went out for a call that did not end.
    assert not any(b'"result"' in message.get("body", b"") for message in sent)
    wait_until(
        lambda: call_log_flush(timeout=10) and CallLog.objects.filter(user_agent=agent).exists(),
        "the call's row",
    )
    row = CallLog.objects.get(user_agent=agent)
    assert (row.rpc_method, row.status, row.http_status) == ("tools/call", "cancelled", 200)


async def _run_then_await_keep_alives_gone(agent: str, *, client_leaves: bool) -> None:
    await _run(agent, client_leaves=client_leaves)
    await await_until(lambda: not _keep_alives(), "the stream's keep-alive task ended", timeout=5)


@pytest.mark.parametrize("client_leaves", [False, True])
def test_a_cancelled_calls_keep_alive_task_ends(client_leaves: bool) -> None:
    """Our choice: the stream's timers stop with its request, however it ends (issue #29:
    the client's departure left the keep-alive writing into nothing until the process ended)."""
    make_endpoint(SLUG).tools.add(make_python_tool("sleep_with_progress", "sleep_with_progress"))
    agent = f"server-cancel-{uuid.uuid4()}"

    async_to_sync(_run_then_await_keep_alives_gone)(agent, client_leaves=client_leaves)

    wait_until(
        lambda: call_log_flush(timeout=10) and CallLog.objects.filter(user_agent=agent).exists(),
        "the call's row",
    )


async def _legacy_call_whose_client_departs(agent: str) -> None:
    headers = {
        "host": "127.0.0.1",
        "user-agent": agent,
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
    }
    client = {"name": "departing", "version": "1"}
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    answer = await acall(f"/mcp/{SLUG}", json.dumps(init).encode(), encode_headers(headers))
    headers["mcp-session-id"] = answer.header("mcp-session-id") or ""
    headers["mcp-protocol-version"] = "2025-11-25"
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await acall(f"/mcp/{SLUG}", json.dumps(initialized).encode(), encode_headers(headers))
    arguments = {"seconds": 60, "steps": 100}
    params = {"name": "sleep_with_progress", "arguments": arguments, "_meta": {"progressToken": 1}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}

    how, _ = await _run(
        agent, client_leaves=True, headers=encode_headers(headers), body=json.dumps(call).encode()
    )

    assert how == "returned"
    await await_until(lambda: not _keep_alives(), "the stream's keep-alive task ended", timeout=5)
    # Only the response ended: the call goes on without its client, as before 2026-07-28.
    assert any(
        getattr(task.get_coro(), "__qualname__", "") == "StreamableHttpConsumer._handle"
        for task in asyncio.all_tasks()
    )


def test_a_legacy_calls_keep_alive_task_ends_when_its_client_departs() -> None:
    """Our choice: the call runs on (a legacy disconnect is no cancellation), but nothing is
    written to the gone client any more, keep-alives included (issue #29)."""
    make_endpoint(SLUG).tools.add(make_python_tool("sleep_with_progress", "sleep_with_progress"))
    agent = f"legacy-departs-{uuid.uuid4()}"

    async_to_sync(_legacy_call_whose_client_departs)(agent)

    # The event loop's end cancelled the call that was still running.
    wait_until(
        lambda: (
            call_log_flush(timeout=10)
            and CallLog.objects.filter(user_agent=agent, rpc_method="tools/call").exists()
        ),
        "the call's row",
    )
