"""What a tool run produces, and how a tool reports a failure the model should see.

A tool failure is a *result* (``isError: true``), not a JSON-RPC error: executors raise
``ToolError`` with a user-safe message and the handler turns it into ``ToolResult.error``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

NO_STRUCTURED = object()
"""Sentinel: the tool produced no ``structuredContent`` (``None`` is a valid JSON null)."""


class Outcome(StrEnum):
    """How a request or a tool call ended: one vocabulary for the call log and background calls.

    A call-log row uses the first seven, ``UPSTREAM_ERROR`` and ``RATE_LIMITED``; a background
    call ends with any but ``REJECTED``, ``RUNNING`` and ``RATE_LIMITED``. The values are
    stored in rows: never change one.
    """

    OK = "ok"
    TOOL_ERROR = "tool_error"
    PROTOCOL_ERROR = "protocol_error"
    REJECTED = "rejected"
    RUNNING = "running"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    # Background calls only: the worker vanished, no worker ever took it, or a plain
    # 2026-07-28 call's tool asked the client (the web process answers input_required).
    LOST = "lost"
    NOT_STARTED = "not_started"
    INPUT_REQUIRED = "input_required"
    # A request relayed to an upstream MCP server that could not be reached or did not answer
    # as MCP (refused connection, timeout with no sign of life, HTTP 5xx, breaker open): the
    # upstream failed, not its tool, which would be ``TOOL_ERROR``.
    UPSTREAM_ERROR = "upstream_error"
    # Refused by an endpoint's rate limit, concurrency cap or quota before it ran (the call
    # log names the limit).
    RATE_LIMITED = "rate_limited"


class ToolError(Exception):
    """A tool failed in a way the caller should read: becomes ``isError: true``.

    ``outcome`` is how the call log records it when "tool error" would not say it all.
    """

    outcome: Outcome | None = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ToolTimeout(ToolError):
    """The tool ran past its time limit: still an error result, recorded as timed out."""

    outcome = Outcome.TIMED_OUT


@dataclass(slots=True)
class ToolResult:
    """A ``CallToolResult`` before per-revision shaping.

    ``content`` holds wire-form content blocks (``{"type": "text", "text": ...}``,
    ``{"type": "image", "data": ..., "mimeType": ...}``, ``audio``, ``resource``,
    ``resource_link``). ``structured`` is any JSON value or ``NO_STRUCTURED``.
    """

    content: Sequence[Mapping[str, Any]] = field(default_factory=list)
    structured: Any = NO_STRUCTURED
    is_error: bool = False
    meta: Mapping[str, Any] | None = None
    # For the call log, not the wire: set when "ok" or "tool error" would not say it all
    # (a timeout), and where a call ran when not inline ({"task_id": ..., "worker": ...}).
    outcome: Outcome | None = None
    detail: Mapping[str, Any] | None = None

    @classmethod
    def text(cls, text: str) -> ToolResult:
        return cls(content=[{"type": "text", "text": text}])

    @classmethod
    def error(cls, message: str) -> ToolResult:
        return cls(content=[{"type": "text", "text": message}], is_error=True)

    @property
    def has_structured(self) -> bool:
        return self.structured is not NO_STRUCTURED

    @property
    def ended(self) -> Outcome:
        """How the call ended, for the call log."""
        if self.outcome is not None:
            return self.outcome
        return Outcome.TOOL_ERROR if self.is_error else Outcome.OK


@dataclass(frozen=True, slots=True)
class Answer:
    """A handler's ``result`` with what only the call log reads: how it ended, where it ran.

    Handlers return a plain result dict unless they know more than the result shows (a tool
    call that timed out, a call that became a task); dispatch reads both forms.
    """

    result: dict[str, Any]
    outcome: Outcome = Outcome.OK
    detail: Mapping[str, Any] | None = None


class InputRequired(Exception):
    """A 2026-07-28 tool needs answers from the client before it can finish.

    Raised by ``ToolCallContext`` when a question has no answer yet in the request's
    ``inputResponses``; the tools/call handler turns it into an ``input_required`` result
    with a sealed ``requestState`` (2026-07-28 basic/patterns/mrtr). ``requests`` maps each
    question's key to ``{"method": ..., "params": ...}``. ``continuation`` names the run the
    server holds open until the answers come (services/continuations.py), which the state
    then carries, valid ``ttl_seconds``; "" when the tool runs again on the retry.
    """

    def __init__(
        self,
        requests: Mapping[str, Mapping[str, Any]],
        *,
        continuation: str = "",
        ttl_seconds: int | None = None,
    ) -> None:
        super().__init__("input required")
        self.requests = dict(requests)
        self.continuation = continuation
        self.ttl_seconds = ttl_seconds


class CallCancelled(Exception):
    """The client cancelled the call (from any process): no response may be sent for it.

    Raised by a runner that learns of the cancellation from elsewhere (a background call's
    row); the transport ends the request's stream without an answer (2025-11-25
    basic/utilities/cancellation: "SHOULD NOT send a response for the cancelled request").
    """


class ServiceUnavailable(Exception):
    """A service the call needs (the database, Redis) is unreachable; nothing ran.

    Raised by a runner in place of a driver's own error, which this layer cannot name: the
    handlers let it through, and the transport answers as for every other outage (503 with
    Retry-After and the request's id), not "Tool failed", which reads like a broken tool.
    """


class ContinueAsTask(Exception):
    """A tool running inline asked to finish as an MCP task (``continue_as_task``).

    The tools/call handler answers with a task handle instead of a result; the task runs the
    tool again on a worker, with the answers gathered so far.
    """
