"""A 2025-11-25 client resumes a background call's stream after its web process was SIGKILLed.

Issue #13, item 4: the process that followed the call is gone, so only the call's row knows
the outcome; the resumed stream on another process must deliver the response from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable

import httpx
import redis

from mcp_app.conf import redis_key
from tests.faults.conftest import FaultStack, WebProcess
from tests.faults.wire import session_headers, tool_call
from tests.support.raw_mcp import open_session, sse_events

SECONDS = 4


async def _orphan_a_call(
    client: httpx.AsyncClient, first: WebProcess, request_id: int
) -> tuple[str, str]:
    """Start a countdown on ``first`` and SIGKILL it mid-call: (session id, last event id)."""
    session_id = await open_session(client, first.url)
    last_id = None
    call = tool_call(request_id, "countdown", {"seconds": SECONDS}, progressToken="resume")
    async with asyncio.timeout(20):
        with contextlib.suppress(httpx.HTTPError):
            async with client.stream(
                "POST", first.url, headers=session_headers(session_id), json=call
            ) as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                async for event in sse_events(response):
                    last_id = event.get("id", last_id)
                    if '"notifications/progress"' in event.get("data", ""):
                        # The call runs on the worker; its follower dies mid-call.
                        first.kill()
                        break
    assert last_id is not None
    return session_id, last_id


def _resume_headers(session_id: str, last_id: str) -> dict[str, str]:
    return {
        "accept": "text/event-stream",
        "mcp-session-id": session_id,
        "mcp-protocol-version": "2025-11-25",
        "last-event-id": last_id,
    }


def _is_response(event: dict[str, str]) -> bool:
    return '"result"' in event.get("data", "") or '"error"' in event.get("data", "")


async def _response_events(
    client: httpx.AsyncClient, url: str, headers: dict[str, str]
) -> list[dict[str, str]]:
    """Resume at ``url``; return the response event the stream ends with (none if it ends so)."""
    found: list[dict[str, str]] = []
    async with client.stream("GET", url, headers=headers) as resumed:
        assert resumed.status_code == 200
        async for event in sse_events(resumed):
            if _is_response(event):
                found.append(event)
                break  # the stream ends after the response
    return found


async def test_a_resume_on_another_process_gets_the_result_of_a_dead_followers_call(
    fault_stack: FaultStack, web_process: Callable[[str], WebProcess]
) -> None:
    first, second = web_process("daphne"), web_process("daphne")
    async with httpx.AsyncClient(timeout=30) as client:
        session_id, last_id = await _orphan_a_call(client, first, 7)
        async with asyncio.timeout(25):
            found = await _response_events(client, second.url, _resume_headers(session_id, last_id))
    assert len(found) == 1
    response_event = found[0]
    message = json.loads(response_event["data"])
    assert message["id"] == 7
    assert message["result"]["structuredContent"] == {"counted": SECONDS}
    assert response_event["id"].startswith(last_id.rpartition(".")[0] + ".")
    assert fault_stack.call_rows()[0][1] == "completed"


async def test_two_resumes_at_once_append_the_orphaned_response_once(
    fault_stack: FaultStack, web_process: Callable[[str], WebProcess]
) -> None:
    first, second, third = web_process("daphne"), web_process("uvicorn"), web_process("daphne")
    async with httpx.AsyncClient(timeout=30) as client:
        session_id, last_id = await _orphan_a_call(client, first, 8)
        headers = _resume_headers(session_id, last_id)
        async with asyncio.timeout(25):
            # Both resumed streams are open before the call ends: both find it orphaned.
            got = await asyncio.gather(
                _response_events(client, second.url, headers),
                _response_events(client, third.url, headers),
            )
        assert [len(events) for events in got] == [1, 1]
    # Both sent the one stored event (the same id), and the stream holds one response.
    assert got[0][0]["id"] == got[1][0]["id"], got
    stream_id, _, seq = last_id.rpartition(".")
    store = redis.Redis.from_url(fault_stack.redis.url)
    try:
        assert store.zcount(redis_key(f"sse:{stream_id}:events"), f"({seq}", "+inf") == 1
    finally:
        store.close()
    assert json.loads(got[0][0]["data"])["id"] == 8
