"""Tool runs held open between the rounds of a 2026-07-28 request (MRTR continuations).

A 2026-07-28 call asks its client by answering ``input_required``; the client retries the
request with the answers. Most tools simply run again and find the answers
(``ToolCallContext.ask``). A tool relaying another MCP server's question cannot: that server
asks inside one ``tools/call`` request, may word the question differently each run, and
would run its tool (and its side effects) once per round. Executors that say so
(``Executor.holds_questions``) run here instead, held open by the process running the first
round (the owner: the web process that received the call, or the worker of a plain
background call, whose Celery task waits for it, ``await_released``) until the last answer,
wherever the balancer sends the retries:

- The first round (``arun_held``) starts the run in a task of its own. When the run asks,
  the owner registers it under a random id, joins ``notify.held_group(id)`` and answers
  ``InputRequired`` naming ``<id>/<round>``, which the tools/call handler seals into
  ``requestState`` (bound to the endpoint, principal, tool and arguments, and expiring).
- A retry (``aresume``), in any process, publishes its ``inputResponses`` to that group with
  a reply group of its own, and relays what comes back: an acknowledgement, progress and log
  notifications (under its own progress token), the next question (``InputRequired`` again,
  next round) or the run's outcome. The owner takes one answer per round, from a retry of
  the same endpoint and principal; anything else is refused, and a retry that hears nothing
  within ``ACK_SECONDS`` learns that nothing waits for it (expired, answered, or its owner
  stopped). A retry whose client goes away cancels the run.
- The owner waits ``MCP_CONTINUATION_SECONDS`` for each round's answer, then cancels the run
  (an upstream request gets ``notifications/cancelled``) and forgets it. At most
  ``MCP_CONTINUATIONS_MAX`` runs wait in one process; past it the call ends with an error
  result. The run's own limit (the inline timeout, a background call's soft limit) covers all
  its rounds.

An MCP task's run is held by its worker instead, where the task already waits in
``input_required`` for ``tasks/update`` to answer through its row
(``background.worker._WorkerRun.ask``, the same ``HeldQuestions`` port): no retry comes for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import replace
from typing import Any, NoReturn

from mcp_app.conf import get_conf
from mcp_app.protocol.context import RequestContext, ToolCallContext
from mcp_app.protocol.errors import InternalError, InvalidParams, McpError
from mcp_app.protocol.results import InputRequired, Outcome, ToolError, ToolResult
from mcp_app.protocol.versions import Feature
from mcp_app.services import metrics, notify
from mcp_app.services.background.calls import result_from_json, result_to_json, state_ttl
from mcp_app.services.snapshots import ToolBinding

logger = logging.getLogger(__name__)

# Seconds a retry waits for the owner to take its answers before it says nothing waits for
# them: the owner answers within milliseconds when it is alive and the round is open.
ACK_SECONDS = 5.0
# Added to how long the run may still take (the owner says) for a retry awaiting its outcome.
OUTCOME_MARGIN_SECONDS = 10.0
# How often an owner whose retry is running looks up from its inbox (nothing to do then).
IDLE_SECONDS = 60.0

GONE = (
    "requestState names a call that no longer waits for an answer (it expired, this round "
    "was answered already, or the server holding it restarted): call the tool again without it"
)

Run = Callable[[ToolCallContext], Coroutine[Any, Any, ToolResult]]

# This process's held runs, by id, and the tasks serving them.
_held: dict[str, _HeldRun] = {}
_servers: set[asyncio.Task[None]] = set()


def holds_questions(key: ToolBinding, ctx: ToolCallContext) -> bool:
    """Whether a call's questions are answered within one run held open between rounds."""
    return key.holds_questions and ctx.request.supports(Feature.INPUT_REQUIRED)


async def await_released(continuation: str) -> None:
    """Wait until the held run ``continuation`` names has ended or stopped waiting.

    A worker runs each call in an event loop of its own, which must outlive the call's held
    run (the retries answer it there).
    """
    held = _held.get(continuation.partition("/")[0])
    if held is not None and held.server is not None:
        await asyncio.shield(held.server)


async def arun_held(run: Run, ctx: ToolCallContext, seconds: float) -> ToolResult:
    """Start ``run`` held open between rounds; return its result if it asks nothing.

    ``seconds`` is the run's own limit (enforced by ``run``), told to later rounds.

    Raises:
        InputRequired: the run asked; it waits, named by ``continuation``, for the retry.
        ToolError: this process holds too many waiting runs, or cannot be reached by a retry.
        Whatever ``run`` raises when it ends before asking.
    """
    held = _HeldRun(ctx, seconds)
    task = held.start(run)
    try:
        kind, requests = await held.events.get()
    except asyncio.CancelledError:
        # The client went away before the first question: so does the run.
        await held.stop()
        raise
    finally:
        held.local_send = None
    if kind == _DONE:
        return task.result()
    await held.hold(requests)


async def aresume(ctx: ToolCallContext) -> ToolResult:
    """Answer the held run ``ctx.inputs.continuation`` names and return what it does next.

    Raises:
        InvalidParams: the run no longer waits for this round, or refused the answer.
        InputRequired: the run asked again (the next round).
        ToolError, McpError: the run ended so (as it would have inline).
    """
    request = ctx.request
    held_id, _, number = ctx.inputs.continuation.partition("/")
    if not held_id or not number.isdigit():
        raise InvalidParams("requestState is not a state this server issued")
    reply = notify.held_reply_group(secrets.token_urlsafe(12))
    loop = asyncio.get_running_loop()
    settled = False
    async with notify.GroupListener(reply) as inbox:
        try:
            await notify.apublish_held_answer(
                held_id=held_id,
                round_number=int(number),
                answers=dict(ctx.inputs.answers),
                reply=reply,
                endpoint=request.catalog.endpoint.slug,
                principal=request.principal,
            )
            message = await inbox.next(ACK_SECONDS)
            if message is None or message.get("type") == notify.HELD_REFUSED:
                settled = True
                raise InvalidParams(str(message.get("reason")) if message else GONE)
            deadline = loop.time() + float(message.get("seconds", 0)) + OUTCOME_MARGIN_SECONDS
            while True:
                message = await inbox.next(max(0.0, deadline - loop.time()))
                if message is None:
                    raise ToolError("The server holding this call stopped answering.")
                kind = message.get("type")
                if kind == notify.HELD_FRAME:
                    await _relay(request, message["frame"])
                elif kind == notify.HELD_QUESTIONS:
                    settled = True
                    raise InputRequired(
                        message["requests"],
                        continuation=f"{held_id}/{message['round']}",
                        ttl_seconds=state_ttl(),
                    )
                elif kind == notify.HELD_OUTCOME:
                    settled = True
                    return _result_of(message["outcome"])
        finally:
            if not settled:
                # This retry ends without the run's next step (its client went away, or
                # the owner is silent): the run stops rather than wait for nobody.
                with contextlib.suppress(Exception):
                    await asyncio.shield(notify.apublish_held_cancel(held_id=held_id, reply=reply))


async def _relay(request: RequestContext, frame: Mapping[str, Any]) -> None:
    """Pass a held run's notification on, as this retry's (its own progress token)."""
    if request.send is None:
        return
    frame = dict(frame)
    if frame.get("method") == "notifications/progress":
        if request.progress_token is None:
            return
        frame["params"] = {**(frame.get("params") or {}), "progressToken": request.progress_token}
    await request.send(frame)


def _outcome(task: asyncio.Task[ToolResult]) -> dict[str, Any]:
    """How a held run ended, for a retry in another process (``_result_of`` reads it)."""
    try:
        result = task.result()
    except ToolError as failure:
        return {"tool_error": failure.message, "outcome": failure.outcome}
    except McpError as error:
        return {"error": error.to_error_object()}
    except asyncio.CancelledError:
        return {"tool_error": "The call was cancelled.", "outcome": Outcome.CANCELLED}
    except Exception:
        logger.exception("Tool call failed")
        return {"error": InternalError("Tool failed").to_error_object()}
    return {"result": result_to_json(result), "outcome": result.outcome}


def _result_of(outcome: Mapping[str, Any]) -> ToolResult:
    """The result ``_outcome`` describes, or its failure raised as the run raised it."""
    ended = Outcome(outcome["outcome"]) if outcome.get("outcome") else None
    if "result" in outcome:
        result = result_from_json(outcome["result"])
        result.outcome = ended
        return result
    if "tool_error" in outcome:
        failure = ToolError(str(outcome["tool_error"]))
        failure.outcome = ended
        raise failure
    error = outcome.get("error") or {}
    relayed = McpError(str(error.get("message") or "Tool failed"), error.get("data"))
    relayed.code = int(error.get("code", InternalError.code))
    raise relayed


async def astop(continuation: str) -> None:
    """Cancel the held run ``continuation`` names, if this process holds it."""
    held = _held.get(continuation.partition("/")[0])
    if held is not None and held.server is not None:
        held.server.cancel()
        await asyncio.wait({held.server})


_QUESTIONS = "questions"
_DONE = "done"


class _HeldRun:
    """One run this process holds: the tool's task, its rounds, and who waits for it next.

    Lives on the owner's event loop; every change happens there, between awaits.
    """

    def __init__(self, ctx: ToolCallContext, seconds: float) -> None:
        request = ctx.request
        loop = asyncio.get_running_loop()
        self.id = secrets.token_urlsafe(18)
        self.endpoint = request.catalog.endpoint.slug
        self.principal = request.principal
        self.ends_at = loop.time() + seconds
        self.round = 0
        # What the run does (a question, its end), in order, for whoever waits next.
        self.events: asyncio.Queue[tuple[str, Mapping[str, Any]]] = asyncio.Queue()
        self.answers: asyncio.Future[Mapping[str, Any]] | None = None
        # Round 1's own stream while round 1 waits; then the reply group of the retry
        # waiting now (None while the client is answering).
        self.local_send = request.send
        self.reply: str | None = None
        self.parked_until: float | None = None
        self.ended = False
        self.task: asyncio.Task[ToolResult] | None = None
        self.server: asyncio.Task[None] | None = None
        self.run_ctx = ToolCallContext(
            replace(request, send=self.send), ctx.tool_name, ctx.inputs, ctx.record
        )
        self.run_ctx.held = self

    def start(self, run: Run) -> asyncio.Task[ToolResult]:
        task = self.task = asyncio.create_task(run(self.run_ctx), name="mcp-held-run")
        task.add_done_callback(lambda _: self.events.put_nowait((_DONE, {})))
        return task

    async def ask(self, requests: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any]:
        """protocol.ports.HeldQuestions: this round asks; the next round's answers return."""
        self.round += 1
        self.answers = asyncio.get_running_loop().create_future()
        self.events.put_nowait((_QUESTIONS, dict(requests)))
        return await self.answers

    async def send(self, frame: Mapping[str, Any]) -> None:
        """The run's notifications, to the round waiting now (none while the client answers)."""
        if self.local_send is not None:
            await self.local_send(frame)
        elif self.reply is not None:
            await self._publish(self.reply, notify.HELD_FRAME, frame=dict(frame))

    async def hold(self, requests: Mapping[str, Any]) -> NoReturn:
        """Keep the run waiting for the next round, reachable from any process, and end this
        round with its question."""
        if len(_held) >= get_conf().MCP_CONTINUATIONS_MAX:
            await self.stop()
            raise ToolError(
                "This server holds too many calls waiting for their client's answer: "
                "try again later."
            )
        listener = notify.GroupListener(notify.held_group(self.id))
        try:
            await listener.__aenter__()
        except Exception:
            logger.warning("Channel layer unavailable; a held call was stopped", exc_info=True)
            await self.stop()
            raise ToolError(
                "This call cannot wait for its client's answer now: try again later."
            ) from None
        _held[self.id] = self
        metrics.HELD_CALLS.inc()
        self._park()
        server = self.server = asyncio.create_task(self._serve(listener), name="mcp-held-serve")
        _servers.add(server)
        server.add_done_callback(_servers.discard)
        raise self._input_required(requests)

    def _input_required(self, requests: Mapping[str, Any]) -> InputRequired:
        return InputRequired(
            requests, continuation=f"{self.id}/{self.round}", ttl_seconds=state_ttl()
        )

    def _park(self) -> None:
        loop = asyncio.get_running_loop()
        self.parked_until = loop.time() + get_conf().MCP_CONTINUATION_SECONDS

    async def stop(self) -> None:
        """Cancel the run (an upstream request it has open is told) and wait for its end."""
        task = self.task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def _publish(self, reply: str, kind: str, **fields: Any) -> None:
        try:
            await notify.apublish_held_event(reply=reply, kind=kind, **fields)
        except Exception:
            # The retry then hears nothing and gives up; the run goes on.
            logger.warning("A held call's event was not published", exc_info=True)

    async def _serve(self, listener: notify.GroupListener) -> None:
        """Follow the run and the retries until the run has ended or stopped waiting."""
        loop = asyncio.get_running_loop()
        events: asyncio.Task[tuple[str, Mapping[str, Any]]] | None = None
        inbox: asyncio.Task[dict[str, Any] | None] | None = None
        try:
            while True:
                if events is None and not self.ended:
                    events = asyncio.create_task(self.events.get())
                if inbox is None:
                    wait = IDLE_SECONDS
                    if self.parked_until is not None:
                        wait = max(0.0, self.parked_until - loop.time())
                    inbox = asyncio.create_task(listener.next(wait))
                waiting = {task for task in (events, inbox) if task is not None}
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if events is not None and events in done:
                    kind, requests = events.result()
                    events = None
                    if not await self._on_event(kind, requests):
                        return
                    if inbox not in done:
                        # Its wait was chosen before: a run that now waits for an answer
                        # waits MCP_CONTINUATION_SECONDS from here (nothing is lost: an
                        # undelivered message stays in the listener).
                        inbox.cancel()
                        inbox = None
                if inbox is not None and inbox in done:
                    message = inbox.result()
                    inbox = None
                    if message is not None and not await self._on_message(message):
                        return
                    if self.parked_until is not None and loop.time() >= self.parked_until:
                        logger.info("A held call got no answer in time; it was cancelled")
                        return
        except Exception:
            logger.warning("A held call stopped: its channel-layer group failed", exc_info=True)
        finally:
            for task in (events, inbox):
                if task is not None:
                    task.cancel()
            if _held.pop(self.id, None) is not None:
                metrics.HELD_CALLS.dec()
            await self.stop()
            with contextlib.suppress(Exception):
                await listener.__aexit__(None, None, None)

    async def _on_event(self, kind: str, requests: Mapping[str, Any]) -> bool:
        """The run asked again or ended; return whether to go on holding it."""
        reply, self.reply = self.reply, None
        if kind == _DONE:
            self.ended = True
            if reply is None:
                return True  # it ended while the client was answering: the next round hears
            assert self.task is not None
            await self._publish(reply, notify.HELD_OUTCOME, outcome=_outcome(self.task))
            return False
        if reply is None:
            # Two questions at once: runs held here ask one at a time.
            logger.warning("A held call asked twice in one round; it was cancelled")
            return False
        self._park()
        await self._publish(reply, notify.HELD_QUESTIONS, requests=requests, round=self.round)
        return True

    async def _on_message(self, message: Mapping[str, Any]) -> bool:
        """A retry answered or went away; return whether to go on holding the run."""
        kind = message.get("type")
        if kind == notify.HELD_CANCEL:
            return self.reply is None or message.get("reply") != self.reply
        if kind != notify.HELD_ANSWER:
            return True
        reply = str(message.get("reply"))
        if self.parked_until is None or message.get("round") != self.round:
            await self._publish(reply, notify.HELD_REFUSED, reason=GONE)
            return True
        if (message.get("endpoint"), message.get("principal")) != (self.endpoint, self.principal):
            await self._publish(
                reply, notify.HELD_REFUSED, reason="requestState belongs to another request"
            )
            return True
        loop = asyncio.get_running_loop()
        self.parked_until = None
        self.reply = reply
        await self._publish(reply, notify.HELD_ACK, seconds=max(0.0, self.ends_at - loop.time()))
        if self.ended:
            assert self.task is not None
            await self._publish(reply, notify.HELD_OUTCOME, outcome=_outcome(self.task))
            return False
        answers = message.get("answers")
        if self.answers is not None and not self.answers.done():
            self.answers.set_result(answers if isinstance(answers, dict) else {})
        return True
