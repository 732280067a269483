"""Redis restarted under a web process that serves its endpoints from memory.

Issue #12/#13 (our choice): each web process hears of catalog changes on a Redis
subscription. When Redis restarts, the subscription is re-established by itself and everything
held is dropped once (pushes may have been lost meanwhile), so an edit made after the restart
reaches the process without waiting for the re-check interval (set to an hour here).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx

from tests.faults.conftest import FaultStack, WebProcess, run_manage
from tests.faults.wire import MODERN_META, modern_headers
from tests.support.waiting import await_until

LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN_META}}
WAIT_SECONDS = 30.0


async def echo_description(client: httpx.AsyncClient, url: str) -> str:
    response = await client.post(url, headers=modern_headers("tools/list"), json=LIST)
    assert response.status_code == 200, response.text
    return next(t["description"] for t in response.json()["result"]["tools"] if t["name"] == "echo")


def describe_echo(fault_stack: FaultStack, text: str) -> None:
    """Edit the tool in another process, as an operator's admin save would."""
    script = (
        "from mcp_app.models import Tool\n"
        "tool = Tool.objects.get(name='echo')\n"
        f"tool.description = {text!r}\n"
        "tool.save()\n"
    )
    run_manage(fault_stack.env, "shell", "-c", script)


async def test_edits_are_pushed_again_once_redis_is_back(
    fault_stack: FaultStack, web_process: Callable[..., WebProcess]
) -> None:
    web = web_process("uvicorn", {"MCP_CACHE_RECHECK_SECONDS": "3600"})
    async with httpx.AsyncClient(timeout=30) as client:
        before = await echo_description(client, web.url)
        await asyncio.to_thread(fault_stack.restart_redis)
        text = f"Edited after the Redis restart {time.monotonic_ns()}"
        await asyncio.to_thread(describe_echo, fault_stack, text)
        seen: list[str] = []

        async def edited() -> bool:
            seen.append(await echo_description(client, web.url))
            return seen[-1] == text

        await await_until(
            edited,
            "the edit seen",
            timeout=WAIT_SECONDS,
            interval=0.1,
            detail=lambda: f"still {seen[-1]!r} (was {before!r})",
        )
