"""The server's long-lived SSE streams, all on one loop: ``follow``.

- the legacy standalone GET stream of a session (list changes, resource updates);
- a request stream resumed with ``Last-Event-ID`` (2025-11-25 sessions);
- ``subscriptions/listen`` (2026-07-28).

Each joins its channel-layer groups before its first byte goes out (no change after the
client sees the stream open is missed), writes a keep-alive when idle, and ends when the
client goes, its access token expires, the channel layer fails (the client reconnects), or
its own rule says so.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from mcp_app.conf import get_conf
from mcp_app.protocol import jsonrpc, sse
from mcp_app.protocol.context import LegacySession
from mcp_app.protocol.errors import McpError, modern_http_status
from mcp_app.protocol.handlers import subscriptions
from mcp_app.protocol.jsonrpc import Request
from mcp_app.services import events, notify, upstream_subscriptions
from mcp_app.services.background import web as background
from mcp_app.services.context_factory import caller_key
from mcp_app.services.endpoint_directory import EndpointState
from mcp_app.services.notify import GroupListener
from mcp_app.services.sessions import asession_is_live, asession_subscriptions
from mcp_app.transport import http
from mcp_app.transport.exchange import Exchange, Rejected
from mcp_app.transport.streams import is_response

logger = logging.getLogger(__name__)

# How often a standalone GET stream re-checks that its session is still alive.
SESSION_RECHECK_SECONDS = 60.0

# Each returns whether the stream goes on.
Opened = Callable[[], Awaitable[bool]]
OnEvent = Callable[[dict[str, Any]], Awaitable[bool]]
OnIdle = Callable[[float], Awaitable[bool]]


async def follow(
    ex: Exchange,
    groups: tuple[str, ...],
    *,
    name: str,
    opened: Opened,
    on_event: OnEvent,
    on_idle: OnIdle | None = None,
) -> None:
    """Stream what arrives on ``groups`` until the client goes or a callback says stop.

    ``opened`` starts the response once the groups are joined; ``on_event`` handles each
    message; ``on_idle`` runs when a keep-alive interval passed quietly (its argument).
    """
    ex.cancel_on_disconnect = True
    keepalive = get_conf().MCP_SSE_KEEPALIVE_SECONDS
    async with GroupListener(*groups) as listener:
        going = await opened()
        while going and not ex.responder.client_gone:
            try:
                event = await listener.next(ex.wait_seconds(keepalive))
            except Exception:
                logger.warning("Channel layer lost; ending the %s stream", name, exc_info=True)
                break  # the client reconnects
            if ex.token_expired():
                break  # the client reconnects with a refreshed token
            if event is not None:
                going = await on_event(event)
            elif on_idle is None or await on_idle(keepalive):
                await ex.responder.write(sse.keepalive())
            else:
                break
    await ex.responder.finish()


async def _write_frames(ex: Exchange, frames: list[dict[str, Any]]) -> None:
    for frame in frames:
        await ex.responder.write(sse.encode_event(jsonrpc.encode(frame)))


async def session_stream(ex: Exchange, state: EndpointState, session: LegacySession) -> None:
    """The standalone GET stream: server-initiated messages of a legacy session.

    It ends when the session is closed or expires, or a newer GET stream takes over.
    """
    token = secrets.token_urlsafe(12)
    since_check = 0.0

    async def opened() -> bool:
        await notify.apublish_session_stream_opened(session_id=session.id, stream_token=token)
        await ex.responder.start_stream(200)
        return True

    async def on_event(event: dict[str, Any]) -> bool:
        kind = event["type"]
        if kind == notify.SESSION_CLOSED:
            return False
        if kind == notify.SESSION_STREAM_OPENED:
            return bool(event["token"] == token)
        if kind == notify.RESOURCE_UPDATED:
            # Subscriptions change during the stream's life: read the current ones.
            subscribed = await asession_subscriptions(session_id=session.id, endpoint_id=state.id)
            if subscribed is None:
                return False
            frames = subscriptions.resource_updated_notifications(event["uri"], subscribed)
        else:
            frames = subscriptions.list_changed_notifications(event["kinds"])
        await _write_frames(ex, frames)
        return True

    async def on_idle(waited: float) -> bool:
        nonlocal since_check
        since_check += waited
        if since_check < SESSION_RECHECK_SECONDS:
            return True
        since_check = 0.0
        return await asession_is_live(
            session_id=session.id, endpoint_id=state.id, **ex.session_owner()
        )

    groups = (notify.endpoint_group(state.id), notify.session_group(session.id))
    await follow(ex, groups, name="GET", opened=opened, on_event=on_event, on_idle=on_idle)


async def resumed_stream(ex: Exchange, session: LegacySession, last_event_id: str) -> None:
    """Replay a request stream's events after ``last_event_id``, then follow it live.

    Only the session's own streams resume, and only the events of the stream the id belongs
    to (2025-11-25 basic/transports, "Resumability and Redelivery"); the stream ends with the
    request's response.

    Raises:
        Rejected: the id is not one of this server's (400) or not this session's (404).
    """
    parsed = events.parse_event_id(last_event_id)
    if parsed is None:
        raise Rejected(400, "Last-Event-ID is not an event id of this server")
    stream_id, seq = parsed
    store = events.get_event_store()
    if await store.owner(stream_id) != session.id:
        raise Rejected(404, "No stream of this session has that Last-Event-ID")
    request_id: Any = None
    known = False

    async def opened() -> bool:
        nonlocal seq, known, request_id
        # Following before reading the backlog: nothing falls between the two.
        await ex.responder.start_stream(200)
        for event in await store.after(stream_id, seq):
            await ex.responder.write(sse.encode_event(event.data, event_id=event.id))
            seq = event.seq
            if is_response(event.data):
                return False
        # The request may be a background call whose following process died: then its row
        # is the only place its outcome exists, and this stream must answer from it.
        known, request_id = await store.request_of(stream_id)
        return True

    async def on_event(message: dict[str, Any]) -> bool:
        nonlocal seq
        number = events.parse_event_id(message["id"])
        if number is None or number[1] <= seq:
            return True  # already replayed from the store
        seq = number[1]
        await ex.responder.write(sse.encode_event(message["data"], event_id=message["id"]))
        return not is_response(message["data"])

    async def on_idle(_waited: float) -> bool:
        if not known:
            return True
        orphan = await background.aorphan_answer(session_id=session.id, request_id=request_id)
        if orphan is None:
            return True
        if orphan.body is not None:
            data = jsonrpc.encode(orphan.body)
            # Kept like any event, so a later resume replays it too; once, though another
            # process resumed the stream meanwhile.
            frame_id = await store.append_response(stream_id, data)
            await ex.responder.write(sse.encode_event(data, event_id=frame_id))
        return False

    groups = (notify.stream_group(stream_id),)
    await follow(ex, groups, name="resumed", opened=opened, on_event=on_event, on_idle=on_idle)


async def listen_stream(ex: Exchange, state: EndpointState, request: Request) -> None:
    """Serve ``subscriptions/listen`` (2026-07-28): acknowledge, then stream the changes.

    The stream lives until the client closes it; every frame carries the request's id as its
    subscription id, and only the kinds the acknowledgement named are ever sent.

    Raises:
        Rejected: the client cannot read a stream (406), or the filter is invalid.
    """
    if not http.accepts(ex.headers, "text/event-stream", explicit=True):
        raise Rejected(
            406, "subscriptions/listen needs Accept: text/event-stream", request_id=request.id
        )
    try:
        honoured = subscriptions.listen_filter(request.params)
    except McpError as exc:
        raise Rejected(modern_http_status(exc.code), error=exc, request_id=request.id) from None
    watched: list[str] = []
    upstream = upstream_subscriptions.ListenSubscriptions(
        state.snapshot, caller=caller_key(principal=ex.principal.key, session_id="")
    )

    async def opened() -> bool:
        # Joined before the acknowledgement: no change after it can be missed.
        if "resourceSubscriptions" in honoured:
            watched.extend(await upstream.open(honoured["resourceSubscriptions"]))
            if watched:
                honoured["resourceSubscriptions"] = watched
            else:
                del honoured["resourceSubscriptions"]
        await ex.responder.start_stream(200)
        ack = subscriptions.acknowledgement(request.id, honoured)
        await ex.responder.write(sse.encode_event(jsonrpc.encode(ack)))
        return True

    async def on_event(event: dict[str, Any]) -> bool:
        if event["type"] == notify.RESOURCE_UPDATED:
            frames = subscriptions.resource_updated_notifications(
                event["uri"], watched, subscription_id=request.id
            )
        else:
            frames = subscriptions.list_changed_notifications(
                event["kinds"], honoured=honoured, subscription_id=request.id
            )
        await _write_frames(ex, frames)
        return True

    groups = (notify.endpoint_group(state.id), notify.listen_group(upstream.token))
    try:
        await follow(ex, groups, name="listen", opened=opened, on_event=on_event)
    finally:
        await upstream.close()
