"""Which JSON-RPC methods exist in each era: the single list both the ladder and dispatch read.

Legacy (2024-11-05 .. 2025-11-25) keeps the handshake, ``ping``, ``logging/setLevel`` and the
subscribe pair; 2026-07-28 removes them and adds ``server/discover`` and
``subscriptions/listen`` (SDK ``mcp_types/methods.py``). The 2025-11-25 experimental
``tasks/*`` surface is not served, so those methods answer ``-32601``.
"""

from __future__ import annotations

from typing import Final

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
}
MODERN_METHODS: Final = COMMON_METHODS | {"server/discover", "subscriptions/listen"}

# Requests the transport serves itself rather than through dispatch.handle_request:
# `initialize` opens a session, `subscriptions/listen` is a long-lived stream.
TRANSPORT_METHODS: Final = frozenset({"initialize", "subscriptions/listen"})

# Methods whose `Mcp-Name` header mirrors a body parameter (2026-07-28 transports,
# "Standard Request Headers").
NAME_BEARING_PARAMS: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def known_methods(era: Era) -> frozenset[str]:
    """Return the request methods that exist in ``era`` (unknown ones answer ``-32601``)."""
    return MODERN_METHODS if era is Era.MODERN else LEGACY_METHODS
