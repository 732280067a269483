"""Redis killed (SIGKILL) and restarted on the same port, under real web processes and a worker.

Issue #13, items 2 and 3: streams must end cleanly when the channel layer dies (the client
reconnects), and the first channel-layer operations after the restart must not fail a request
or tell a client "failed" about a call that ran.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import pytest

from tests.faults.conftest import FaultStack, WebProcess
from tests.faults.wire import MODERN_META, final_message, modern_headers, tool_call
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
        try:
            async with asyncio.timeout(10):
                response = await client.post(
                    web.url, headers=modern_headers("tools/call", "echo"),
                    json=tool_call(42, "echo", {"message": "hi"}, **MODERN_META),
                )  # fmt: skip
        finally:
            fault_stack.postgres.start()
    assert response.status_code == 503
    assert int(response.headers["retry-after"]) > 0
    body = await final_message(response)
    assert body["id"] == 42
    assert body["error"]["code"] == -32603
