"""Tool functions for background-call tests; listed in MCP_PYTHON_TOOL_MODULES by those tests."""

from __future__ import annotations

import time
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
