"""A tool function that names its caller, for tests where an endpoint of ours is the
protected upstream of another (per-user OAuth): the caller it names is the user whose token
the relay sent.

Listed in MCP_PYTHON_TOOL_MODULES by those tests (tests/e2e/test_upstream_user_oauth.py).
"""

from __future__ import annotations

from typing import Any

from mcp_app.executors.python import mcp_tool_function
from mcp_app.protocol.context import ToolCallContext


@mcp_tool_function("test_whoami", description="Names the user whose token this call carries.")
async def whoami(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    return ctx.request.principal.split("/", 1)[0] or "anonymous"
