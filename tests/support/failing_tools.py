"""A tool function that fails unexpectedly, for tests of what such a failure logs.

Listed in MCP_PYTHON_TOOL_MODULES by those tests (tests/ops/test_request_id.py).
"""

from __future__ import annotations

from typing import Any

from mcp_app.executors.python import mcp_tool_function
from mcp_app.protocol.context import ToolCallContext


@mcp_tool_function("test_explode", description="Raises an unexpected exception.")
async def explode(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    raise RuntimeError("exploded as asked")
