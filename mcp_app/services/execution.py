"""Running one tool through the executor of its kind, under a time limit.

The same function runs a call inline in the web process and on a Celery worker
(``services.background``): executors never know where they run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_app.executors import get_executor
from mcp_app.protocol.catalog import ToolDef
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.results import ToolResult, ToolTimeout
from mcp_app.services.catalog import ToolKey
from mcp_app.services.credentials import credential_resolve_for_tool
from mcp_app.services.deadlines import Deadline
from mcp_app.services.upstreams import upstream_run


async def execute_tool(
    tool: ToolDef, arguments: Mapping[str, Any], ctx: ToolCallContext, seconds: float
) -> ToolResult:
    """Run ``tool`` with its executor, stopped after ``seconds``.

    Raises:
        ToolError: the tool failed in a way the caller should read.
        ToolTimeout: the tool ran past ``seconds``.
    """
    key: ToolKey = tool.key
    executor = get_executor(key.kind)
    deadline = Deadline(seconds)
    try:
        async with deadline:
            config = key.config
            if key.kind == "http":
                # Executors read no rows: the credential's secret is decrypted here.
                config = await credential_resolve_for_tool(config=config)
            elif key.kind == "mcp_upstream":
                return await upstream_run(executor, config, arguments, ctx)
            return await executor.run(config, arguments, ctx)
    except TimeoutError:
        # A TimeoutError of the tool's own (an upstream call, say) is not this deadline.
        if not deadline.expired():
            raise
        raise ToolTimeout(f"Tool timed out after {seconds:g} s") from None
