"""``tools/list`` and ``tools/call`` (server/tools, every revision).

A call runs in four steps: find the tool, check the arguments against its input schema,
run it through the ``ToolRunner`` port, check the output against its output schema. Bad
arguments and tool failures are *results* with ``isError: true`` so the model can correct
itself (2025-11-25 server/tools, "Error Handling"); only an unknown tool or malformed params
are protocol errors. The endpoint's policies (``protocol/policies.py``) see the arguments
before the tool runs and its result after, in ``run_tool``; a refusal is an error result.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Mapping
from typing import Any

from mcp_app.protocol import apps, mrtr
from mcp_app.protocol.catalog import ToolDef
from mcp_app.protocol.context import NO_INPUTS, CallInputs, RequestContext, ToolCallContext
from mcp_app.protocol.errors import InternalError, InvalidParams, McpError
from mcp_app.protocol.handlers import mcp_tasks
from mcp_app.protocol.handlers.listing import list_page
from mcp_app.protocol.messages import CallToolParams, ListParams
from mcp_app.protocol.policies import TOOLS_CALL, PolicyCall, PolicyRecord, PolicyRefused
from mcp_app.protocol.results import (
    NO_STRUCTURED,
    Answer,
    CallCancelled,
    ContinueAsTask,
    InputRequired,
    Outcome,
    ServiceUnavailable,
    ToolError,
    ToolResult,
)
from mcp_app.protocol.schemas import SchemaCache, describe_error, first_error
from mcp_app.protocol.shaping import shape_call_result, shape_tool, structured_text
from mcp_app.protocol.storable import require_storable
from mcp_app.protocol.versions import Feature

logger = logging.getLogger(__name__)


async def handle_tools_list(ctx: RequestContext, params: ListParams) -> dict[str, Any]:
    """Return one page of tools, shaped for ``ctx.version``; views linked (MCP Apps) when
    the client renders them."""
    views = apps.client_renders_apps(ctx.client_capabilities)
    return list_page(
        ctx,
        params,
        items=ctx.catalog.tools,
        key=lambda tool: tool.name,
        list_name="tools",
        result_key="tools",
        shape=functools.partial(shape_tool, views=views),
        variant="views" if views else "",
    )


async def handle_tools_call(
    ctx: RequestContext, params: CallToolParams, record: PolicyRecord
) -> Answer | dict[str, Any]:
    """Call a tool and answer its ``CallToolResult``, shaped for ``ctx.version``.

    A call may instead answer with a task handle (``handlers/mcp_tasks.plan_call``), or, in
    2026-07-28, with ``input_required``. The answer carries how the call ended (a timeout
    reads like any tool error on the wire) and where it ran, for the call log; ``record``
    what the endpoint's policies did about it.

    Raises:
        InvalidParams: the tool does not exist, or a call that may run on a worker has
            arguments the background call's row cannot store (NUL, unpaired surrogate).
        InternalError: the runner failed unexpectedly (its message never reaches the wire).
        MethodNotFound, MissingClientCapability: the tool's task support refuses this call.
    """
    tool = ctx.named_item
    if type(tool) is not ToolDef or tool.name != params.name:
        tool = ctx.catalog.tool(params.name)
    if tool is None:
        raise InvalidParams(f"Unknown tool: {params.name}")
    plan = mcp_tasks.plan_call(ctx, tool, params)
    arguments = params.arguments
    if ctx.catalog.policies is not None:
        # What the call log keeps, however the call goes on (inline, a task, refused).
        call = PolicyCall(TOOLS_CALL, tool.name, tool.annotations)
        record.logged_arguments = ctx.catalog.policies.logged_arguments(call, arguments)
    if tool.execution != "inline" or plan.start_now or plan.may_become_task:
        # Such a call may be written to a BackgroundCall row, arguments and answers and all.
        require_storable(arguments, "params.arguments")
        require_storable(params.input_responses, "params.inputResponses")
    error = first_error(tool.input_schema, arguments, ctx.schemas)
    if error is not None:
        result = ToolResult.error(f"Invalid arguments: {describe_error(error)}")
        return Answer(shape_call_result(result, ctx.version), Outcome.TOOL_ERROR)
    binding = None
    inputs = CallInputs(may_become_task=plan.may_become_task)
    if ctx.supports(Feature.INPUT_REQUIRED):
        binding = mrtr.Binding(
            endpoint=ctx.catalog.endpoint.slug,
            principal=ctx.principal,
            method="tools/call",
            request_digest=mrtr.request_digest(tool.name, arguments),
        )
        inputs = _inputs(ctx, binding, params, plan.may_become_task)
    if plan.start_now:
        return await mcp_tasks.start_task(ctx, tool, arguments, plan.ttl_ms, answers=inputs.answers)
    try:
        result = await run_tool(ctx, tool, arguments, inputs, record)
    except ContinueAsTask:
        # The answers gathered so far go with the task.
        return await mcp_tasks.start_task(ctx, tool, arguments, None, answers=inputs.answers)
    except InputRequired as needed:
        if binding is None:
            raise InternalError("Tool failed") from None
        # 2026-07-28 basic/patterns/mrtr: the client answers and retries with this state.
        # A held run keeps its answers itself: the state names it instead.
        return {
            "resultType": "input_required",
            "inputRequests": needed.requests,
            "requestState": mrtr.seal(
                secret=ctx.state_secret,
                binding=binding,
                answers={} if needed.continuation else inputs.answers,
                now=time.time(),
                ttl_seconds=needed.ttl_seconds or mrtr.DEFAULT_TTL_SECONDS,
                continuation=needed.continuation,
            ),
        }
    return Answer(shape_call_result(result, ctx.version), result.ended, result.detail)


async def run_tool(
    ctx: RequestContext,
    tool: ToolDef,
    arguments: Mapping[str, Any],
    inputs: CallInputs = NO_INPUTS,
    record: PolicyRecord | None = None,
) -> ToolResult:
    """Run ``tool`` through ``ctx.tools`` and return its finished result, failures included.

    ``inputs`` are what the call hands the tool besides its arguments (the answers gathered so
    far, a held run to resume, whether it may become a task); the endpoint's policies add
    what they do to ``record`` (None: a record of this run's own, which no one reads).

    The one error ladder of a tool call, wherever it runs (inline here, or on a worker, which
    calls this too): a tool failure becomes an error result (a timeout says so in its
    ``outcome``), a result is checked against the output schema where the tool ran. A result
    that ran elsewhere (it names where in ``detail``) was finished there and is passed on.

    Raises:
        InputRequired, ContinueAsTask: the tool asked the client, or to become a task.
        McpError, CallCancelled, ServiceUnavailable: passed on as they are.
        InternalError: the tool failed unexpectedly (logged; its text never reaches the wire).
    """
    if record is None:
        record = PolicyRecord()
    policies = ctx.catalog.policies
    if policies is None:
        return await _run_tool(ctx, tool, arguments, inputs, record)
    # The endpoint's policies see the call here, wherever it runs (inline, or on a worker,
    # which calls this too, so a task's result is seen before its row keeps it). A result
    # relayed from a worker was seen there; one without its decisions (a row written
    # before policies existed) is seen again: every built-in policy leaves a result it has
    # rewritten as it is.
    call = PolicyCall(TOOLS_CALL, tool.name, tool.annotations)
    result: ToolResult | None = None
    try:
        arguments = policies.before(call, arguments, record.decisions)
        result = await _run_tool(ctx, tool, arguments, inputs, record)
        relayed = result.detail.get("policy_decisions") if result.detail else None
        if isinstance(relayed, list):
            # It ran on a worker, whose policies saw it there: their verdicts on the result
            # and the user's confirmation join this request's (the arguments' were this
            # process's own, above).
            record.decisions.extend(d for d in relayed if d.get("phase") != "before")
            return result
        return _with_json(result, policies.after(call, result_json(result), record.decisions))
    except PolicyRefused as refused:
        # The caller reads why, as for any tool error; the call log records it as rejected
        # (and where the refused result ran).
        refusal = ToolResult.error(refused.message)
        refusal.outcome = Outcome.REJECTED
        refusal.detail = result.detail if result is not None else None
        return refusal


async def _run_tool(
    ctx: RequestContext,
    tool: ToolDef,
    arguments: Mapping[str, Any],
    inputs: CallInputs,
    record: PolicyRecord,
) -> ToolResult:
    running = ToolCallContext(ctx, tool.name, inputs, record)
    try:
        result = await ctx.tools.run_tool(tool, arguments, running)
    except ToolError as failure:
        result = ToolResult.error(failure.message)
        # A timeout, an unreachable upstream: the call log says which.
        result.outcome = failure.outcome
        return result
    except (InputRequired, ContinueAsTask, McpError, CallCancelled, ServiceUnavailable):
        raise
    except Exception:
        logger.exception("Tool call failed", extra={"tool": tool.name})
        raise InternalError("Tool failed") from None
    if result.detail is not None:
        return result
    return finish_tool_result(tool, result, ctx.schemas)


def result_json(result: ToolResult) -> dict[str, Any]:
    """A ``ToolResult``'s CallToolResult fields, unshaped (what policies and rows read)."""
    data: dict[str, Any] = {"content": [dict(block) for block in result.content]}
    if result.has_structured:
        data["structuredContent"] = result.structured
    if result.is_error:
        data["isError"] = True
    return data


def _with_json(result: ToolResult, data: Mapping[str, Any]) -> ToolResult:
    """``result`` with the content, structured content and error flag of ``data``."""
    result.content = list(data.get("content") or [])
    result.structured = data.get("structuredContent", NO_STRUCTURED)
    result.is_error = bool(data.get("isError"))
    return result


def finish_tool_result(
    tool: ToolDef, result: ToolResult, schemas: SchemaCache | None = None
) -> ToolResult:
    """Check a successful result against the tool's output schema and give it text content.

    Wherever the tool ran (inline, or on a worker), its result passes through here once,
    there (``run_tool``).
    """
    if tool.output_schema is not None and not result.is_error:
        checked = _checked_output(tool.output_schema, result, schemas)
        if checked is not result:
            checked.detail = result.detail  # where it ran stays known to the call log
            result = checked
    if result.has_structured and not result.content:
        # Clients without structured-output support still see the value (SHOULD, all eras).
        result.content = [{"type": "text", "text": structured_text(result.structured)}]
    return result


def _inputs(
    ctx: RequestContext, binding: mrtr.Binding, params: CallToolParams, may_become_task: bool
) -> CallInputs:
    """A 2026-07-28 call's inputs: the answers of earlier rounds (from the sealed state) plus
    this retry's, and the held run the state names (the runner resumes that run).

    Raises:
        InvalidParams: the state is tampered with, expired, or from another request.
    """
    answers: dict[str, Any] = {}
    continuation = ""
    if params.request_state is not None:
        unsealed = mrtr.unseal_state(
            params.request_state, secret=ctx.state_secret, binding=binding, now=time.time()
        )
        answers = unsealed.answers
        continuation = unsealed.continuation
    answers.update(params.input_responses)
    return CallInputs(answers, continuation, may_become_task)


def _checked_output(
    schema: Mapping[str, Any], result: ToolResult, schemas: SchemaCache | None
) -> ToolResult:
    # A tool with an output schema MUST return conforming structured content
    # (2025-06-18 server/tools, "Output Schema"); a tool that does not gets an error result.
    if not result.has_structured:
        return ToolResult.error(
            "Tool output did not match its output schema: no structured content was returned"
        )
    error = first_error(schema, result.structured, schemas)
    if error is not None:
        return ToolResult.error(
            f"Tool output did not match its output schema: {describe_error(error)}"
        )
    return result
