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

from tests.faults.conftest import FaultStack, WebProcess
from tests.faults.wire import session_headers, tool_call
from tests.support.raw_mcp import open_session, sse_events

SECONDS = 4


async def test_a_resume_on_another_process_gets_the_result_of_a_dead_followers_call(
    fault_stack: FaultStack, web_process: Callable[[str], WebProcess]
) -> None:
    first, second = web_process("daphne"), web_process("daphne")
    async with httpx.AsyncClient(timeout=30) as client:
        session_id = await open_session(client, first.url)
        last_id = None
        call = tool_call(7, "countdown", {"seconds": SECONDS}, progressToken="resume")
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
        headers = {
            "accept": "text/event-stream",
            "mcp-session-id": session_id,
            "mcp-protocol-version": "2025-11-25",
            "last-event-id": last_id,
        }
        async with (
            asyncio.timeout(25),
            client.stream("GET", second.url, headers=headers) as resumed,
        ):
            assert resumed.status_code == 200
            response_event = None
            async for event in sse_events(resumed):
                if '"result"' in event.get("data", "") or '"error"' in event.get("data", ""):
                    response_event = event
                    break
    assert response_event is not None
    message = json.loads(response_event["data"])
    assert message["id"] == 7
    assert message["result"]["structuredContent"] == {"counted": SECONDS}
    assert response_event["id"].startswith(last_id.rpartition(".")[0] + ".")
    assert fault_stack.call_rows()[0][1] == "completed"
