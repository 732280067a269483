"""Tool functions for the benchmarks (listed in MCP_PYTHON_TOOL_MODULES by bench scripts only)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from mcp_app.executors.python import mcp_tool_function
from mcp_app.protocol.context import ToolCallContext


@mcp_tool_function(
    "bench_progress",
    description="Reports progress `count` times, `interval` s apart; each message is the time.",
)
async def bench_progress(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    count = int(arguments.get("count", 20))
    interval = float(arguments.get("interval", 0.05))
    for step in range(1, count + 1):
        await asyncio.sleep(interval)
        # Wall clock, so the client on the same machine can tell how long the event took.
        await ctx.progress(step, count, repr(time.time()))
    return "done"
