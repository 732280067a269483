"""Fan-out of catalog changes to connected clients, over the channel layer.

Every open legacy GET stream and every 2026 ``subscriptions/listen`` stream of an endpoint
joins that endpoint's group, in whichever web process holds it; a catalog edit (admin, shell,
fixtures, services) publishes one message per affected endpoint after the transaction
commits, so a client that refetches on the notification sees the new catalog. The group names
and message shapes live here and nowhere else.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Final, Literal

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)

CatalogKind = Literal["tools", "resources", "prompts"]
CATALOG_KINDS: Final[tuple[CatalogKind, ...]] = ("tools", "resources", "prompts")
LIST_CHANGED: Final = "mcp.list_changed"
RESOURCE_UPDATED: Final = "mcp.resource_updated"


def endpoint_group(endpoint_id: int) -> str:
    """The channel-layer group of every live stream of one endpoint."""
    return f"mcp.endpoint.{endpoint_id}"


def _send(endpoint_ids: Iterable[int], message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    for endpoint_id in sorted(set(endpoint_ids)):
        try:
            async_to_sync(layer.group_send)(endpoint_group(endpoint_id), message)
        except Exception:
            # The edit is committed whatever happens here; clients then learn of it on their
            # next request. Never fail an operator's save because Redis is unreachable.
            logger.exception("Could not publish a catalog change", extra={"type": message["type"]})


def publish_list_changed(*, endpoint_ids: Iterable[int], kinds: Iterable[CatalogKind]) -> None:
    """Tell the endpoints' streams that these lists changed."""
    kinds = sorted(set(kinds))
    if kinds:
        _send(endpoint_ids, {"type": LIST_CHANGED, "kinds": kinds})


def publish_resource_updated(*, endpoint_ids: Iterable[int], uri: str) -> None:
    """Tell the endpoints' streams that the resource at ``uri`` changed (for its subscribers)."""
    _send(endpoint_ids, {"type": RESOURCE_UPDATED, "uri": uri})
