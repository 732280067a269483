"""Which JSON-RPC methods exist in each era: the single list both the ladder and dispatch read.

Legacy (2024-11-05 .. 2025-11-25) keeps the handshake, ``ping``, ``logging/setLevel`` and the
subscribe pair; 2026-07-28 removes them and adds ``server/discover`` and
``subscriptions/listen`` (SDK ``mcp_types/methods.py``).

Tasks differ per era (protocol.md §3.12): 2025-11-25 sessions have the core
``tasks/get|result|list|cancel`` (the dispatch table marks them 2025-11-25 only, so earlier
legacy revisions answer ``-32601``); 2026-07-28 has the extension's ``tasks/get|update|cancel``
only, so ``tasks/result`` and ``tasks/list`` answer ``-32601`` there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from mcp_app.protocol.versions import Era

COMMON_METHODS: Final = frozenset(
    {
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
        "completion/complete",
    }
)
LEGACY_METHODS: Final = COMMON_METHODS | {
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
    "tasks/get",
    "tasks/result",
    "tasks/list",
    "tasks/cancel",
}
MODERN_METHODS: Final = COMMON_METHODS | {
    "server/discover",
    "subscriptions/listen",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
}
# 2026-07-28 methods of the tasks extension: a request must declare the extension to use them.
TASK_EXTENSION_METHODS: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})

# Requests the transport serves itself rather than through dispatch.handle_request:
# `initialize` opens a session, `subscriptions/listen` is a long-lived stream.
TRANSPORT_METHODS: Final = frozenset({"initialize", "subscriptions/listen"})

# Methods whose `Mcp-Name` header mirrors a body parameter (2026-07-28 transports,
# "Standard Request Headers"; the tasks extension adds its methods' `taskId`, ext-tasks
# "Streamable HTTP: Routing Headers").
NAME_BEARING_PARAMS: Final[Mapping[str, str]] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}


# The catalog item a request acts on, by the parameter that names it: what access rules
# check, the call log records, and the handlers look up.
TARGET_PARAMS: Final[Mapping[str, str]] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "resources/subscribe": "uri",
    "resources/unsubscribe": "uri",
}


def target_of(method: str, params: Any) -> str | None:
    """The name or URI of the tool, prompt or resource a request acts on, if it names one."""
    key = TARGET_PARAMS.get(method)
    # type() first: decoded JSON is a dict, and isinstance against the Mapping ABC costs more
    # than the rest of this function (it runs several times per request).
    if key is None or (type(params) is not dict and not isinstance(params, Mapping)):
        return None
    value = params.get(key)
    return value if isinstance(value, str) else None


def known_methods(era: Era) -> frozenset[str]:
    """Return the request methods that exist in ``era`` (unknown ones answer ``-32601``)."""
    return MODERN_METHODS if era is Era.MODERN else LEGACY_METHODS
