"""MCP tasks: when a ``tools/call`` becomes a task, and the ``tasks/*`` methods of each era.

2025-11-25 (core, experimental; ``basic/utilities/tasks``): the client asks for a task per
call with ``params.task``; the tool's ``execution.taskSupport`` decides whether it may
(``-32601`` otherwise). ``tasks/get``, ``tasks/result`` (blocks, then returns exactly what the
call returned), ``tasks/list`` (the caller's tasks, paginated) and ``tasks/cancel``.

2026-07-28 (extension ``io.modelcontextprotocol/tasks``): a request that declares the
extension may get a task whenever the server prefers one; here that is every call of a
background tool, and an ``auto`` tool that calls ``continue_as_task`` after its questions were
answered. ``tasks/get`` (DetailedTask), ``tasks/update`` and ``tasks/cancel`` (empty acks).
The ``-32021`` rules and ``Mcp-Name: <taskId>`` are rungs of the request ladder
(``inbound.py``); ``tasks/result`` and ``tasks/list`` do not exist there.

Every task request is scoped to its owner (principal and legacy session): another caller's
task is "not found", exactly like an unknown one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mcp_app.protocol.catalog import ToolDef
from mcp_app.protocol.context import RequestContext, valid_answer
from mcp_app.protocol.cursors import decode_cursor, encode_cursor
from mcp_app.protocol.errors import (
    InvalidParams,
    McpError,
    MethodNotFound,
    MissingClientCapability,
)
from mcp_app.protocol.mcp_tasks import (
    CANCELLED,
    COMPLETED,
    RELATED_TASK_KEY,
    REQUIRED_EXTENSION,
    TASKS_EXTENSION,
    TaskInfo,
    TaskOwner,
    call_result,
    detailed_task,
    has_extension,
    legacy_task,
    modern_task,
    task_error,
)
from mcp_app.protocol.messages import CallToolParams, ListParams, TaskIdParams, TaskUpdateParams
from mcp_app.protocol.ports import TaskStore
from mcp_app.protocol.results import Answer
from mcp_app.protocol.versions import Era, Feature

_NOT_FOUND = "Failed to retrieve task: Task not found"


@dataclass(frozen=True, slots=True)
class TaskPlan:
    """How one ``tools/call`` relates to tasks, decided before the tool runs."""

    start_now: bool = False
    ttl_ms: int | None = None
    # An `auto` tool running inline may still hand the call to a task (continue_as_task).
    may_become_task: bool = False


# The plan of most calls (frozen: one serves them all).
_PLAIN_CALL = TaskPlan()


def plan_call(ctx: RequestContext, tool: ToolDef, params: CallToolParams) -> TaskPlan:
    """Decide whether this call is a task now, may become one, or is a plain call.

    Raises:
        MethodNotFound: legacy: a task was asked of a tool that forbids tasks, or a tool that
            requires one was called without (2025-11-25 "Tool-Level Negotiation": SHOULD and
            MUST ``-32601``). Revisions before 2025-11-25 have no tasks, so a tool that runs
            only as a task cannot be served to them at all.
        InvalidParams: 2025-11-25 ``params.task`` is not an object or its ``ttl`` is not a
            non-negative integer.
        MissingClientCapability: 2026-07-28: a task-only tool, and the request did not
            declare the extension (the ladder normally refuses this first).
    """
    if ctx.era is Era.MODERN:
        declared = ctx.tasks is not None and has_extension(ctx.client_capabilities)
        if tool.task_support == "required" and not declared:
            raise MissingClientCapability(
                f"Tool {tool.name} runs only as a task: declare the {TASKS_EXTENSION} extension",
                REQUIRED_EXTENSION,
            )
        if not declared or tool.task_support == "forbidden":
            return _PLAIN_CALL
        if tool.execution == "background":
            return TaskPlan(start_now=True)
        return TaskPlan(may_become_task=tool.execution == "auto")
    asked = params.task is not None and ctx.tasks is not None
    if not ctx.supports(Feature.TASKS_CORE) or not asked:
        if tool.task_support == "required":
            raise MethodNotFound(f"Tool {tool.name} runs only as a task (params.task)")
        return _PLAIN_CALL
    if tool.task_support == "forbidden":
        raise MethodNotFound(f"Tool {tool.name} does not run as a task")
    return TaskPlan(start_now=True, ttl_ms=_requested_ttl(params.task))


def _requested_ttl(task: Any) -> int | None:
    if not isinstance(task, Mapping):
        raise InvalidParams("params.task must be an object")
    ttl = task.get("ttl")
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 0:
        raise InvalidParams("params.task.ttl must be a non-negative integer (milliseconds)")
    return ttl


async def start_task(
    ctx: RequestContext,
    tool: ToolDef,
    arguments: Mapping[str, Any],
    ttl_ms: int | None,
    *,
    answers: Mapping[str, Any],
) -> Answer:
    """Create the task and answer the era's ``CreateTaskResult`` (the call log gets its id).

    ``answers`` are the client's answers gathered so far (2026-07-28); the task's run starts
    with them.

    The store answers only once the task is durable, so a ``tasks/get`` sent right after
    this result finds it (ext-tasks "Task Creation": MUST).
    """
    info = await _store(ctx).create(tool, arguments, ctx, answers=answers, ttl_ms=ttl_ms)
    detail = {"task_id": info.task_id}
    if ctx.era is Era.MODERN:
        return Answer({"resultType": "task", **modern_task(info)}, detail=detail)
    return Answer({"task": legacy_task(info)}, detail=detail)


async def handle_tasks_get(ctx: RequestContext, params: TaskIdParams) -> dict[str, Any]:
    """Return the task: a ``Task`` (2025-11-25) or a ``DetailedTask`` (2026-07-28).

    Raises:
        InvalidParams: no such task for this caller (unknown, expired or someone else's).
    """
    info = await _found(_store(ctx).get(params.task_id, _owner(ctx)))
    if ctx.era is Era.MODERN:
        return detailed_task(info, ctx.version)
    return legacy_task(info)


async def handle_tasks_result(ctx: RequestContext, params: TaskIdParams) -> dict[str, Any]:
    """Wait for the task to end; return what the call returned, tagged with the task id.

    2025-11-25 "Result Retrieval": exactly the underlying result or JSON-RPC error, with
    ``_meta["io.modelcontextprotocol/related-task"]`` (MUST).

    Raises:
        InvalidParams: no such task for this caller, or it was cancelled (no result exists).
        McpError: the call itself ended with this JSON-RPC error.
    """
    info = await _found(_store(ctx).wait(params.task_id, _owner(ctx)))
    if info.status == CANCELLED:
        raise InvalidParams("Task was cancelled: it has no result")
    if info.status != COMPLETED or info.result is None:
        raise _stored_error(task_error(info))
    result = call_result(info.result, ctx.version)
    result["_meta"] = {**result.get("_meta", {}), RELATED_TASK_KEY: {"taskId": info.task_id}}
    return result


async def handle_tasks_list(ctx: RequestContext, params: ListParams) -> dict[str, Any]:
    """Return one page of the caller's tasks, newest first (2025-11-25 "Task Listing").

    Raises:
        InvalidParams: the cursor was not issued by this server for ``tasks/list``.
    """
    after = None
    if params.cursor:
        after = _position(decode_cursor(params.cursor, "tasks", ctx.cursor_secret))
    size = max(ctx.page_size, 1)
    tasks = await _store(ctx).list(_owner(ctx), after=after, limit=size + 1)
    page = list(tasks[:size])
    result: dict[str, Any] = {"tasks": [legacy_task(info) for info in page]}
    if len(tasks) > size:
        last = page[-1]
        key = f"{last.created_at.isoformat()}|{last.task_id}"
        result["nextCursor"] = encode_cursor("tasks", key, ctx.cursor_secret)
    return result


async def handle_tasks_cancel(ctx: RequestContext, params: TaskIdParams) -> dict[str, Any]:
    """Cancel the task.

    2025-11-25: answer the task, already ``cancelled`` (MUST); a terminal task is
    ``-32602`` (MUST). 2026-07-28: an empty acknowledgement, also for a task that already
    ended (cancellation is cooperative and idempotent there).

    Raises:
        InvalidParams: no such task for this caller; 2025-11-25: the task already ended.
    """
    store, owner = _store(ctx), _owner(ctx)
    if ctx.era is Era.MODERN:
        await _found(store.cancel(params.task_id, owner))
        return {}
    current = await _found(store.get(params.task_id, owner))
    if current.is_terminal:
        raise InvalidParams(f"Task is already {current.status}: it cannot be cancelled")
    info = await _found(store.cancel(params.task_id, owner))
    if info.status != CANCELLED:
        raise InvalidParams(f"Task is already {info.status}: it cannot be cancelled")
    return legacy_task(info)


async def handle_tasks_update(ctx: RequestContext, params: TaskUpdateParams) -> dict[str, Any]:
    """Deliver answers to the task's input requests; acknowledge with an empty result.

    Answers to keys that are not outstanding are ignored, and a partial set is fine: the task
    stays ``input_required`` until every question is answered (ext-tasks "Task Update
    Requests"). An answer that cannot be a response to its question (no ``action`` for an
    elicitation, say) is ignored too, so the question stays open for a usable one
    (2026-07-28 basic/patterns/mrtr: invalid answers are asked again).

    Raises:
        InvalidParams: no such task for this caller.
    """
    store, owner = _store(ctx), _owner(ctx)
    info = await _found(store.get(params.task_id, owner))
    asked = info.input_requests or {}
    usable = {
        key: answer
        for key, answer in params.input_responses.items()
        if isinstance(asked.get(key), Mapping) and valid_answer(asked[key].get("method"), answer)
    }
    if usable:
        await _found(store.answer(params.task_id, owner, usable))
    return {}


def _store(ctx: RequestContext) -> TaskStore:
    if ctx.tasks is None:
        raise MethodNotFound("This server runs no tasks")
    return ctx.tasks


def _owner(ctx: RequestContext) -> TaskOwner:
    return TaskOwner(principal=ctx.principal, session_id=ctx.session.id if ctx.session else "")


async def _found(pending: Any) -> TaskInfo:
    info: TaskInfo | None = await pending
    if info is None:
        raise InvalidParams(_NOT_FOUND)
    return info


def _position(key: str) -> tuple[datetime, str]:
    created, _, task_id = key.partition("|")
    try:
        return datetime.fromisoformat(created), task_id
    except ValueError:
        raise InvalidParams("Invalid cursor") from None


class _StoredError(McpError):
    """A JSON-RPC error kept with a failed task, sent again as it was."""

    def __init__(self, code: int, message: str, data: Any) -> None:
        super().__init__(message, data)
        self.code = code


def _stored_error(error: Mapping[str, Any]) -> McpError:
    code = error.get("code")
    message = error.get("message")
    return _StoredError(
        code if isinstance(code, int) and not isinstance(code, bool) else -32603,
        message if isinstance(message, str) else "The task failed",
        error.get("data"),
    )
