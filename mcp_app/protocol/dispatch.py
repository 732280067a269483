"""Method dispatch: a table from method name to (params parser, handler), per era.

``handle_request`` is what the transport calls for every request it does not serve itself
(``initialize`` opens a session, ``subscriptions/listen`` is a stream; see
``methods.TRANSPORT_METHODS``). It looks the method up in the table of ``ctx``'s era,
validates params, runs the handler and adds the modern result envelope. Which methods exist
in which era is decided in ``methods.py``; this table must name exactly those.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.errors import InvalidRequest, MethodNotFound
from mcp_app.protocol.handlers.completion import handle_completion_complete
from mcp_app.protocol.handlers.lifecycle import handle_ping, handle_server_discover
from mcp_app.protocol.handlers.logs import handle_logging_set_level
from mcp_app.protocol.handlers.prompts import handle_prompts_get, handle_prompts_list
from mcp_app.protocol.handlers.resources import (
    handle_resources_list,
    handle_resources_read,
    handle_resources_subscribe,
    handle_resources_templates_list,
    handle_resources_unsubscribe,
)
from mcp_app.protocol.handlers.tasks import (
    handle_tasks_cancel,
    handle_tasks_get,
    handle_tasks_list,
    handle_tasks_result,
    handle_tasks_update,
)
from mcp_app.protocol.handlers.tools import handle_tools_call, handle_tools_list
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
from mcp_app.protocol.methods import TRANSPORT_METHODS, known_methods
from mcp_app.protocol.shaping import finish_result
from mcp_app.protocol.storable import require_storable
from mcp_app.protocol.versions import Era, Feature

__all__ = ["handle_notification", "handle_request", "known_methods"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Entry:
    parse: Callable[[Mapping[str, Any] | None], Any]
    handler: Callable[[RequestContext, Any], Awaitable[dict[str, Any]]]
    # ttlMs/cacheScope are required on these results in 2026-07-28 (CacheableResult).
    cacheable: bool = False
    # Within its era, the method exists only for revisions with this feature.
    feature: Feature | None = None


_COMMON: Final[dict[str, _Entry]] = {
    "tools/list": _Entry(ListParams.parse, handle_tools_list, cacheable=True),
    "tools/call": _Entry(CallToolParams.parse, handle_tools_call),
    "resources/list": _Entry(ListParams.parse, handle_resources_list, cacheable=True),
    "resources/templates/list": _Entry(
        ListParams.parse, handle_resources_templates_list, cacheable=True
    ),
    "resources/read": _Entry(UriParams.parse, handle_resources_read, cacheable=True),
    "prompts/list": _Entry(ListParams.parse, handle_prompts_list, cacheable=True),
    "prompts/get": _Entry(GetPromptParams.parse, handle_prompts_get),
    "completion/complete": _Entry(CompleteParams.parse, handle_completion_complete),
}
_TABLES: Final[dict[Era, dict[str, _Entry]]] = {
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


async def handle_request(
    ctx: RequestContext, method: str, params: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Serve one request and return its complete ``result`` object for ``ctx.version``.

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
    result = await entry.handler(ctx, parsed)
    return finish_result(result, ctx.version, ctx.server_info, cacheable=entry.cacheable)


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
