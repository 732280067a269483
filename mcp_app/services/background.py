"""Background tool calls: run on a Celery worker, followed and settled from any web process.

Web side. ``arun_on_worker`` writes a ``BackgroundCall`` row, joins the call's channel-layer
group, enqueues the Celery job (``mcp_app.tasks``) and relays what the worker publishes onto
the client's request: progress and log notifications, and (legacy era) questions for the
client, whose answers go back to the worker. It returns when the row reaches a final status.
MCP tasks start calls with ``astart_call`` and read them back with ``aget_call``.

Worker side. ``arun_call`` claims the row (``queued`` -> ``working``, once: a redelivered
message never runs a tool twice), runs the executor under the soft time limit, refreshes the
heartbeat while it runs (where it also notices a cancellation) and writes the outcome.

Nobody waits forever. Whoever reads an active row whose worker is gone settles it
(``asettle``): queued longer than the start timeout -> "no worker"; heartbeat older than the
lost-after bound -> "worker lost"; running past the hard limit -> "timed out". Every status
change is a conditional UPDATE on the status the writer saw, so racing writers cannot both win.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connection
from django.utils import timezone

from mcp_app.conf import get_conf
from mcp_app.models import BackgroundCall, Endpoint
from mcp_app.protocol.catalog import ToolDef
from mcp_app.protocol.context import RequestContext, ToolCallContext
from mcp_app.protocol.errors import InternalError, McpError
from mcp_app.protocol.handlers.tools import finish_tool_result
from mcp_app.protocol.results import (
    NO_STRUCTURED,
    CallCancelled,
    InputRequired,
    ServiceUnavailable,
    ToolError,
    ToolResult,
    ToolTimeout,
)
from mcp_app.protocol.shaping import shape_call_result
from mcp_app.protocol.storable import unstorable_path
from mcp_app.services import notify
from mcp_app.services.catalog import ToolKey, aget_endpoint_state
from mcp_app.services.execution import execute_tool

logger = logging.getLogger(__name__)

Status = BackgroundCall.Status
Outcome = BackgroundCall.Outcome
ACTIVE = BackgroundCall.ACTIVE
# The hard limit kills the worker process when the soft one did not stop the tool.
HARD_LIMIT_MARGIN_SECONDS = 30.0
# What an unreachable database raises (stopped, restarting, network lost).
DB_UNAVAILABLE = (OperationalError, InterfaceError)
# How long followers and workers carry on through a database outage (a restart takes seconds)
# before they give up on it: the follower's request then fails, the worker's result is lost.
DB_OUTAGE_TOLERANCE_SECONDS = 60.0
# At least this long for a worker to reconnect and beat once the database is back, however
# short its heartbeat (a busy host reconnects slowly).
MIN_RECONNECT_SECONDS = 2.0


class ClaimDeferred(Exception):
    """The worker could not claim the call because the database is unavailable: retry later."""


def _refresh_connection() -> None:
    """Replace this thread's database connection if it broke (a PostgreSQL restart, say).

    The async ORM runs every query on one long-lived thread whose connection nobody else
    closes (this code runs outside Django's request cycle): without this, a connection
    that died stays in place and every later query fails.
    """
    if connection.in_atomic_block:
        return  # inside a caller's transaction (tests): not ours to replace
    close_old_connections()  # with CONN_HEALTH_CHECKS, the next query checks it first
    if (
        # Set on every connection since Django 4.1; django-stubs does not declare it.
        not connection.health_check_enabled  # type: ignore[attr-defined]
        and connection.connection is not None
        and not connection.is_usable()
    ):
        connection.close()


async def _db_ready() -> None:
    """Run ``_refresh_connection`` on the thread the async ORM queries from."""
    await sync_to_async(_refresh_connection)()


def _database_started_at() -> datetime | None:
    """When the database server (re)started; None where it cannot say (SQLite)."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_postmaster_start_time()")
        return cursor.fetchone()[0]


# -- results as stored in the row ---------------------------------------------------------------


def result_to_json(result: ToolResult) -> dict[str, Any]:
    """A ``ToolResult`` as the row keeps it: the CallToolResult fields, unshaped."""
    data: dict[str, Any] = {"content": [dict(block) for block in result.content]}
    if result.has_structured:
        data["structuredContent"] = result.structured
    if result.is_error:
        data["isError"] = True
    if result.meta:
        data["_meta"] = dict(result.meta)
    return data


def result_from_json(data: Mapping[str, Any] | None) -> ToolResult:
    data = data or {}
    return ToolResult(
        content=list(data.get("content") or []),
        structured=data.get("structuredContent", NO_STRUCTURED),
        is_error=bool(data.get("isError")),
        meta=data.get("_meta"),
    )


def _remote_error(error: Mapping[str, Any] | None) -> McpError:
    """The protocol error a worker recorded, to be sent as the request's JSON-RPC error."""
    error = error or {}
    exc = McpError(str(error.get("message") or "Tool failed"), error.get("data"))
    exc.code = int(error.get("code", InternalError.code))
    return exc


# -- starting -------------------------------------------------------------------------------------


def time_limits(key: ToolKey) -> tuple[float, float]:
    """The tool's (soft, hard) time limits in seconds, defaults filled in."""
    soft = key.soft_time_limit or get_conf().MCP_BACKGROUND_SOFT_TIME_LIMIT
    hard = key.hard_time_limit or soft + HARD_LIMIT_MARGIN_SECONDS
    return soft, max(hard, soft)


async def acreate_call(
    tool: ToolDef,
    arguments: Mapping[str, Any],
    ctx: RequestContext,
    *,
    is_task: bool = False,
    ttl_ms: int | None = None,
) -> BackgroundCall:
    """Write the call's row (committed when this returns: autocommit), not yet enqueued.

    Raises:
        ServiceUnavailable: the database is unreachable (nothing was written or run).
    """
    conf = get_conf()
    soft, hard = time_limits(tool.key)
    keep_ms = ttl_ms if is_task and ttl_ms is not None else conf.MCP_BACKGROUND_KEEP_SECONDS * 1000
    try:
        await _db_ready()
        now = timezone.now()
        endpoint_id = await (
            Endpoint.objects.filter(slug=ctx.catalog.endpoint.slug)
            .values_list("id", flat=True)
            .aget()
        )
        return await BackgroundCall.objects.acreate(
            endpoint_id=endpoint_id,
            tool_id=tool.key.pk,
            tool_name=tool.name,
            arguments=dict(arguments),
            principal=ctx.principal,
            session_id=ctx.session.id if ctx.session is not None else "",
            request_id=ctx.request_id,
            protocol_version=ctx.version,
            progress_token=ctx.progress_token if ctx.send is not None else None,
            log_level=(ctx.log_level or "") if ctx.send is not None else "",
            client_capabilities=dict(ctx.client_capabilities),
            input_responses=dict(ctx.input_responses),
            is_task=is_task,
            ttl_ms=ttl_ms if is_task else None,
            poll_interval_ms=conf.MCP_TASK_POLL_INTERVAL_MS,
            soft_time_limit=soft,
            hard_time_limit=hard,
            created_at=now,
            updated_at=now,
            expires_at=now + timedelta(milliseconds=keep_ms),
        )
    except DB_UNAVAILABLE as exc:
        # The endpoint and session may come from memory (the hot path reads no rows), so
        # the outage shows here first: a 503 the client retries, not "Tool failed".
        raise ServiceUnavailable("database unavailable") from exc


async def _enqueue(call: BackgroundCall) -> None:
    """Hand the call to a worker; never raises, because the message may have gone out.

    A broker that failed mid-publish (Redis restarting) may still have queued the job, and
    a worker may run it: telling the client "failed" would invite a retry that runs the tool
    twice. The call is treated as started instead and followed by its row; if no worker ever
    takes it, the start timeout settles it as "not started".
    """
    from mcp_app.tasks import run_background_call  # the task module imports this one

    options: dict[str, Any] = {}
    if embedded_worker_enabled():
        ensure_embedded_worker()
    else:
        # Celery kills the worker process at the hard limit (prefork pool).
        options["time_limit"] = call.hard_time_limit
    try:
        await asyncio.to_thread(run_background_call.apply_async, (call.id,), **options)
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
    is_task: bool,
    ttl_ms: int | None,
) -> BackgroundCall:
    """Create the call's row and enqueue it; for MCP tasks, which return a handle at once."""
    call = await acreate_call(tool, arguments, ctx, is_task=is_task, ttl_ms=ttl_ms)
    await _enqueue(call)
    return call


async def arun_on_worker(
    tool: ToolDef, arguments: Mapping[str, Any], tool_ctx: ToolCallContext
) -> ToolResult:
    """Run a call on a worker and relay it onto this request; return its result.

    Raises:
        ToolError / ToolTimeout: the call failed, timed out, or its worker was lost.
        InputRequired: a 2026-07-28 call's tool asked the client.
        CallCancelled: the call was cancelled from elsewhere (another process).
        McpError: the tool ended with a protocol error.
    """
    ctx = tool_ctx.request
    call = await acreate_call(tool, arguments, ctx)
    ctx.call_detail["task_id"] = call.id
    return await afollow(call, tool_ctx, enqueue=True)


# -- following ------------------------------------------------------------------------------------


async def _next(events: notify.GroupListener, timeout: float) -> dict[str, Any] | None:
    """The next channel-layer message, or None after ``timeout``.

    A listener whose connection broke (Redis restarted, say) raises on every read: the call
    then goes on by polling its row, at the same pace, instead of failing.
    """
    try:
        return await events.next(timeout)
    except Exception:
        logger.warning("Channel layer unavailable; polling the call's row", exc_info=True)
        await asyncio.sleep(timeout)
        return None


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
                message = await _next(events, _check_interval())
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
    ctx.call_detail.update(task_id=current.id, worker=current.worker)
    return _outcome(current, ctx)


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


def _outcome(call: BackgroundCall, ctx: RequestContext) -> ToolResult:
    """The request's answer from a finished row (see the module docstring for statuses)."""
    if call.status == Status.CANCELLED:
        raise CallCancelled()
    if call.status == Status.COMPLETED:
        if call.outcome == Outcome.INPUT_REQUIRED:
            raise InputRequired(call.input_requests or {})
        if call.outcome == Outcome.TIMED_OUT:
            ctx.outcome = "timed_out"
        return result_from_json(call.result)
    if call.outcome == Outcome.PROTOCOL_ERROR:
        raise _remote_error(call.error)
    if call.outcome == Outcome.TIMED_OUT:
        raise ToolTimeout(call.status_message)
    raise ToolError(call.status_message or "The background call failed.")


# -- reading, settling, cancelling ----------------------------------------------------------------


async def aget_call(
    call_id: str, *, endpoint_id: int, principal: str, session_id: str = ""
) -> BackgroundCall | None:
    """The caller's own call, settled first if its worker is gone; None for anyone else's.

    Ownership is the endpoint, the principal and, for calls made in a legacy session, that
    session (2025-11-25 basic/utilities/tasks, "Security": tasks are bound to their creator).
    """
    call = await asettle(call_id)
    if (
        call is None
        or call.endpoint_id != endpoint_id
        or call.principal != principal
        or call.session_id != session_id
    ):
        return None
    return call


def _stale_verdict(
    call: BackgroundCall, now: datetime, db_since: datetime | None = None
) -> tuple[str, str, str] | None:
    """(status, outcome, message) when an active call can no longer end by itself.

    ``db_since`` is when the database last (re)started. A worker cannot write its heartbeat
    while the database is down, but it writes one within a beat of its return (it retries
    every beat), so a silent call counts as lost only once the database has been back for
    a few beats (at least ``MIN_RECONNECT_SECONDS``) as well: a worker that ran through a
    restart is not called crashed.
    """
    conf = get_conf()
    if call.status == Status.QUEUED:
        waited = conf.MCP_BACKGROUND_START_TIMEOUT_SECONDS
        if now - call.created_at > timedelta(seconds=waited):
            return (
                Status.FAILED,
                Outcome.NOT_STARTED,
                f"No worker started this call within {waited:g} s: is a Celery worker running?",
            )
        return None
    lost_after = timedelta(seconds=conf.MCP_BACKGROUND_LOST_AFTER_SECONDS)
    hard = timedelta(seconds=call.hard_time_limit)
    ran = now - call.started_at if call.started_at is not None else timedelta(0)
    silent = call.heartbeat_at is not None and now - call.heartbeat_at > lost_after
    if silent and db_since is not None:
        beats = max(3 * conf.MCP_BACKGROUND_HEARTBEAT_SECONDS, MIN_RECONNECT_SECONDS)
        grace = min(lost_after, timedelta(seconds=beats))
        silent = now - db_since > grace
    if call.status == Status.WORKING and (ran > hard + lost_after or (silent and ran >= hard)):
        # Killed at the hard limit (prefork), or still running past it where nothing can
        # kill it (the embedded worker): either way the call is over.
        return (
            Status.FAILED,
            Outcome.TIMED_OUT,
            f"Tool timed out after {call.hard_time_limit:g} s (hard limit)",
        )
    if silent:
        return (
            Status.FAILED,
            Outcome.LOST,
            "The worker running this call stopped (it crashed or was killed) before the call "
            "finished.",
        )
    return None


async def asettle(call_id: str) -> BackgroundCall | None:
    """Return the row, first failing it when it is active but can no longer end by itself."""
    await _db_ready()
    call = await BackgroundCall.objects.filter(id=call_id).afirst()
    if call is None or not call.is_active:
        return call
    verdict = _stale_verdict(call, timezone.now())
    if verdict is not None:
        # Before calling a worker lost: was the database simply down meanwhile?
        db_since = await sync_to_async(_database_started_at)()
        verdict = _stale_verdict(call, timezone.now(), db_since)
    if verdict is None:
        return call
    status, outcome, message = verdict
    changed = await BackgroundCall.objects.filter(
        id=call.id, status=call.status, heartbeat_at=call.heartbeat_at
    ).aupdate(
        status=status,
        outcome=outcome,
        status_message=message,
        updated_at=timezone.now(),
        result=result_to_json(ToolResult.error(message)),
        error=InternalError(message).to_error_object(),
        finished_at=timezone.now(),
    )
    if changed:
        logger.warning("Background call settled", extra={"call": call.id, "outcome": outcome})
        # A worker that is merely slow (past its hard limit) stops too.
        await notify.apublish_call_cancel(call_id=call.id)
    return await BackgroundCall.objects.filter(id=call_id).afirst()


async def acancel_call(call_id: str, message: str = "Cancelled by the client.") -> bool:
    """Cancel an active call; return whether this cancelled it (False: already final)."""
    await _db_ready()
    changed = await BackgroundCall.objects.filter(id=call_id, status__in=ACTIVE).aupdate(
        status=Status.CANCELLED,
        outcome=Outcome.CANCELLED,
        status_message=message,
        updated_at=timezone.now(),
        finished_at=timezone.now(),
    )
    if changed:
        await notify.apublish_call_cancel(call_id=call_id)
    return bool(changed)


async def acancel_request(*, session_id: str, request_id: Any) -> bool:
    """Cancel the session's active background call for JSON-RPC ``request_id``, if any."""
    await _db_ready()
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
    """The JSON-RPC response the follower of a finished plain call sends (see ``_outcome``)."""
    if call.status == Status.CANCELLED:
        return None
    base = {"jsonrpc": "2.0", "id": call.request_id}
    if call.status == Status.FAILED and call.outcome == Outcome.PROTOCOL_ERROR:
        return {**base, "error": _remote_error(call.error).to_error_object()}
    if call.status == Status.COMPLETED and call.outcome == Outcome.INPUT_REQUIRED:
        # A legacy request cannot answer input_required (handlers/tools.py says the same).
        return {**base, "error": InternalError("Tool failed").to_error_object()}
    if call.status == Status.COMPLETED:
        result = result_from_json(call.result)
    else:
        result = ToolResult.error(call.status_message or "The background call failed.")
    return {**base, "result": shape_call_result(result, call.protocol_version)}


async def aorphan_answer(*, session_id: str, request_id: Any) -> OrphanAnswer | None:
    """The response of the session's request ``request_id`` whose follower is gone, if final.

    A resumed 2025-11-25 stream (GET + Last-Event-ID) asks when its events stop coming: the
    web process that followed the call may have died, and nobody else would ever answer the
    request. None while the call runs, or when it only just ended (its follower, if alive,
    is sending the response), or when the request was not a background call.
    """
    await _db_ready()
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


async def await_final(call_id: str, timeout: float) -> BackgroundCall | None:
    """Wait (at most ``timeout`` s) until the call is final or waits for input; return it."""
    async with notify.GroupListener(notify.call_group(call_id)) as events:
        call = await asettle(call_id)
        deadline = asyncio.get_running_loop().time() + timeout
        while call is not None and call.status in (Status.QUEUED, Status.WORKING):
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            await _next(events, min(left, _check_interval()))
            call = await asettle(call_id)
        return call


async def asubmit_answers(call_id: str, responses: Mapping[str, Any]) -> bool:
    """Add a client's answers to a task waiting in input_required, and wake its worker.

    Only answers to questions the task asked and that are still unanswered are kept
    (partial sets are fine); returns whether any was.
    """
    await _db_ready()
    call = await BackgroundCall.objects.filter(id=call_id).afirst()
    if call is None or call.status != Status.INPUT_REQUIRED:
        return False
    asked = call.input_requests or {}
    fresh = {
        key: value
        for key, value in responses.items()
        if key in asked and key not in call.input_responses
    }
    if not fresh:
        return False
    merged = {**call.input_responses, **fresh}
    changed = await BackgroundCall.objects.filter(
        id=call_id, status=Status.INPUT_REQUIRED, input_responses=call.input_responses
    ).aupdate(input_responses=merged)
    if changed:
        await notify.apublish_call_input(call_id=call_id)
    return bool(changed)


# -- the worker -----------------------------------------------------------------------------------


async def arun_call(call_id: str, *, worker: str) -> None:
    """Run a queued call on this worker (the Celery task's body).

    Raises:
        ClaimDeferred: the database is unavailable, so the call was not claimed: the task
            retries it later (nothing ran).
    """
    try:
        await _db_ready()
        claimed = await BackgroundCall.objects.filter(id=call_id, status=Status.QUEUED).aupdate(
            status=Status.WORKING,
            started_at=timezone.now(),
            updated_at=timezone.now(),
            heartbeat_at=timezone.now(),
            worker=worker[:200],
            worker_pid=os.getpid(),
        )
        if not claimed:
            # Cancelled or settled before it started, or a message redelivered after its
            # worker died mid-call: never run a tool twice, only make sure the row is final.
            await asettle(call_id)
            return
        call = await BackgroundCall.objects.select_related("endpoint").aget(id=call_id)
    except DB_UNAVAILABLE as exc:
        raise ClaimDeferred(call_id) from exc
    try:
        await _WorkerRun(call).run()
    finally:
        await sync_to_async(close_old_connections)()


class _WorkerClientRequester:
    """protocol.ports.ClientRequester on a worker: the follower asks, the answer comes back."""

    def __init__(self, call_id: str, timeout: float) -> None:
        self.call_id = call_id
        self.timeout = timeout
        self.pending: dict[str, asyncio.Future[Any]] = {}

    async def request(self, method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        ask_id = secrets.token_urlsafe(12)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[ask_id] = future
        try:
            await notify.apublish_call_ask(
                call_id=self.call_id, ask_id=ask_id, method=method, params=dict(params)
            )
            async with asyncio.timeout(self.timeout):
                answer = await future
        except TimeoutError:
            raise ToolError(f"The client did not answer {method} in time.") from None
        finally:
            self.pending.pop(ask_id, None)
        if answer.get("error") is not None:
            raise ToolError(str(answer["error"]))
        result = answer.get("result")
        if not isinstance(result, Mapping):
            raise ToolError(f"The client's answer to {method} is not an object.")
        return result

    def deliver(self, message: Mapping[str, Any]) -> None:
        future = self.pending.get(str(message.get("ask_id")))
        if future is not None and not future.done():
            future.set_result(message)


class _WorkerRun:
    """One call on a worker: the executor, the heartbeat, and the control messages."""

    def __init__(self, call: BackgroundCall) -> None:
        self.call = call
        conf = get_conf()
        # A little longer than the follower's own wait, so its error reaches the client.
        self.asker = _WorkerClientRequester(call.id, conf.MCP_CLIENT_REQUEST_TIMEOUT_SECONDS + 5)
        self.stopped = False  # cancelled or settled elsewhere: write nothing more
        self.progress: dict[str, Any] | None = None  # the latest, not yet on the row

    def _progress_fields(self) -> dict[str, Any]:
        """The latest progress for the row's next write (then forgotten until there's more)."""
        if self.progress is None:
            return {}
        progress, self.progress = self.progress, None
        return {
            "last_progress": progress,
            "status_message": str(progress.get("message") or "")[:500],
        }

    async def run(self) -> None:
        call = self.call
        state = await aget_endpoint_state(call.endpoint.slug)
        tool = state.snapshot.tool(call.tool_name) if state is not None and state.enabled else None
        if state is None or tool is None:
            message = f"Tool {call.tool_name} is no longer published on this endpoint."
            await self._finish(Status.COMPLETED, Outcome.TOOL_ERROR, ToolResult.error(message))
            return
        async with _control_listener(call.id) as control:
            while True:
                ctx = self._context(state.snapshot, call.input_responses)
                work = asyncio.create_task(
                    execute_tool(
                        tool, call.arguments, ToolCallContext(ctx, tool.name), call.soft_time_limit
                    )
                )
                watcher = asyncio.create_task(self._watch(control, work))
                try:
                    result = await work
                except asyncio.CancelledError:
                    if not self.stopped:
                        raise  # this worker is shutting down, not the call being cancelled
                    await _announce_done(call.id)
                    return
                except InputRequired as needed:
                    if not call.is_task:
                        await self._finish(
                            Status.COMPLETED, Outcome.INPUT_REQUIRED, requests=needed.requests
                        )
                        return
                    answers = await self._wait_for_input(control, needed.requests)
                    if answers is None:
                        return
                    call.input_responses = answers
                    continue
                except ToolTimeout as failure:
                    await self._finish(
                        Status.COMPLETED, Outcome.TIMED_OUT, ToolResult.error(failure.message)
                    )
                    return
                except ToolError as failure:
                    await self._finish(
                        Status.COMPLETED, Outcome.TOOL_ERROR, ToolResult.error(failure.message)
                    )
                    return
                except McpError as failure:
                    await self._finish(Status.FAILED, Outcome.PROTOCOL_ERROR, error=failure)
                    return
                except Exception:
                    logger.exception("Background tool call failed", extra={"tool": tool.name})
                    await self._finish(
                        Status.FAILED, Outcome.PROTOCOL_ERROR, error=InternalError("Tool failed")
                    )
                    return
                finally:
                    watcher.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await watcher
                result = finish_tool_result(tool, result)
                outcome = Outcome.TOOL_ERROR if result.is_error else Outcome.OK
                await self._finish(Status.COMPLETED, outcome, result)
                return

    def _context(self, snapshot: Any, answers: Mapping[str, Any]) -> RequestContext:
        from mcp_app.services.runner import CatalogResourceReader, CatalogToolRunner

        call = self.call
        streams = call.progress_token is not None or bool(call.log_level)
        return RequestContext(
            version=call.protocol_version,
            catalog=snapshot,
            tools=CatalogToolRunner(),
            resources=CatalogResourceReader(),
            server_info={},
            client_capabilities=call.client_capabilities,
            request_id=call.request_id,
            progress_token=call.progress_token,
            log_level=call.log_level or None,
            send=self._publish if streams else None,
            client_requests=self.asker if call.session_id else None,
            input_responses=dict(answers),
            principal=call.principal,
        )

    async def _publish(self, frame: Mapping[str, Any]) -> None:
        try:
            await notify.apublish_call_frame(call_id=self.call.id, frame=dict(frame))
        except Exception:
            # Redis is unreachable: the notification is lost, the call goes on (its result
            # travels through the row; docs/architecture.md, "Failures").
            logger.warning("A notification of a background call was not published", exc_info=True)
        if frame.get("method") == "notifications/progress":
            # Kept on the row with the next heartbeat (a task's statusMessage), not per event.
            params = frame.get("params") or {}
            self.progress = {k: v for k, v in params.items() if k != "progressToken"}

    async def _watch(self, control: notify.GroupListener, work: asyncio.Task[Any]) -> None:
        """Beat the heartbeat; stop ``work`` when the call is cancelled or settled elsewhere."""
        beat = get_conf().MCP_BACKGROUND_HEARTBEAT_SECONDS
        loop = asyncio.get_running_loop()
        next_beat = loop.time() + beat
        while not work.done():
            message = await _next(control, max(0.0, next_beat - loop.time()))
            if message is not None:
                if message["type"] == notify.CALL_ANSWER:
                    self.asker.deliver(message)
                elif message["type"] == notify.CALL_CANCEL:
                    self._stop(work)
                    return
                continue
            next_beat = loop.time() + beat
            try:
                await _db_ready()
                alive = await BackgroundCall.objects.filter(
                    id=self.call.id, status=Status.WORKING
                ).aupdate(heartbeat_at=timezone.now(), **self._progress_fields())
            except DB_UNAVAILABLE:
                # The tool goes on; the next beat writes again once the database is back
                # (the settlers allow for the outage, see _stale_verdict).
                logger.warning("Heartbeat not written: database unavailable", exc_info=True)
                continue
            if not alive:
                self._stop(work)
                return

    def _stop(self, work: asyncio.Task[Any]) -> None:
        self.stopped = True
        work.cancel()

    async def _wait_for_input(
        self, control: notify.GroupListener, requests: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """A task's tool asked: wait in input_required until every question has an answer.

        Answers may arrive one ``tasks/update`` at a time; the tool then runs again from the
        start with all of them, as a 2026-07-28 retry would (basic/patterns/mrtr). Returns
        None when the call was cancelled or settled meanwhile.
        """
        call = self.call
        changed = await self._write_through_outage(
            "Input request",
            lambda: BackgroundCall.objects.filter(id=call.id, status=Status.WORKING).aupdate(
                status=Status.INPUT_REQUIRED,
                input_requests=dict(requests),
                # A question asked again had an unusable answer: it is open once more.
                input_responses={
                    k: v for k, v in call.input_responses.items() if k not in requests
                },
                updated_at=timezone.now(),
                heartbeat_at=timezone.now(),
            ),
        )
        if not changed:
            return None
        await _announce_done(call.id)
        beat = get_conf().MCP_BACKGROUND_HEARTBEAT_SECONDS
        while True:
            message = await _next(control, beat)
            if message is not None and message["type"] == notify.CALL_CANCEL:
                return None
            try:
                await _db_ready()
                row = await BackgroundCall.objects.filter(id=call.id).afirst()
            except DB_UNAVAILABLE:
                logger.warning("Task input not read: database unavailable", exc_info=True)
                continue
            if row is None or row.status != Status.INPUT_REQUIRED:
                return None
            if all(key in row.input_responses for key in requests):
                resumed = await self._write_through_outage(
                    "Task resumption",
                    lambda: BackgroundCall.objects.filter(
                        id=call.id, status=Status.INPUT_REQUIRED
                    ).aupdate(
                        status=Status.WORKING,
                        heartbeat_at=timezone.now(),
                        updated_at=timezone.now(),
                    ),
                )
                return dict(row.input_responses) if resumed else None
            try:
                await BackgroundCall.objects.filter(
                    id=call.id, status=Status.INPUT_REQUIRED
                ).aupdate(heartbeat_at=timezone.now())
            except DB_UNAVAILABLE:
                # As in _watch: the next beat writes again once the database is back.
                logger.warning("Heartbeat not written: database unavailable", exc_info=True)

    async def _write_through_outage(self, what: str, write: Callable[[], Awaitable[int]]) -> int:
        """Run ``write`` (an UPDATE; returns its row count), waiting out a database outage.

        The state it writes exists only in this run: failing here would lose it, and the call
        would later be settled as "worker stopped" although the worker lived. Gives up (raises)
        after DB_OUTAGE_TOLERANCE_SECONDS, like the outcome write.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DB_OUTAGE_TOLERANCE_SECONDS
        while True:
            try:
                await _db_ready()
                return await write()
            except DB_UNAVAILABLE:
                if loop.time() > deadline:
                    raise
                logger.warning("%s not written yet: database unavailable", what, exc_info=True)
                await asyncio.sleep(get_conf().MCP_BACKGROUND_HEARTBEAT_SECONDS)

    async def _finish(
        self,
        status: str,
        outcome: str,
        result: ToolResult | None = None,
        *,
        error: McpError | None = None,
        requests: Mapping[str, Any] | None = None,
    ) -> None:
        """Write the final status, unless the call was cancelled or settled meanwhile."""
        fields: dict[str, Any] = {
            **self._progress_fields(),
            "status": status,
            "outcome": outcome,
            "finished_at": timezone.now(),
            "updated_at": timezone.now(),
        }
        if result is not None:
            fields["result"] = result_to_json(result)
            if result.is_error:
                fields["status_message"] = _first_text(result)[:500]
        if error is not None:
            fields["error"] = error.to_error_object()
            fields["status_message"] = error.message[:500]
        if requests is not None:
            fields["input_requests"] = dict(requests)
        await self._write_through_outage(
            "Outcome",
            lambda: BackgroundCall.objects.filter(id=self.call.id, status__in=ACTIVE).aupdate(
                **fields
            ),
        )
        await _announce_done(self.call.id)


@contextlib.asynccontextmanager
async def _control_listener(call_id: str) -> AsyncIterator[notify.GroupListener]:
    """The call's control group (cancellation, answers), or a deaf listener without Redis.

    Redis may be down or restarting just when a worker claims a call: the run then goes on
    without control messages (a cancellation still reaches it through the row, at the next
    heartbeat) instead of failing with its row left "working".
    """
    listener = notify.GroupListener(notify.call_control_group(call_id))
    try:
        await listener.__aenter__()
    except Exception:
        logger.warning("Channel layer unavailable; the call runs without control messages")
        await listener.__aexit__(None, None, None)
        listener = notify.GroupListener.deaf()
    try:
        yield listener
    finally:
        await listener.__aexit__(None, None, None)


async def _announce_done(call_id: str) -> None:
    """Wake the call's followers; without Redis they find the row's change by polling it."""
    try:
        await notify.apublish_call_done(call_id=call_id)
    except Exception:
        logger.warning("A background call's end was not announced", exc_info=True)


def _first_text(result: ToolResult) -> str:
    for block in result.content:
        if block.get("type") == "text":
            return str(block.get("text", ""))
    return ""


# -- the embedded worker --------------------------------------------------------------------------

_embedded_lock = threading.Lock()
_embedded_loop: asyncio.AbstractEventLoop | None = None


def embedded_worker_enabled() -> bool:
    """Whether calls run on a worker inside this web process (no broker configured)."""
    return str(settings.CELERY_BROKER_URL).startswith("memory://")


def embedded_loop() -> asyncio.AbstractEventLoop | None:
    """The web process's event loop, on which the embedded worker runs calls."""
    return _embedded_loop


def ensure_embedded_worker() -> None:
    """Start a Celery worker thread on the in-memory transport, once per process.

    For trying the product without Redis (the README's run command): the worker thread takes
    jobs off Celery's in-memory queue and runs each call on this process's event loop, where
    the in-memory channel layer lives. Production runs ``celery -A mcpsite worker``.
    """
    global _embedded_loop
    with _embedded_lock:
        if _embedded_loop is not None:
            return
        _embedded_loop = asyncio.get_running_loop()
        from mcpsite.celery import app

        def run() -> None:
            # Built in its own thread: the worker's init signals close Django's connections,
            # which Django refuses to do from the event loop's thread.
            app.WorkController(
                pool_cls="solo",
                concurrency=1,
                without_heartbeat=True,
                without_mingle=True,
                without_gossip=True,
                hostname=f"embedded@{os.uname().nodename}",
                loglevel="WARNING",
            ).start()

        threading.Thread(target=run, name="mcp-embedded-worker", daemon=True).start()


# -- housekeeping ---------------------------------------------------------------------------------


async def areap() -> tuple[int, int]:
    """Settle every active call whose worker is gone, then delete expired calls.

    Returns (settled, deleted). Followers and task reads settle the calls they look at; this
    catches the ones nobody looks at (``manage.py reap_background_calls``, from cron).
    """
    settled = 0
    active = BackgroundCall.objects.filter(status__in=ACTIVE).values_list("id", flat=True)
    async for call_id in active:
        before = await BackgroundCall.objects.filter(id=call_id).values_list("status").afirst()
        after = await asettle(call_id)
        if before is not None and after is not None and after.status != before[0]:
            settled += 1
    deleted, _ = (
        await BackgroundCall.objects.filter(expires_at__lt=timezone.now())
        .exclude(status__in=ACTIVE)
        .adelete()
    )
    return settled, deleted
