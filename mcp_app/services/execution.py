"""Running one tool through the executor of its kind, under a time limit.

The same function runs a call inline in the web process and on a Celery worker
(``services.background.worker``): executors never know where they run. What an executor
needs from the rows before a call (a credential's secret) it asks of ``ServiceResolvers``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.trace import Status, StatusCode

from mcp_app.executors import get_executor
from mcp_app.executors.base import ConfigError, HttpAuth, UpstreamTarget
from mcp_app.executors.netguard import NetworkPolicy
from mcp_app.protocol.catalog import ToolDef
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.results import ToolResult, ToolTimeout
from mcp_app.services import tracing
from mcp_app.services.credentials import credential_resolve_by_name
from mcp_app.services.deadlines import Deadline
from mcp_app.services.policies.confirm import policy_confirm
from mcp_app.services.snapshots import ToolBinding
from mcp_app.services.upstream_targets import upstream_target


class ServiceResolvers:
    """The executors' ``Resolvers`` for one call: reads they need before it, done by the
    services. ``caller`` is the call's ``RequestContext.caller`` (whose own token a per-user
    upstream gets), ``request_headers`` the client's (those an upstream forwards)."""

    def __init__(
        self, caller: str = "", request_headers: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        self.caller = caller
        self.request_headers = request_headers or {}

    async def credential(self, name: str, policy: NetworkPolicy) -> HttpAuth:
        # Executors read no rows: the credential's secret is decrypted here.
        return await credential_resolve_by_name(name=name, policy=policy)

    async def upstream(self, name: str) -> UpstreamTarget:
        return await upstream_target(name, caller=self.caller, request_headers=self.request_headers)


async def execute_tool(
    tool: ToolDef, arguments: Mapping[str, Any], ctx: ToolCallContext, seconds: float
) -> ToolResult:
    """Run ``tool`` with its executor, stopped after ``seconds``.

    The endpoint's policies first ask the user what they want confirmed (a destructive
    tool's call: ``services.policies.confirm``), outside the time limit.

    Raises:
        ConfigError: the tool's config no longer prepares (the snapshot logged why).
        ToolError: the tool failed in a way the caller should read (``PolicyDeclined``: the
            user did not confirm it).
        ToolTimeout: the tool ran past ``seconds``.
        InputRequired: a 2026-07-28 call's confirmation has no answer yet.
    """
    if ctx.request.catalog.policies is not None:
        await policy_confirm(tool, arguments, ctx)
    if (tracer := tracing.tracer) is None:
        return await _execute(tool, arguments, ctx, seconds)
    # The tool call's own span, inline under the request's span or on a worker under the
    # Celery task's: the same trace either way (docs/operations.md, "Traces").
    attributes = {"mcp.tool": tool.name, "mcp.tool.kind": tool.binding.kind}
    with tracer.start_as_current_span(f"tools/call {tool.name}", attributes=attributes) as span:
        result = await _execute(tool, arguments, ctx, seconds)
        if result.is_error:
            span.set_status(Status(StatusCode.ERROR, "tool error"))
        return result


async def _execute(
    tool: ToolDef, arguments: Mapping[str, Any], ctx: ToolCallContext, seconds: float
) -> ToolResult:
    key: ToolBinding = tool.binding
    if isinstance(key.prepared, ConfigError):
        raise ConfigError(key.prepared.message)
    executor = get_executor(key.kind)
    deadline = Deadline(seconds)
    try:
        async with deadline:
            prepared = await executor.resolve(
                key.prepared, ServiceResolvers(ctx.request.caller, ctx.request.request_headers)
            )
            return await executor.run(prepared, arguments, ctx)
    except TimeoutError:
        # A TimeoutError of the tool's own (an upstream call, say) is not this deadline.
        if not deadline.expired():
            raise
        raise ToolTimeout(f"Tool timed out after {seconds:g} s") from None
