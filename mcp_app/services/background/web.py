"""The web side of a background call: start it, follow it, answer the request from its row.

``arun_on_worker`` writes a ``BackgroundCall`` row, joins the call's channel-layer group,
enqueues the Celery job by name and relays what the worker publishes onto the client's
request: progress and log notifications, and (legacy era) questions for the client, whose
answers go back to the worker. When the row is final it returns the tool's result as the
worker stored it (``calls.call_result``): nothing is checked or reshaped again here.
MCP tasks start calls with ``astart_call``; a resumed stream whose follower died gets its
response from ``aorphan_answer``.

The job is enqueued through the project's Celery app by task name, so this module never
imports ``mcp_app.tasks`` (which imports the worker side).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone

from mcp_app.conf import get_conf
from mcp_app.models import BackgroundCall
from mcp_app.protocol.catalog import ToolDef
from mcp_app.protocol.context import RequestContext, ToolCallContext
from mcp_app.protocol.errors import InternalError, McpError
from mcp_app.protocol.results import CallCancelled, InputRequired, ToolError, ToolResult
from mcp_app.protocol.shaping import shape_call_result
from mcp_app.protocol.storable import unstorable_path
from mcp_app.services import notify
from mcp_app.services.background.calls import (
    ACTIVE,
    DB_OUTAGE_TOLERANCE_SECONDS,
    DB_UNAVAILABLE,
    RUN_CALL_TASK,
    acancel_call,
    acreate_call,
    asettle,
    call_result,
    db_ready,
)
from mcp_app.services.background.embedded import embedded_worker_enabled, ensure_embedded_worker
from mcp_app.services.background.groups import next_message
from mcpsite import celery_app

logger = logging.getLogger(__name__)

Status = BackgroundCall.Status


# -- starting -------------------------------------------------------------------------------------


async def _enqueue(call: BackgroundCall) -> None:
    """Hand the call to a worker; never raises, because the message may have gone out.

    A broker that failed mid-publish (Redis restarting) may still have queued the job, and
    a worker may run it: telling the client "failed" would invite a retry that runs the tool
    twice. The call is treated as started instead and followed by its row; if no worker ever
    takes it, the start timeout settles it as "not started".
    """
    options: dict[str, Any] = {}
    if embedded_worker_enabled():
        ensure_embedded_worker()
    else:
        # Celery kills the worker process at the hard limit (prefork pool).
        options["time_limit"] = call.hard_time_limit
    try:
        await asyncio.to_thread(celery_app.send_task, RUN_CALL_TASK, (call.id,), **options)
    except Exception:
        logger.warning(
            "Enqueueing a background call failed; following its row", extra={"call": call.id},
            exc_info=True,
        )  # fmt: skip


async def astart_call(
    tool: ToolDef,
    arguments: Mapping[str, Any],
    ctx: RequestContext,
    *,
    answers: Mapping[str, Any],
    is_task: bool,
    ttl_ms: int | None,
) -> BackgroundCall:
    """Create the call's row and enqueue it; for MCP tasks, which return a handle at once."""
    call = await acreate_call(tool, arguments, ctx, answers=answers, is_task=is_task, ttl_ms=ttl_ms)
    await _enqueue(call)
    return call


async def arun_on_worker(
    tool: ToolDef, arguments: Mapping[str, Any], tool_ctx: ToolCallContext
) -> ToolResult:
    """Run a call on a worker and relay it onto this request; return its result.

    The result is the worker's, finished there; it says where it ran (``detail``) and, for a
    timeout, how it ended (``outcome``). See ``calls.call_result``.

    Raises:
        InputRequired: a 2026-07-28 call's tool asked the client.
        CallCancelled: the call was cancelled from elsewhere (another process).
        McpError: the tool ended with a protocol error.
        ServiceUnavailable: the database was unreachable before the call was written.
    """
    call = await acreate_call(tool, arguments, tool_ctx.request, answers=tool_ctx.inputs.answers)
    return await afollow(call, tool_ctx, enqueue=True)


# -- following ------------------------------------------------------------------------------------


def _check_interval() -> float:
    """How long a follower waits in silence before it looks at the row itself."""
    conf = get_conf()
    bound = min(conf.MCP_BACKGROUND_LOST_AFTER_SECONDS, conf.MCP_BACKGROUND_START_TIMEOUT_SECONDS)
    return max(0.2, bound / 2)


async def afollow(
    call: BackgroundCall, tool_ctx: ToolCallContext, *, enqueue: bool = False
) -> ToolResult:
    """Relay a call's progress, logs and questions onto ``tool_ctx``'s request until it ends.

    With ``enqueue`` the call is enqueued only after this follower joined its group, so not
    one progress event is missed. Cancelling the awaiting task cancels the call.
    """
    ctx = tool_ctx.request
    current: BackgroundCall | None = call
    try:
        async with notify.GroupListener(notify.call_group(call.id)) as events:
            settle = _OutageTolerantSettle(call.id)
            if enqueue:
                await _enqueue(call)
            else:
                current = await settle(current)
            while current is not None and current.is_active:
                message = await next_message(events, _check_interval())
                if message is None or message["type"] == notify.CALL_DONE:
                    current = await settle(current)
                elif message["type"] == notify.CALL_FRAME:
                    if ctx.send is not None:
                        await _relay_frame(ctx, message["frame"])
                elif message["type"] == notify.CALL_ASK:
                    await _relay_question(call.id, message, ctx)
    except asyncio.CancelledError:
        # The client went away (2026-07-28) or cancelled (legacy): so does the call.
        await asyncio.shield(acancel_call(call.id))
        raise
    if current is None:
        raise ToolError("The background call disappeared (it was purged).")
    return call_result(current)


class _OutageTolerantSettle:
    """``asettle`` for a follower: a database outage is waited out, not reported as failure.

    The worker goes on running the call while PostgreSQL restarts, and writes its result once
    the database is back; the follower keeps the row it last read until it can read again,
    for at most ``DB_OUTAGE_TOLERANCE_SECONDS`` in a row.
    """

    def __init__(self, call_id: str) -> None:
        self.call_id = call_id
        self.failing_since: float | None = None

    async def __call__(self, current: BackgroundCall | None) -> BackgroundCall | None:
        loop = asyncio.get_running_loop()
        try:
            found = await asettle(self.call_id)
        except DB_UNAVAILABLE:
            if self.failing_since is None:
                self.failing_since = loop.time()
            if loop.time() - self.failing_since > DB_OUTAGE_TOLERANCE_SECONDS:
                raise
            logger.warning("Database unavailable; still following the call", exc_info=True)
            return current
        self.failing_since = None
        return found


async def _relay_frame(ctx: RequestContext, frame: Mapping[str, Any]) -> None:
    """Pass a progress or log notification on; one that cannot be sent does not fail the call.

    (A resumable stream also keeps the event in Redis, which may be restarting.)
    """
    assert ctx.send is not None
    try:
        await ctx.send(frame)
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.warning("A notification of a background call was lost", exc_info=True)


async def _relay_question(call_id: str, message: Mapping[str, Any], ctx: RequestContext) -> None:
    """Ask the client the worker's question on this request's stream; send back the answer."""
    ask_id = str(message["ask_id"])
    try:
        if ctx.client_requests is None:
            raise ToolError("This call cannot ask the client: it needs an event-stream response.")
        answer = await ctx.client_requests.request(str(message["method"]), message["params"])
        # The tool may put the answer in its result, which the call's row keeps: refused
        # here, as at the protocol boundary (protocol/storable.py), not a failed row write.
        unstorable = unstorable_path(answer, "result")
        if unstorable is not None:
            raise ToolError(
                f"The client's answer to {message['method']} was refused: {unstorable} contains"
                " a NUL character or an unpaired surrogate, which this server cannot store."
            )
    except ToolError as failure:
        await notify.apublish_call_answer(call_id=call_id, ask_id=ask_id, error=failure.message)
        return
    await notify.apublish_call_answer(call_id=call_id, ask_id=ask_id, result=dict(answer))


async def await_final(call_id: str, timeout: float) -> BackgroundCall | None:
    """Wait (at most ``timeout`` s) until the call is final or waits for input; return it."""
    async with notify.GroupListener(notify.call_group(call_id)) as events:
        call = await asettle(call_id)
        deadline = asyncio.get_running_loop().time() + timeout
        while call is not None and call.status in (Status.QUEUED, Status.WORKING):
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            await next_message(events, min(left, _check_interval()))
            call = await asettle(call_id)
        return call


# -- a request's call, from elsewhere -------------------------------------------------------------


async def acancel_request(*, session_id: str, request_id: Any) -> bool:
    """Cancel the session's active background call for JSON-RPC ``request_id``, if any."""
    await db_ready()
    call_ids = [
        call_id
        async for call_id in BackgroundCall.objects.filter(
            session_id=session_id, request_id=request_id, status__in=ACTIVE, is_task=False
        ).values_list("id", flat=True)
    ]
    cancelled = [await acancel_call(call_id) for call_id in call_ids]
    return any(cancelled)


# A follower relays the outcome within milliseconds of the row becoming final; a row final
# for longer than this has no live follower to send its response.
ORPHAN_AFTER_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class OrphanAnswer:
    """The response a dead follower would have sent; ``body`` None: cancelled, none is sent."""

    body: dict[str, Any] | None


def _answer_body(call: BackgroundCall) -> dict[str, Any] | None:
    """The JSON-RPC response the follower of a finished plain call sends (``call_result``)."""
    base = {"jsonrpc": "2.0", "id": call.request_id}
    try:
        result = call_result(call)
    except CallCancelled:
        return None
    except InputRequired:
        # A legacy request cannot answer input_required (handlers/tools.py says the same).
        return {**base, "error": InternalError("Tool failed").to_error_object()}
    except McpError as error:
        return {**base, "error": error.to_error_object()}
    return {**base, "result": shape_call_result(result, call.protocol_version)}


async def aorphan_answer(*, session_id: str, request_id: Any) -> OrphanAnswer | None:
    """The response of the session's request ``request_id`` whose follower is gone, if final.

    A resumed 2025-11-25 stream (GET + Last-Event-ID) asks when its events stop coming: the
    web process that followed the call may have died, and nobody else would ever answer the
    request. None while the call runs, or when it only just ended (its follower, if alive,
    is sending the response), or when the request was not a background call.
    """
    await db_ready()
    call_id = await (
        BackgroundCall.objects.filter(session_id=session_id, request_id=request_id, is_task=False)
        .order_by("-created_at")
        .values_list("id", flat=True)
        .afirst()
    )
    if call_id is None:
        return None
    call = await asettle(call_id)
    if call is None or call.is_active or call.finished_at is None:
        return None
    if timezone.now() - call.finished_at < timedelta(seconds=ORPHAN_AFTER_SECONDS):
        return None
    return OrphanAnswer(_answer_body(call))
