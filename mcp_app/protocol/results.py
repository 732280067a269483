"""What a tool run produces, and how a tool reports a failure the model should see.

A tool failure is a *result* (``isError: true``), not a JSON-RPC error: executors raise
``ToolError`` with a user-safe message and the handler turns it into ``ToolResult.error``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

NO_STRUCTURED = object()
"""Sentinel: the tool produced no ``structuredContent`` (``None`` is a valid JSON null)."""


class ToolError(Exception):
    """A tool failed in a way the caller should read: becomes ``isError: true``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ToolTimeout(ToolError):
    """The tool ran past its time limit: still an error result, recorded as timed out."""


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

    @classmethod
    def text(cls, text: str) -> ToolResult:
        return cls(content=[{"type": "text", "text": text}])

    @classmethod
    def error(cls, message: str) -> ToolResult:
        return cls(content=[{"type": "text", "text": message}], is_error=True)

    @property
    def has_structured(self) -> bool:
        return self.structured is not NO_STRUCTURED


class InputRequired(Exception):
    """A 2026-07-28 tool needs answers from the client before it can finish.

    Raised by ``ToolCallContext`` when a question has no answer yet in the request's
    ``inputResponses``; the tools/call handler turns it into an ``input_required`` result
    with a sealed ``requestState`` (2026-07-28 basic/patterns/mrtr). ``requests`` maps each
    question's key to ``{"method": ..., "params": ...}``.
    """

    def __init__(self, requests: Mapping[str, Mapping[str, Any]]) -> None:
        super().__init__("input required")
        self.requests = dict(requests)


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
