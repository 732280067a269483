"""The rate limiter across a Redis restart (issue #27), under a real uvicorn process.

Redis is killed (SIGKILL) and started again on the same port: it has forgotten the counts and
the limiter's scripts, and the limiter's connection is dead. The next limited call must be
counted again, on a new connection, with the script sent again; not refused as "unavailable"
by a limit that fails closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx

from tests.faults.conftest import FaultStack, WebProcess, run_manage
from tests.faults.wire import MODERN_META, final_message, modern_headers, tool_call

SLUG = "faults-limited"
SEED = f"""
from mcp_app.models import RateLimit, Tool
from mcp_app.services.catalog_writes import endpoint_create
endpoint = endpoint_create(slug={SLUG!r}, auth_mode="public")
endpoint.tools.add(Tool.objects.get(name="echo"))
RateLimit.objects.create(endpoint=endpoint, rate=3, window="hour", on_redis_down="closed")
"""


async def _call(client: httpx.AsyncClient, url: str, request_id: int) -> dict[str, Any]:
    async with client.stream(
        "POST",
        url,
        headers=modern_headers("tools/call", "echo"),
        json=tool_call(request_id, "echo", {"message": "hi"}, **MODERN_META),
    ) as response:
        return (await final_message(response))["result"]


def _reason(result: dict[str, Any]) -> str | None:
    if not result.get("isError"):
        return None
    return result["_meta"]["mcphost/rateLimit"]["limit"]["reason"]


async def test_limits_count_again_after_redis_restarts(
    fault_stack: FaultStack, web_process: Callable[..., WebProcess]
) -> None:
    await asyncio.to_thread(run_manage, fault_stack.env, "shell", "-c", SEED)
    web = web_process("uvicorn")
    url = f"{web.base_url}/mcp/{SLUG}"
    async with httpx.AsyncClient(timeout=30) as client:
        assert _reason(await _call(client, url, 1)) is None
        await asyncio.to_thread(fault_stack.restart_redis)
        reasons = [_reason(await _call(client, url, i)) for i in range(2, 7)]
    # Counted from zero again (the restart lost the counts): three calls, then the rate.
    assert "unavailable" not in reasons, reasons
    assert reasons[:3] == [None, None, None]
    assert reasons[3:] == ["rate", "rate"]
