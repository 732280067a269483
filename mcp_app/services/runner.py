"""The catalog's implementation of the protocol port ToolRunner.

``CatalogToolRunner`` runs a tool through the executor of its kind, inline under the inline
timeout, or on a Celery worker (``services.background.web``) for a background tool. A
2026-07-28 inline call of an executor that relays another server's questions is held open
between rounds (``services.continuations``), and a retry naming such a run resumes it. The
resource reader is ``services.resources``.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from typing import Any

from mcp_app.conf import get_conf
from mcp_app.protocol.catalog import ToolDef
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.results import ToolResult
from mcp_app.services import continuations
from mcp_app.services.background.web import arun_on_worker
from mcp_app.services.execution import execute_tool
from mcp_app.services.snapshots import ToolBinding


class CatalogToolRunner:
    """Runs catalog tools inline (stopped after MCP_INLINE_TOOL_TIMEOUT_SECONDS) or on a worker."""

    def __init__(self, *, inline_seconds: float | None = None) -> None:
        # A tighter bound on inline runs than the setting's (a replay's per-call bound).
        self.inline_seconds = inline_seconds

    async def run_tool(
        self, tool: ToolDef, arguments: Mapping[str, Any], ctx: ToolCallContext
    ) -> ToolResult:
        """Run ``tool`` with its executor, here or on a Celery worker (Tool.execution_mode).

        A background call's result comes back finished on its worker (``detail`` says
        where it ran, ``outcome`` whether it timed out there).

        Raises:
            ToolError: the tool failed in a way the caller should read.
            ToolTimeout: the tool ran past its time limit.
            CallCancelled: a background call was cancelled from another process.
            InputRequired, McpError: a background call's tool asked the client, or failed
                with a protocol error; a held run asked (again) or failed so.
            InvalidParams: the held run a retry names no longer waits for it.
        """
        key: ToolBinding = tool.binding
        if ctx.inputs.continuation:
            return await continuations.aresume(ctx)
        if key.execution == "background":
            return await arun_on_worker(tool, arguments, ctx)
        seconds = get_conf().MCP_INLINE_TOOL_TIMEOUT_SECONDS
        if self.inline_seconds is not None:
            seconds = min(seconds, self.inline_seconds)
        if continuations.holds_questions(key, ctx):

            def run(held_ctx: ToolCallContext) -> Coroutine[Any, Any, ToolResult]:
                return execute_tool(tool, arguments, held_ctx, seconds)

            return await continuations.arun_held(run, ctx, seconds)
        return await execute_tool(tool, arguments, ctx, seconds)
