"""Redis killed (SIGKILL) and restarted on the same port, under real web processes and a worker.

Issue #13, items 2 and 3: streams must end cleanly when the channel layer dies (the client
reconnects), and the first channel-layer operations after the restart must not fail a request
or tell a client "failed" about a call that ran.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.faults.conftest import SLUG, FaultStack, WebProcess
from tests.faults.wire import (
    MODERN_META,
    final_message,
    modern_headers,
    session_headers,
    tool_call,
)
from tests.support.raw_mcp import open_session

SERVERS = ["daphne", "uvicorn"]


async def _drain(response: httpx.Response) -> bytes:
    """Read a stream to its end; a broken chunked body raises (httpx RemoteProtocolError)."""
    return b"".join([chunk async for chunk in response.aiter_raw()])


@pytest.mark.parametrize("server", SERVERS)
async def test_streams_end_cleanly_when_redis_dies(
    fault_stack: FaultStack, web_process: Callable[[str], WebProcess], server: str
) -> None:
    web = web_process(server)
    listen = {
        "jsonrpc": "2.0",
        "id": "listen-1",
        "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": True}, "_meta": MODERN_META},
    }
    async with httpx.AsyncClient(timeout=30) as client:
        session_id = await open_session(client, web.url)
        get_headers = {"accept": "text/event-stream", "mcp-session-id": session_id}
        async with (
            client.stream("GET", web.url, headers=get_headers) as legacy,
            client.stream(
                "POST",
                web.url,
                headers=modern_headers("subscriptions/listen"),
                json=listen,
            ) as modern,
        ):
            assert legacy.status_code == 200 and modern.status_code == 200
            try:
                fault_stack.redis.kill()
                # Both streams end (the client reconnects), with a well-formed chunked body.
                async with asyncio.timeout(8):
                    await asyncio.gather(_drain(legacy), _drain(modern))
            finally:
                fault_stack.redis.start()


async def test_a_request_during_a_database_outage_gets_503_with_its_id(
    fault_stack: FaultStack, web_process: Callable[[str], WebProcess]
) -> None:
    web = web_process("daphne")
    async with httpx.AsyncClient(timeout=30) as client:
        warm = await client.post(
            web.url, headers=modern_headers("tools/call", "echo"),
            json=tool_call(1, "echo", {"message": "hi"}, **MODERN_META),
        )  # fmt: skip
        assert warm.status_code == 200, warm.text
        fault_stack.postgres.stop("fast")
        # An endpoint the process holds in memory goes on answering (test_database_outage_
        # hot_path.py); one it has not loaded yet needs the database.
        not_loaded = web.url.replace(f"/mcp/{SLUG}", "/mcp/not-loaded-yet")
        try:
            async with asyncio.timeout(10):
                response = await client.post(
                    not_loaded, headers=modern_headers("tools/call", "echo"),
                    json=tool_call(42, "echo", {"message": "hi"}, **MODERN_META),
                )  # fmt: skip
        finally:
            fault_stack.postgres.start()
    assert response.status_code == 503
    assert int(response.headers["retry-after"]) > 0
    body = await final_message(response)
    assert body["id"] == 42
    assert body["error"]["code"] == -32603


async def _session_countdown(
    client: httpx.AsyncClient, url: str, session_id: str, request_id: int
) -> dict[str, Any]:
    """A 2025-11-25 call with progress: a resumable SSE stream fed from the worker."""
    async with client.stream(
        "POST",
        url,
        headers=session_headers(session_id),
        json=tool_call(request_id, "countdown", {"seconds": 1}, progressToken=f"p{request_id}"),
    ) as response:
        return await final_message(response)


async def _modern_countdown(client: httpx.AsyncClient, url: str, request_id: int) -> Any:
    response = await client.post(
        url,
        headers=modern_headers("tools/call", "countdown"),
        json=tool_call(request_id, "countdown", {"seconds": 1}, **MODERN_META),
    )
    return await final_message(response)


async def test_the_first_requests_after_a_redis_restart_succeed(
    fault_stack: FaultStack, web_process: Callable[[str], WebProcess]
) -> None:
    webs = [web_process("daphne"), web_process("uvicorn")]
    async with httpx.AsyncClient(timeout=30) as client:
        sessions = [await open_session(client, web.url) for web in webs]
        # Every process has used its channel layer, event store and broker connections.
        async with asyncio.timeout(30):
            for n, (web, session_id) in enumerate(zip(webs, sessions, strict=True)):
                assert "result" in await _session_countdown(client, web.url, session_id, n)
        await asyncio.to_thread(fault_stack.restart_redis)
        async with asyncio.timeout(20):
            for n, (web, session_id) in enumerate(zip(webs, sessions, strict=True)):
                get_headers = {"accept": "text/event-stream", "mcp-session-id": session_id}
                async with client.stream("GET", web.url, headers=get_headers) as stream:
                    assert stream.status_code == 200
                first = await _session_countdown(client, web.url, session_id, 10 + n)
                assert first["result"]["structuredContent"] == {"counted": 1}, first
                modern = await _modern_countdown(client, web.url, 20 + n)
                assert modern["result"]["structuredContent"] == {"counted": 1}, modern
