"""Method dispatch: a table from method name to (params parser, handler), per era.

``handle_request`` is what the transport calls for every request it does not serve itself
(``initialize`` opens a session, ``subscriptions/listen`` is a stream; see
``methods.TRANSPORT_METHODS``). It looks the method up in the table of ``ctx``'s era,
validates params, runs the handler and adds the modern result envelope. Which methods exist
in which era is decided in ``methods.py``; this table must name exactly those.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.errors import InternalError, InvalidRequest, McpError, MethodNotFound
from mcp_app.protocol.handlers.completion import handle_completion_complete
from mcp_app.protocol.handlers.lifecycle import handle_ping, handle_server_discover
from mcp_app.protocol.handlers.logs import handle_logging_set_level
from mcp_app.protocol.handlers.mcp_tasks import (
    handle_tasks_cancel,
    handle_tasks_get,
    handle_tasks_list,
    handle_tasks_result,
    handle_tasks_update,
)
from mcp_app.protocol.handlers.prompts import handle_prompts_get, handle_prompts_list
from mcp_app.protocol.handlers.resources import (
    handle_resources_list,
    handle_resources_read,
    handle_resources_subscribe,
    handle_resources_templates_list,
    handle_resources_unsubscribe,
)
from mcp_app.protocol.handlers.tools import handle_tools_call, handle_tools_list
from mcp_app.protocol.inbound import Resolved
from mcp_app.protocol.jsonrpc import Request
from mcp_app.protocol.messages import (
    CallToolParams,
    CompleteParams,
    EmptyParams,
    GetPromptParams,
    ListParams,
    SetLevelParams,
    TaskIdParams,
    TaskUpdateParams,
    UriParams,
)
from mcp_app.protocol.methods import TRANSPORT_METHODS, known_methods, target_of
from mcp_app.protocol.policies import PolicyRecord
from mcp_app.protocol.results import Answer, CallCancelled, Outcome, ServiceUnavailable
from mcp_app.protocol.shaping import finish_result
from mcp_app.protocol.storable import require_storable
from mcp_app.protocol.versions import Era, Feature

__all__ = [
    "Reply",
    "error_body",
    "handle_notification",
    "handle_request",
    "known_methods",
    "refusal",
    "reply",
]

logger = logging.getLogger(__name__)


_Result = Awaitable[Answer | dict[str, Any]]


@dataclass(frozen=True, slots=True)
class _Entry:
    parse: Callable[[Mapping[str, Any] | None], Any]
    handler: Callable[[RequestContext, Any], _Result]
    # ttlMs/cacheScope are required on these results in 2026-07-28 (CacheableResult).
    cacheable: bool = False
    # Within its era, the method exists only for revisions with this feature.
    feature: Feature | None = None


@dataclass(frozen=True, slots=True)
class _PolicedEntry:
    """A method the endpoint's policies see: its handler also takes the request's record."""

    parse: Callable[[Mapping[str, Any] | None], Any]
    handler: Callable[[RequestContext, Any, PolicyRecord], _Result]
    cacheable: bool = False
    feature: Feature | None = None


_COMMON: Final[Mapping[str, _Entry | _PolicedEntry]] = {
    "tools/list": _Entry(ListParams.parse, handle_tools_list, cacheable=True),
    "tools/call": _PolicedEntry(CallToolParams.parse, handle_tools_call),
    "resources/list": _Entry(ListParams.parse, handle_resources_list, cacheable=True),
    "resources/templates/list": _Entry(
        ListParams.parse, handle_resources_templates_list, cacheable=True
    ),
    "resources/read": _PolicedEntry(UriParams.parse, handle_resources_read, cacheable=True),
    "prompts/list": _Entry(ListParams.parse, handle_prompts_list, cacheable=True),
    "prompts/get": _PolicedEntry(GetPromptParams.parse, handle_prompts_get),
    "completion/complete": _Entry(CompleteParams.parse, handle_completion_complete),
}
_TABLES: Final[Mapping[Era, Mapping[str, _Entry | _PolicedEntry]]] = {
    Era.LEGACY: {
        **_COMMON,
        "ping": _Entry(EmptyParams.parse, handle_ping),
        "logging/setLevel": _Entry(SetLevelParams.parse, handle_logging_set_level),
        "resources/subscribe": _Entry(UriParams.parse, handle_resources_subscribe),
        "resources/unsubscribe": _Entry(UriParams.parse, handle_resources_unsubscribe),
        # 2025-11-25 sessions only (experimental core tasks).
        "tasks/get": _Entry(TaskIdParams.parse, handle_tasks_get, feature=Feature.TASKS_CORE),
        "tasks/result": _Entry(TaskIdParams.parse, handle_tasks_result, feature=Feature.TASKS_CORE),
        "tasks/list": _Entry(ListParams.parse, handle_tasks_list, feature=Feature.TASKS_CORE),
        "tasks/cancel": _Entry(TaskIdParams.parse, handle_tasks_cancel, feature=Feature.TASKS_CORE),
    },
    Era.MODERN: {
        **_COMMON,
        "server/discover": _Entry(EmptyParams.parse, handle_server_discover, cacheable=True),
        # The io.modelcontextprotocol/tasks extension.
        "tasks/get": _Entry(TaskIdParams.parse, handle_tasks_get),
        "tasks/update": _Entry(TaskUpdateParams.parse, handle_tasks_update),
        "tasks/cancel": _Entry(TaskIdParams.parse, handle_tasks_cancel),
    },
}


@dataclass(frozen=True, slots=True)
class Reply:
    """Everything about one request's answer: the JSON-RPC body the client gets, and what
    the call log records of it. Built once, here; nothing downstream re-reads the body.
    """

    body: dict[str, Any]
    error: McpError | None
    outcome: Outcome
    # Where the call ran when not inline ({"task_id": ..., "worker": ...}).
    detail: Mapping[str, Any] | None
    # The tool name, prompt name or resource URI the request named, if any.
    target: str | None
    # What the endpoint's policies decided (protocol/policies.py), and the arguments the call
    # log keeps in place of those received when a policy masked them (None: as received).
    decisions: Sequence[Mapping[str, Any]] = ()
    logged_arguments: Any = None

    @property
    def result(self) -> Any:
        return self.body.get("result")


def error_body(request_id: Any, error: McpError) -> dict[str, Any]:
    """A JSON-RPC error response (``id`` null when the request's id is unknown)."""
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_error_object()}


def refusal(request: Request, error: McpError, resolved: Resolved | None = None) -> Reply:
    """The reply of a request that ended in ``error`` (or was refused before it ran).

    ``resolved`` is ``request`` as inbound classification resolved it (None: its target is
    found here).
    """
    target = resolved.target if resolved is not None else target_of(request.method, request.params)
    body = error_body(request.id, error)
    return Reply(body, error, error.outcome, error.detail, target)


async def reply(ctx: RequestContext, request: Request, resolved: Resolved | None = None) -> Reply:
    """Serve ``request`` and build its reply: a result, or the JSON-RPC error it earned.

    ``resolved`` is ``request`` as inbound classification resolved it (the transport's);
    without it its target is found here.

    Raises:
        CallCancelled: the client cancelled the call elsewhere: nothing may be answered.
        ServiceUnavailable: a service the call needs is down: the transport answers 503.
    """
    target = resolved.target if resolved is not None else target_of(request.method, request.params)
    # What the endpoint's policies do about this request, handed down explicitly.
    record = PolicyRecord()
    try:
        answer = await _answer(ctx, request.method, request.params, record)
    except McpError as exc:
        error: McpError = exc
    except (CallCancelled, ServiceUnavailable):
        raise
    except Exception:
        logger.exception("MCP handler failed", extra={"method": request.method})
        error = InternalError("Internal error")
    else:
        body = {"jsonrpc": "2.0", "id": request.id, "result": answer.result}
        return Reply(
            body,
            None,
            answer.outcome,
            answer.detail,
            target,
            record.decisions,
            record.logged_arguments,
        )
    body = error_body(request.id, error)
    return Reply(
        body, error, error.outcome, error.detail, target, record.decisions, record.logged_arguments
    )


async def handle_request(
    ctx: RequestContext, method: str, params: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Serve one request and return its complete ``result`` object for ``ctx.version``.

    Raises: as ``_answer``.
    """
    return (await _answer(ctx, method, params, PolicyRecord())).result


async def _answer(
    ctx: RequestContext, method: str, params: Mapping[str, Any] | None, record: PolicyRecord
) -> Answer:
    """Serve one request: its complete ``result`` for ``ctx.version``, and how it ended.

    What the endpoint's policies do about it is added to ``record``.

    Raises:
        MethodNotFound: the method does not exist in this era.
        InvalidRequest: the method is one the transport serves itself.
        InvalidParams: ``_meta.progressToken`` holds NUL or an unpaired surrogate.
        McpError: whatever the handler raises (invalid params, not found, internal).
    """
    entry = _TABLES[ctx.era].get(method)
    if entry is not None and entry.feature is not None and not ctx.supports(entry.feature):
        entry = None
    if entry is None:
        if method in TRANSPORT_METHODS and method in known_methods(ctx.era):
            raise InvalidRequest(f"{method} is not valid here")
        raise MethodNotFound(f"Method not found: {method}")
    if ctx.progress_token is not None:
        # A background call keeps its progress token on its row.
        require_storable(ctx.progress_token, "params._meta.progressToken")
    parsed = entry.parse(params)
    if isinstance(entry, _PolicedEntry):
        answer = await entry.handler(ctx, parsed, record)
    else:
        answer = await entry.handler(ctx, parsed)
    if not isinstance(answer, Answer):
        answer = Answer(answer)
    finish_result(answer.result, ctx.version, ctx.server_info, cacheable=entry.cacheable)
    return answer


# Client notifications every legacy revision defines. They need no work here: the transport
# acts on `notifications/cancelled` (it owns the in-flight calls), `initialized` only ends
# the handshake, and roots are not requested by this server.
_ACCEPTED_NOTIFICATIONS: Final = frozenset(
    {"notifications/initialized", "notifications/cancelled", "notifications/roots/list_changed"}
)


async def handle_notification(
    ctx: RequestContext, method: str, params: Mapping[str, Any] | None
) -> None:
    """Accept a client notification; unknown ones are ignored (JSON-RPC: no reply ever)."""
    if method not in _ACCEPTED_NOTIFICATIONS:
        logger.debug("Ignoring an unknown notification")
