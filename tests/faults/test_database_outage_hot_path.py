"""PostgreSQL stopped under a web process whose endpoint and session are held in memory.

Issue #12 (our choice, not the spec's): a cached endpoint keeps answering ``tools/list`` and
inline calls that need no database while PostgreSQL is briefly unavailable, in both eras; the
calls' call-log rows wait in the writer's queue and are all written once it is back. What is
not cached (an endpoint never seen) gets 503 with Retry-After meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx

from tests.faults.conftest import FaultStack, WebProcess
from tests.faults.wire import MODERN_META, modern_headers, session_headers, tool_call
from tests.support.raw_mcp import open_session
from tests.support.waiting import await_until

LIST = {"jsonrpc": "2.0", "id": "list", "method": "tools/list", "params": {"_meta": MODERN_META}}
CALLS_DURING_OUTAGE = 5


async def serve_round(client: httpx.AsyncClient, url: str, session: str, tag: str) -> None:
    """One tools/list and one echo call in each era; every one must be answered with 200."""
    listing = await client.post(url, headers=modern_headers("tools/list"), json=LIST)
    assert listing.status_code == 200, listing.text
    assert {tool["name"] for tool in listing.json()["result"]["tools"]} == {"countdown", "echo"}
    modern = await client.post(
        url,
        headers=modern_headers("tools/call", "echo"),
        json=tool_call(f"m-{tag}", "echo", {"message": tag}, **MODERN_META),
    )
    assert modern.status_code == 200, modern.text
    assert modern.json()["result"]["content"][0]["text"] == tag
    legacy = await client.post(
        url, headers=session_headers(session), json=tool_call(f"l-{tag}", "echo", {"message": tag})
    )
    assert legacy.status_code == 200, legacy.text
    assert legacy.json()["result"]["content"][0]["text"] == tag


def echo_rows(fault_stack: FaultStack, tag_prefix: str) -> int:
    rows = fault_stack.postgres.query(
        "SELECT count(*) FROM mcp_app_calllog WHERE rpc_method = 'tools/call'"
        " AND target = 'echo' AND rpc_id LIKE %s",
        f'"_-{tag_prefix}%',
    )
    return int(rows[0][0])


async def test_cached_endpoints_answer_while_the_database_is_down(
    fault_stack: FaultStack, web_process: Callable[..., WebProcess]
) -> None:
    # Re-checks fall due during the outage: they fail, and what is held goes on being served.
    web = web_process("uvicorn", {"MCP_CACHE_RECHECK_SECONDS": "0.2"})
    unknown = web.url.replace("/mcp/faults", "/mcp/never-seen")
    prefix = f"t{time.monotonic_ns()}"
    async with httpx.AsyncClient(timeout=30) as client:
        async with asyncio.timeout(30):
            session = await open_session(client, web.url)
            await serve_round(client, web.url, session, f"{prefix}-before")
        fault_stack.postgres.stop("fast")
        try:
            async with asyncio.timeout(60):
                for n in range(CALLS_DURING_OUTAGE):
                    await serve_round(client, web.url, session, f"{prefix}-down{n}")
                refused = await client.post(
                    unknown, headers=modern_headers("tools/list"), json=LIST
                )
        finally:
            fault_stack.postgres.start()
    assert refused.status_code == 503, refused.text
    assert "retry-after" in refused.headers
    # Two echo calls per round (one per era); the writer retries until the database is back.
    expected = 2 * (CALLS_DURING_OUTAGE + 1)
    await await_until(
        lambda: echo_rows(fault_stack, prefix) >= expected,
        f"{expected} call-log rows written",
        timeout=60,
        interval=0.2,
        detail=lambda: f"{echo_rows(fault_stack, prefix)} written",
    )
    assert echo_rows(fault_stack, prefix) == expected
