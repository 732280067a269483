"""A background call's row: written, claimed, read, settled, cancelled, answered and reaped.

Both sides use it: the web side creates and follows rows, the worker claims them and writes
the outcome. Every status change is a conditional UPDATE on the status the writer saw, so
racing writers cannot both win.

Nobody waits forever. Whoever reads an active row whose worker is gone settles it
(``asettle``): queued longer than the start timeout -> "no worker"; heartbeat older than the
lost-after bound -> "worker lost"; running past the hard limit -> "timed out".

The row keeps the tool's result as the worker finished it (output schema checked) and how
the call ended (``outcome``, ``protocol.results.Outcome``); ``call_result`` reads both back.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.db import InterfaceError, OperationalError, close_old_connections, connection
from django.utils import timezone

from mcp_app.conf import get_conf
from mcp_app.models import BackgroundCall, Endpoint
from mcp_app.protocol.catalog import ToolDef
from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.errors import InternalError, McpError
from mcp_app.protocol.results import (
    NO_STRUCTURED,
    CallCancelled,
    InputRequired,
    Outcome,
    ServiceUnavailable,
    ToolResult,
)
from mcp_app.services import limits, notify
from mcp_app.services.snapshots import ToolBinding

logger = logging.getLogger(__name__)

Status = BackgroundCall.Status
ACTIVE = BackgroundCall.ACTIVE
# The Celery task that runs a call (mcp_app/tasks.py); the web side enqueues it by name.
RUN_CALL_TASK = "mcp_app.run_background_call"
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


async def db_ready() -> None:
    """Run ``_refresh_connection`` on the thread the async ORM queries from."""
    await sync_to_async(_refresh_connection)()


def _database_started_at() -> datetime | None:
    """When the database server (re)started; None where it cannot say (SQLite)."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_postmaster_start_time()")
        started: datetime | None = cursor.fetchone()[0]
        return started


def state_ttl() -> int:
    """Seconds the requestState of a held run stays valid: a little past its owner's wait
    for the answer (MCP_CONTINUATION_SECONDS; services/continuations.py)."""
    return math.ceil(get_conf().MCP_CONTINUATION_SECONDS) + 1


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


def call_result(call: BackgroundCall) -> ToolResult:
    """The result a final row holds, as the tool ended on its worker; the request's answer.

    The result was finished where the tool ran (its output schema checked there), so it is
    returned as stored, with how it ended (``outcome``: timed out, upstream unreachable, or
    None when ``isError`` says it all) and where it ran (``detail``: ``{"task_id",
    "worker"}``, and ``"policy_decisions"`` when the endpoint's policies decided there). A
    row settled as lost or never started holds an error result saying so.

    Raises:
        CallCancelled: the call was cancelled (no response may be sent).
        InputRequired: a 2026-07-28 call's tool asked the client.
        McpError: the tool ended with a protocol error.
    """
    if call.status == Status.CANCELLED:
        raise CallCancelled()
    if call.outcome == Outcome.INPUT_REQUIRED:
        if call.continuation:
            # Its worker holds the run open for the retry (services/continuations.py).
            raise InputRequired(
                call.input_requests or {},
                continuation=call.continuation,
                ttl_seconds=state_ttl(),
            )
        raise InputRequired(call.input_requests or {})
    where: dict[str, Any] = {"task_id": call.id, "worker": call.worker}
    if call.policy_decisions:
        # The endpoint's policies saw the result there (protocol.handlers.tools.run_tool).
        where["policy_decisions"] = call.policy_decisions
    if call.outcome == Outcome.PROTOCOL_ERROR:
        error = _remote_error(call.error)
        error.detail = where
        raise error
    if call.result is not None:
        result = result_from_json(call.result)
    else:
        result = ToolResult.error(call.status_message or "The background call failed.")
    kept = (Outcome.TIMED_OUT, Outcome.UPSTREAM_ERROR)
    result.outcome = Outcome(call.outcome) if call.outcome in kept else None
    result.detail = where
    return result


# -- writing and claiming -------------------------------------------------------------------------


def time_limits(key: ToolBinding) -> tuple[float, float]:
    """The tool's (soft, hard) time limits in seconds, defaults filled in."""
    soft = key.soft_time_limit or get_conf().MCP_BACKGROUND_SOFT_TIME_LIMIT_SECONDS
    hard = key.hard_time_limit or soft + HARD_LIMIT_MARGIN_SECONDS
    return soft, max(hard, soft)


async def acreate_call(
    tool: ToolDef,
    arguments: Mapping[str, Any],
    ctx: RequestContext,
    *,
    answers: Mapping[str, Any],
    is_task: bool = False,
    ttl_ms: int | None = None,
) -> BackgroundCall:
    """Write the call's row (committed when this returns: autocommit), not yet enqueued.

    ``answers`` are the client's answers to the tool's questions gathered so far.

    Raises:
        ServiceUnavailable: the database is unreachable (nothing was written or run).
    """
    conf = get_conf()
    soft, hard = time_limits(tool.binding)
    keep_ms = ttl_ms if is_task and ttl_ms is not None else conf.MCP_BACKGROUND_KEEP_SECONDS * 1000
    try:
        await db_ready()
        now = timezone.now()
        endpoint_id = await (
            Endpoint.objects.filter(slug=ctx.catalog.endpoint.slug)
            .values_list("id", flat=True)
            .aget()
        )
        return await BackgroundCall.objects.acreate(
            endpoint_id=endpoint_id,
            tool_id=tool.binding.pk,
            tool_name=tool.name,
            arguments=dict(arguments),
            principal=ctx.principal,
            session_id=ctx.session.id if ctx.session is not None else "",
            request_id=ctx.request_id,
            protocol_version=ctx.version,
            progress_token=ctx.progress_token if ctx.send is not None else None,
            log_level=(ctx.log_level or "") if ctx.send is not None else "",
            client_capabilities=dict(ctx.client_capabilities),
            input_responses=dict(answers),
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


async def aclaim_call(call_id: str, *, worker: str) -> BackgroundCall | None:
    """Move a queued call to ``working`` for this worker; None when it is not queued.

    Once only: a call cancelled or settled before it started, or a message redelivered after
    its worker died mid-call, is never run (tools may have side effects); its row is only
    made final. Database errors propagate (nothing was claimed).
    """
    await db_ready()
    claimed = await BackgroundCall.objects.filter(id=call_id, status=Status.QUEUED).aupdate(
        status=Status.WORKING,
        started_at=timezone.now(),
        updated_at=timezone.now(),
        heartbeat_at=timezone.now(),
        worker=worker[:200],
        worker_pid=os.getpid(),
    )
    if not claimed:
        await asettle(call_id)
        return None
    return await BackgroundCall.objects.select_related("endpoint").aget(id=call_id)


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


def stale_verdict(
    call: BackgroundCall, now: datetime, db_since: datetime | None = None
) -> tuple[str, Outcome, str] | None:
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
    await db_ready()
    call = await BackgroundCall.objects.filter(id=call_id).afirst()
    if call is None or not call.is_active:
        return call
    verdict = stale_verdict(call, timezone.now())
    if verdict is not None:
        # Before calling a worker lost: was the database simply down meanwhile?
        db_since = await sync_to_async(_database_started_at)()
        verdict = stale_verdict(call, timezone.now(), db_since)
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
        # Both shapes a reader may need: the request's error result, a task's JSON-RPC error.
        result=result_to_json(ToolResult.error(message)),
        error=InternalError(message).to_error_object(),
        finished_at=timezone.now(),
    )
    if changed:
        logger.warning("Background call settled", extra={"call": call.id, "outcome": outcome})
        # A worker that is merely slow (past its hard limit) stops too.
        await notify.apublish_call_cancel(call_id=call.id)
        await limits.abackground_call_ended(call.id)
    return await BackgroundCall.objects.filter(id=call_id).afirst()


async def acancel_call(call_id: str, message: str = "Cancelled by the client.") -> bool:
    """Cancel an active call; return whether this cancelled it (False: already final)."""
    await db_ready()
    changed = await BackgroundCall.objects.filter(id=call_id, status__in=ACTIVE).aupdate(
        status=Status.CANCELLED,
        outcome=Outcome.CANCELLED,
        status_message=message,
        updated_at=timezone.now(),
        finished_at=timezone.now(),
    )
    if changed:
        await notify.apublish_call_cancel(call_id=call_id)
        await limits.abackground_call_ended(call_id)
    return bool(changed)


async def asubmit_answers(call_id: str, responses: Mapping[str, Any]) -> bool:
    """Add a client's answers to a task waiting in input_required, and wake its worker.

    Only answers to questions the task asked and that are still unanswered are kept
    (partial sets are fine); returns whether any was.
    """
    await db_ready()
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
