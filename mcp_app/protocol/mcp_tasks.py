"""MCP tasks: one task model, two wire shapes (2025-11-25 core, 2026-07-28 extension).

A task is a tool call whose result the client fetches later. Its state lives behind the
``TaskStore`` port (``ports.py``) as a ``TaskInfo``; this module turns that into the shape of
the request's era (protocol.md §3.12, §6.6):

- 2025-11-25 core (``basic/utilities/tasks``): ``Task`` with ``ttl``/``pollInterval``; a tool
  result with ``isError: true`` makes the task ``failed``; ``tools/call`` answers
  ``{task: Task}``.
- 2026-07-28 extension ``io.modelcontextprotocol/tasks`` (ext-tasks ``specification/draft/
  tasks.md``): ``Task`` with ``ttlMs``/``pollIntervalMs``; ``isError: true`` stays
  ``completed`` and ``failed`` is kept for JSON-RPC errors; ``tools/call`` answers the flat
  ``Result & Task`` with ``resultType: "task"``; ``tasks/get`` inlines ``inputRequests``,
  ``result`` or ``error`` (DetailedTask).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from mcp_app.protocol.results import NO_STRUCTURED, ToolResult
from mcp_app.protocol.shaping import shape_call_result

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
RELATED_TASK_KEY: Final = "io.modelcontextprotocol/related-task"
# What a request without the extension is missing (ext-tasks "Capability Negotiation").
REQUIRED_EXTENSION: Final[Mapping[str, Any]] = {"extensions": {TASKS_EXTENSION: {}}}

WORKING: Final = "working"
INPUT_REQUIRED: Final = "input_required"
COMPLETED: Final = "completed"
FAILED: Final = "failed"
CANCELLED: Final = "cancelled"
TERMINAL: Final = frozenset({COMPLETED, FAILED, CANCELLED})


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """One task as its store sees it, before any era's shaping.

    ``status`` is one of the five MCP statuses (a call still queued is ``working``).
    ``result`` is the finished ``CallToolResult`` as a plain dict (``content``,
    ``structuredContent``?, ``isError``), ``error`` the JSON-RPC error object of a call that
    failed with a protocol error, ``input_requests`` the questions still unanswered.
    """

    task_id: str
    status: str
    created_at: datetime
    last_updated_at: datetime
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    status_message: str = ""
    result: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None
    input_requests: Mapping[str, Any] | None = None

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def is_tool_error(self) -> bool:
        return self.result is not None and self.result.get("isError") is True


@dataclass(frozen=True, slots=True)
class TaskOwner:
    """Who may see a task: the authenticated principal ("" when anonymous) and, for legacy
    requests, the session. Every task request is checked against it (2025-11-25 "Security
    Considerations": bind tasks to the authorization context; ext-tasks: authz on every task
    request)."""

    principal: str
    session_id: str = ""


def timestamp(moment: datetime) -> str:
    """ISO 8601 in UTC with a ``Z``, as the spec's examples write it."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def has_extension(client_capabilities: Mapping[str, Any]) -> bool:
    """Whether a 2026-07-28 request declared the tasks extension in its own capabilities."""
    extensions = client_capabilities.get("extensions")
    # Most clients declare no extensions: None is told apart without asking the ABC.
    if extensions is None:
        return False
    return isinstance(extensions, Mapping) and isinstance(extensions.get(TASKS_EXTENSION), Mapping)


def legacy_status(info: TaskInfo) -> str:
    """The 2025-11-25 status: a tool result with ``isError`` counts as ``failed`` there."""
    if info.status == COMPLETED and info.is_tool_error:
        return FAILED
    return info.status


def legacy_task(info: TaskInfo) -> dict[str, Any]:
    """The 2025-11-25 ``Task`` object (schema ``Task``)."""
    task: dict[str, Any] = {"taskId": info.task_id, "status": legacy_status(info)}
    if info.status_message:
        task["statusMessage"] = info.status_message
    task["createdAt"] = timestamp(info.created_at)
    task["lastUpdatedAt"] = timestamp(info.last_updated_at)
    task["ttl"] = info.ttl_ms
    if info.poll_interval_ms is not None:
        task["pollInterval"] = info.poll_interval_ms
    return task


def modern_task(info: TaskInfo) -> dict[str, Any]:
    """The extension's ``Task`` object: the fields of ``CreateTaskResult`` besides the envelope."""
    task: dict[str, Any] = {"taskId": info.task_id, "status": info.status}
    if info.status_message:
        task["statusMessage"] = info.status_message
    task["createdAt"] = timestamp(info.created_at)
    task["lastUpdatedAt"] = timestamp(info.last_updated_at)
    task["ttlMs"] = info.ttl_ms
    if info.poll_interval_ms is not None:
        task["pollIntervalMs"] = info.poll_interval_ms
    return task


def detailed_task(info: TaskInfo, version: str) -> dict[str, Any]:
    """The extension's ``DetailedTask``: the task plus what its status carries.

    ``inputRequests`` when waiting for input, ``result`` when completed (tool errors
    included), ``error`` when failed; never ``requestState`` and never the v1 related-task
    ``_meta`` on the inlined result (the task id is at the root).
    """
    task = modern_task(info)
    if info.status == INPUT_REQUIRED:
        task["inputRequests"] = dict(info.input_requests or {})
    elif info.status == COMPLETED and info.result is not None:
        task["result"] = call_result(info.result, version)
    elif info.status == FAILED:
        task["error"] = dict(info.error or _LOST)
    return task


# A failed task without a stored error object (the worker died): still a JSON-RPC error shape.
_LOST: Final[Mapping[str, Any]] = {"code": -32603, "message": "The task failed"}


def call_result(stored: Mapping[str, Any], version: str) -> dict[str, Any]:
    """Shape a stored ``CallToolResult`` dict for ``version`` like an inline call's result."""
    result = ToolResult(
        content=list(stored.get("content") or ()),
        structured=stored.get("structuredContent", NO_STRUCTURED),
        is_error=stored.get("isError") is True,
    )
    return shape_call_result(result, version)


def task_error(info: TaskInfo) -> Mapping[str, Any]:
    """The JSON-RPC error object a failed task ended with."""
    return info.error or _LOST
