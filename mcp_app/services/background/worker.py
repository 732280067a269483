"""The worker side of a background call: the Celery task's body.

``arun_call`` claims the row (``queued`` -> ``working``, once: a redelivered message never
runs a tool twice) and runs the tool exactly as the tools/call handler would inline
(``protocol.handlers.tools.run_tool``: the same error ladder, the output schema checked once,
here), under the soft time limit. While it runs, the heartbeat is refreshed (where a
cancellation is noticed too), progress and logs are published to the web side, and a legacy
call's questions go to the follower and its answers come back on the control group. A
2026-07-28 task's questions park it in ``input_required`` until ``tasks/update`` has answered
them in its row; its tool then runs again with the answers, except an upstream's
(``Executor.holds_questions``), whose run waits here for them and goes on (``_WorkerRun.ask``).
The row then keeps the finished result and how the call ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.utils import timezone

from mcp_app.conf import get_conf
from mcp_app.models import BackgroundCall
from mcp_app.protocol.catalog import CatalogSnapshot, ToolDef
from mcp_app.protocol.context import CallInputs, RequestContext, ToolCallContext
from mcp_app.protocol.errors import InternalError, McpError
from mcp_app.protocol.handlers.tools import run_tool
from mcp_app.protocol.policies import PolicyRecord
from mcp_app.protocol.ports import HeldQuestions
from mcp_app.protocol.results import InputRequired, Outcome, ToolError, ToolResult
from mcp_app.services import continuations, limits, notify
from mcp_app.services.background.calls import (
    ACTIVE,
    DB_OUTAGE_TOLERANCE_SECONDS,
    DB_UNAVAILABLE,
    aclaim_call,
    db_ready,
    result_to_json,
)
from mcp_app.services.background.groups import next_message
from mcp_app.services.context_factory import request_context
from mcp_app.services.endpoint_directory import aget_endpoint_state
from mcp_app.services.execution import execute_tool

logger = logging.getLogger(__name__)

Status = BackgroundCall.Status


class ClaimDeferred(Exception):
    """The worker could not claim the call because the database is unavailable: retry later."""


async def arun_call(call_id: str, *, worker: str) -> None:
    """Run a queued call on this worker (the Celery task's body).

    Raises:
        ClaimDeferred: the database is unavailable, so the call was not claimed: the task
            retries it later (nothing ran).
    """
    try:
        call = await aclaim_call(call_id, worker=worker)
    except DB_UNAVAILABLE as exc:
        raise ClaimDeferred(call_id) from exc
    if call is None:
        return
    run = _WorkerRun(call)
    try:
        await run.run()
        if run.continuation:
            # The row is final (input_required), but its run waits here for the retry.
            await continuations.await_released(run.continuation)
    finally:
        await sync_to_async(close_old_connections)()


class _RunHere:
    """protocol.ports.ToolRunner on a worker: the executor, here, under the call's soft limit.

    (The catalog's runner would send a background tool to a worker: this is that worker.) A
    2026-07-28 call whose questions must be answered within one run (an upstream's) is held
    open here between rounds: a plain call as the web process holds an inline one, a task by
    ``task_questions`` (its questions answered through its row).
    """

    def __init__(self, seconds: float, *, task_questions: HeldQuestions | None) -> None:
        self.seconds = seconds
        self.task_questions = task_questions

    async def run_tool(
        self, tool: ToolDef, arguments: Mapping[str, Any], ctx: ToolCallContext
    ) -> ToolResult:
        if self.task_questions is not None:
            if continuations.holds_questions(tool.binding, ctx):
                ctx.held = self.task_questions
        elif continuations.holds_questions(tool.binding, ctx):

            def run(held_ctx: ToolCallContext) -> Coroutine[Any, Any, ToolResult]:
                return execute_tool(tool, arguments, held_ctx, self.seconds)

            return await continuations.arun_held(run, ctx, self.seconds)
        return await execute_tool(tool, arguments, ctx, self.seconds)


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
    """One call on a worker: the tool, the heartbeat, and the control messages."""

    def __init__(self, call: BackgroundCall) -> None:
        self.call = call
        conf = get_conf()
        # A little longer than the follower's own wait, so its error reaches the client.
        self.asker = _WorkerClientRequester(call.id, conf.MCP_CLIENT_REQUEST_TIMEOUT_SECONDS + 5)
        self.stopped = False  # cancelled or settled elsewhere: write nothing more
        # The held run a plain 2026-07-28 call's retry resumes here, once it asked.
        self.continuation = ""
        # A task held open (ask): new answers are in its row; none came in time.
        self.answered = asyncio.Event()
        self.unanswered = False
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
                ctx = self._context(state.snapshot)
                inputs = CallInputs(answers=dict(call.input_responses))
                # What the endpoint's policies do about this run, for the call's row.
                record = PolicyRecord()
                work = asyncio.create_task(run_tool(ctx, tool, call.arguments, inputs, record))
                watcher = asyncio.create_task(self._watch(control, work))
                try:
                    result = await work
                except asyncio.CancelledError:
                    if self.unanswered:
                        seconds = get_conf().MCP_CONTINUATION_SECONDS
                        message = (
                            f"The tool's question was not answered within {seconds:g} s "
                            "(tasks/update): the call was cancelled."
                        )
                        await self._finish(
                            Status.FAILED, Outcome.TIMED_OUT, error=InternalError(message)
                        )
                        return
                    if not self.stopped:
                        raise  # this worker is shutting down, not the call being cancelled
                    await _announce_done(call.id)
                    return
                except InputRequired as needed:
                    if not call.is_task:
                        written = await self._finish(
                            Status.COMPLETED,
                            Outcome.INPUT_REQUIRED,
                            requests=needed.requests,
                            continuation=needed.continuation,
                        )
                        if written:
                            self.continuation = needed.continuation
                        elif needed.continuation:
                            # Cancelled meanwhile: no retry will come for the held run.
                            await continuations.astop(needed.continuation)
                        return
                    answers = await self._wait_for_input(control, needed.requests)
                    if answers is None:
                        return
                    call.input_responses = answers
                    continue
                except McpError as failure:
                    await self._finish(Status.FAILED, Outcome.PROTOCOL_ERROR, error=failure)
                    return
                except Exception:
                    # run_tool lets through only what a web request would answer with a
                    # 503 or no answer at all (an unreachable service): on a worker, a failure.
                    logger.exception("Background tool call failed", extra={"tool": tool.name})
                    await self._finish(
                        Status.FAILED, Outcome.PROTOCOL_ERROR, error=InternalError("Tool failed")
                    )
                    return
                finally:
                    watcher.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await watcher
                await self._finish(
                    Status.COMPLETED, result.ended, result, decisions=record.decisions
                )
                return

    def _context(self, snapshot: CatalogSnapshot) -> RequestContext:
        call = self.call
        streams = call.progress_token is not None or bool(call.log_level)
        return request_context(
            snapshot,
            version=call.protocol_version,
            # A task's questions are settled through its row (tasks/update).
            tools=_RunHere(call.soft_time_limit, task_questions=self if call.is_task else None),
            client_capabilities=call.client_capabilities,
            request_id=call.request_id,
            progress_token=call.progress_token,
            log_level=call.log_level or None,
            send=self._publish if streams else None,
            client_requests=self.asker if call.session_id else None,
            principal=call.principal,
            # Its upstream sessions are keyed as the web request's would be.
            caller_session=call.session_id,
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
            message = await next_message(control, max(0.0, next_beat - loop.time()))
            if message is not None:
                if message["type"] == notify.CALL_ANSWER:
                    self.asker.deliver(message)
                elif message["type"] == notify.CALL_INPUT:
                    self.answered.set()
                elif message["type"] == notify.CALL_CANCEL:
                    self._stop(work)
                    return
                continue
            next_beat = loop.time() + beat
            try:
                await db_ready()
                # A task held open waits for its answers (ask) while its tool runs.
                alive = await BackgroundCall.objects.filter(
                    id=self.call.id, status__in=(Status.WORKING, Status.INPUT_REQUIRED)
                ).aupdate(heartbeat_at=timezone.now(), **self._progress_fields())
            except DB_UNAVAILABLE:
                # The tool goes on; the next beat writes again once the database is back
                # (the settlers allow for the outage, see calls.stale_verdict).
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
            message = await next_message(control, beat)
            if message is not None and message["type"] == notify.CALL_CANCEL:
                return None
            try:
                await db_ready()
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

    async def ask(self, requests: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any]:
        """protocol.ports.HeldQuestions for a task whose run is held open (an upstream's).

        The task shows ``requests`` in ``input_required`` while its tool keeps running here;
        ``tasks/update``, in any web process, writes the answers to the row (its owner's
        only) and wakes this worker, and the answers return to the tool once every question
        has one. Unanswered after ``MCP_CONTINUATION_SECONDS``, the run is cancelled (an
        upstream request is told) and the task fails (``run``); a task cancelled or settled
        meanwhile stops the run too.
        """
        call = self.call
        conf = get_conf()
        fields = self._progress_fields()
        asked = await self._write_through_outage(
            "Input request",
            lambda: BackgroundCall.objects.filter(id=call.id, status=Status.WORKING).aupdate(
                **fields,
                status=Status.INPUT_REQUIRED,
                input_requests=dict(requests),
                # Each round starts unanswered: its questions are new (fresh keys, or asked
                # again after an unusable answer).
                input_responses={},
                updated_at=timezone.now(),
                heartbeat_at=timezone.now(),
            ),
        )
        if not asked:
            self.stopped = True
            raise asyncio.CancelledError
        await _announce_done(call.id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + conf.MCP_CONTINUATION_SECONDS
        while True:
            # Cleared before the read: answers written after it wake the wait below.
            self.answered.clear()
            try:
                await db_ready()
                row = await BackgroundCall.objects.filter(id=call.id).afirst()
            except DB_UNAVAILABLE:
                logger.warning("Task input not read: database unavailable", exc_info=True)
                row = None
                answers = None
            else:
                if row is None or row.status != Status.INPUT_REQUIRED:
                    self.stopped = True
                    raise asyncio.CancelledError
                answers = dict(row.input_responses)
            if answers is not None and all(key in answers for key in requests):
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
                if not resumed:
                    self.stopped = True
                    raise asyncio.CancelledError
                return answers
            left = deadline - loop.time()
            if left <= 0:
                logger.info("A task's question got no answer in time; its run was cancelled")
                self.unanswered = True
                raise asyncio.CancelledError
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(left, conf.MCP_BACKGROUND_HEARTBEAT_SECONDS)):
                    await self.answered.wait()

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
                await db_ready()
                return await write()
            except DB_UNAVAILABLE:
                if loop.time() > deadline:
                    raise
                logger.warning("%s not written yet: database unavailable", what, exc_info=True)
                await asyncio.sleep(get_conf().MCP_BACKGROUND_HEARTBEAT_SECONDS)

    async def _finish(
        self,
        status: str,
        outcome: Outcome,
        result: ToolResult | None = None,
        *,
        error: McpError | None = None,
        requests: Mapping[str, Any] | None = None,
        continuation: str = "",
        decisions: Sequence[Mapping[str, Any]] = (),
    ) -> bool:
        """Write the final status, unless the call was cancelled or settled meanwhile (then
        return False)."""
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
        if decisions:
            fields["policy_decisions"] = [dict(decision) for decision in decisions]
        if requests is not None:
            fields["input_requests"] = dict(requests)
            fields["continuation"] = continuation
        written = await self._write_through_outage(
            "Outcome",
            lambda: BackgroundCall.objects.filter(id=self.call.id, status__in=ACTIVE).aupdate(
                **fields
            ),
        )
        await _announce_done(self.call.id)
        await limits.abackground_call_ended(self.call.id)
        return bool(written)


@contextlib.asynccontextmanager
async def _control_listener(call_id: str) -> AsyncIterator[notify.GroupListener]:
    """The call's control group (cancellation, answers), or a deaf listener without Redis.

    Redis may be down or restarting just when a worker claims a call: the run then goes on
    without control messages (a cancellation still reaches it through the row, at the next
    heartbeat) instead of failing with its row left "working". Joining may also be slow (a
    sentinel that hangs costs its timeout): the heartbeat is written meanwhile, or the call
    would be settled as lost while it runs.
    """
    listener = notify.GroupListener(notify.call_control_group(call_id))
    join = asyncio.ensure_future(listener.__aenter__())
    try:
        await _beat_until(join, call_id)
        join.result()
    except asyncio.CancelledError:
        join.cancel()
        raise
    except Exception:
        logger.warning("Channel layer unavailable; the call runs without control messages")
        await listener.__aexit__(None, None, None)
        listener = notify.GroupListener.deaf()
    try:
        yield listener
    finally:
        await listener.__aexit__(None, None, None)


async def _beat_until(done: asyncio.Future[Any], call_id: str) -> None:
    """Write the call's heartbeat every beat until ``done`` is (its outcome left in it)."""
    beat = get_conf().MCP_BACKGROUND_HEARTBEAT_SECONDS
    while True:
        await asyncio.wait({done}, timeout=beat)
        if done.done():
            return
        try:
            await db_ready()
            await BackgroundCall.objects.filter(id=call_id, status=Status.WORKING).aupdate(
                heartbeat_at=timezone.now()
            )
        except DB_UNAVAILABLE:
            logger.warning("Heartbeat not written: database unavailable", exc_info=True)


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
