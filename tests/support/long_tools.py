"""Tool functions for background-call tests; listed in MCP_PYTHON_TOOL_MODULES by those tests."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from mcp_app.executors.python import mcp_tool_function
from mcp_app.protocol.context import ToolCallContext


@mcp_tool_function(
    "test_block_loop",
    description="Blocks its worker's event loop: only the hard time limit can stop it.",
)
async def block_loop(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    time.sleep(float(arguments.get("seconds", 30)))  # deliberately blocking
    return "unblocked"


@mcp_tool_function(
    "test_ask_when_told",
    description="Waits until the file at arguments.path exists, then asks the client to confirm.",
)
async def ask_when_told(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    # A file, not a sleep: the test decides the moment the question is asked (in an outage).
    path = Path(str(arguments["path"]))
    while not path.exists():
        await asyncio.sleep(0.05)
    schema = {"type": "object", "properties": {"confirm": {"type": "boolean"}}}
    answer = await ctx.elicit("Go on?", schema, key="go_on")
    return f"answered {answer.get('action')}"
