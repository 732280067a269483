"""``subscriptions/listen`` (2026-07-28 basic/patterns/subscriptions): the honoured filter.

The transport serves the stream itself (it is long-lived and fans in channel-layer events);
this module decides what the stream may carry. The acknowledgement MUST list exactly the
subset of the requested notifications the server will send, and nothing unrequested may be
sent afterwards.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from mcp_app.protocol.errors import InvalidParams

SUBSCRIPTION_ID_KEY: Final = "io.modelcontextprotocol/subscriptionId"
# Every list this server publishes can change, and every resource can be subscribed to
# (server capabilities: listChanged and subscribe are true).
_LIST_CHANGED_FLAGS: Final = ("toolsListChanged", "promptsListChanged", "resourcesListChanged")


def listen_filter(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return the ``notifications`` filter to acknowledge for a listen request.

    Only kinds the client asked for (a ``true`` flag, a non-empty URI list) are kept; kinds
    this server does not know are dropped.

    Raises:
        InvalidParams: ``params.notifications`` is missing or malformed.
    """
    requested = params.get("notifications") if params is not None else None
    if not isinstance(requested, Mapping):
        raise InvalidParams("params.notifications must be an object")
    honoured: dict[str, Any] = {}
    for flag in _LIST_CHANGED_FLAGS:
        value = requested.get(flag)
        if value is not None and not isinstance(value, bool):
            raise InvalidParams(f"params.notifications.{flag} must be a boolean")
        if value:
            honoured[flag] = True
    uris = requested.get("resourceSubscriptions")
    if uris is not None:
        if not isinstance(uris, list) or not all(isinstance(uri, str) for uri in uris):
            raise InvalidParams("params.notifications.resourceSubscriptions must list URIs")
        if uris:
            honoured["resourceSubscriptions"] = list(dict.fromkeys(uris))
    return honoured


def acknowledgement(subscription_id: str | int, honoured: Mapping[str, Any]) -> dict[str, Any]:
    """Return the first frame of a listen stream: ``notifications/subscriptions/acknowledged``."""
    return {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {
            "notifications": dict(honoured),
            "_meta": {SUBSCRIPTION_ID_KEY: subscription_id},
        },
    }


# Each catalog list, its notification method, and the listen filter flag that opts into it.
_LIST_CHANGED: Final[Mapping[str, tuple[str, str]]] = {
    "tools": ("notifications/tools/list_changed", "toolsListChanged"),
    "resources": ("notifications/resources/list_changed", "resourcesListChanged"),
    "prompts": ("notifications/prompts/list_changed", "promptsListChanged"),
}


def _notification(
    method: str, params: dict[str, Any], subscription_id: str | int | None
) -> dict[str, Any]:
    if subscription_id is not None:
        params["_meta"] = {SUBSCRIPTION_ID_KEY: subscription_id}
    return {"jsonrpc": "2.0", "method": method, "params": params}


def list_changed_notifications(
    kinds: Iterable[str],
    *,
    honoured: Mapping[str, Any] | None = None,
    subscription_id: str | int | None = None,
) -> list[dict[str, Any]]:
    """Return the ``list_changed`` notifications a stream sends for changed ``kinds``.

    A legacy session's GET stream (``honoured`` None) gets every kind: the server declared
    ``listChanged`` for all three. A listen stream gets only the kinds it opted into, each
    frame tagged with its subscription id (2026-07-28 basic/patterns/subscriptions).
    """
    frames = []
    for kind in kinds:
        if kind not in _LIST_CHANGED:
            continue
        method, flag = _LIST_CHANGED[kind]
        if honoured is None or honoured.get(flag):
            frames.append(_notification(method, {}, subscription_id))
    return frames


def resource_updated_notifications(
    uri: str, subscribed: Iterable[str], *, subscription_id: str | int | None = None
) -> list[dict[str, Any]]:
    """Return ``notifications/resources/updated`` for ``uri`` if the stream subscribed to it."""
    if uri not in set(subscribed):
        return []
    return [_notification("notifications/resources/updated", {"uri": uri}, subscription_id)]
