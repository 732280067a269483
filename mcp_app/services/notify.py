"""Fan-out of catalog changes to connected clients, over the channel layer.

Every open legacy GET stream and every 2026 ``subscriptions/listen`` stream of an endpoint
joins that endpoint's group, in whichever web process holds it; a catalog edit (admin, shell,
fixtures, services) publishes one message per affected endpoint after the transaction
commits, so a client that refetches on the notification sees the new catalog. The group names
and message shapes live here and nowhere else, as do those of the client's answers to a
legacy call's questions (elicitation, sampling, roots), which may be POSTed to any process.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from typing import Any, Final, Literal

import orjson
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)

CatalogKind = Literal["tools", "resources", "prompts"]
CATALOG_KINDS: Final[tuple[CatalogKind, ...]] = ("tools", "resources", "prompts")
LIST_CHANGED: Final = "mcp.list_changed"
RESOURCE_UPDATED: Final = "mcp.resource_updated"
CLIENT_REPLY: Final = "mcp.client_reply"
STREAM_EVENT: Final = "mcp.stream_event"
SESSION_STREAM_OPENED: Final = "mcp.session_stream_opened"
SESSION_CLOSED: Final = "mcp.session_closed"


def endpoint_group(endpoint_id: int) -> str:
    """The channel-layer group of every live stream of one endpoint."""
    return f"mcp.endpoint.{endpoint_id}"


def client_reply_group(session_id: str, request_id: object) -> str:
    """The group a call waiting for the client's answer to ``request_id`` listens on.

    Keyed by session and id, so a client can only answer its own session's questions; hashed,
    because ids are the client's strings and group names must stay short and plain.
    """
    key = orjson.dumps([session_id, request_id])
    return f"mcp.reply.{hashlib.sha256(key).hexdigest()[:48]}"


async def apublish_client_reply(
    *, session_id: str, request_id: object, result: Any, error: Any
) -> None:
    """Route a client's answer (a JSON-RPC response POSTed anywhere) to the waiting call."""
    message = {"type": CLIENT_REPLY, "result": result, "error": error}
    await _asend(client_reply_group(session_id, request_id), message)


def session_group(session_id: str) -> str:
    """The group of a legacy session's standalone GET stream, in whichever process holds it."""
    return f"mcp.session.{hashlib.sha256(session_id.encode()).hexdigest()[:48]}"


async def apublish_session_stream_opened(*, session_id: str, stream_token: str) -> None:
    """Tell an older GET stream of the session to give way to the one just opened.

    Each server-to-client message of a session must go out on exactly one of its streams
    (2025-11-25 basic/transports), so a session keeps only its newest GET stream.
    """
    await _asend(session_group(session_id), {"type": SESSION_STREAM_OPENED, "token": stream_token})


async def apublish_session_closed(*, session_id: str) -> None:
    """End the session's GET stream at once (DELETE), wherever it is held."""
    await _asend(session_group(session_id), {"type": SESSION_CLOSED})


async def _asend(group: str, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is not None:
        await layer.group_send(group, message)


def stream_group(stream_id: str) -> str:
    """The group a resumed stream (GET + Last-Event-ID) follows its request's events on."""
    return f"mcp.sse.{stream_id}"


async def apublish_stream_event(*, stream_id: str, event_id: str, data: bytes) -> None:
    """Hand one event of a resumable stream to whichever process resumed it."""
    await _asend(stream_group(stream_id), {"type": STREAM_EVENT, "id": event_id, "data": data})


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
