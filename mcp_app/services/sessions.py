"""Legacy-era (handshake) MCP sessions: open, load, touch, close, and their per-session state.

Sessions live in the database, so any web process can serve any session (2025-11-25
basic/transports, "Session Management"); each process also keeps the sessions it serves in
memory, so a session in steady use costs no query per message. A change to a session (DELETE,
log level, subscriptions) drops it from every process's memory (``services.invalidation``),
and a cached session is re-read at most once per ``MCP_CACHE_RECHECK_SECONDS`` in case such a
push was missed. Ids are 256-bit random, URL-safe base64: visible ASCII as the spec
requires, unguessable, and never used as auth.

On OAuth endpoints a session belongs to the user and client that opened it (``user_id``,
``oauth_client_id``; the security best practices bind session ids to the user): every lookup
here filters on them, so another principal's session is as unknown as a made-up id. Public
endpoints pass neither and only ever match unbound sessions.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, transaction
from django.db.models import Q
from django.utils import timezone

from mcp_app.conf import get_conf
from mcp_app.models import Session
from mcp_app.protocol.context import LegacySession
from mcp_app.services import invalidation
from mcp_app.services.database import in_thread
from mcp_app.services.process_cache import ProcessCache

# Each service call is self-contained (its own autocommit statements or atomic block), so none
# needs asgiref's single thread-sensitive thread: concurrent requests run on the thread pool.
_in_thread = in_thread

# last_seen_at is refreshed at most this often, so a busy session costs no write per request.
TOUCH_INTERVAL = timedelta(seconds=60)


logger = logging.getLogger(__name__)

# Sessions kept per process; least recently used ones are dropped beyond this.
SESSION_CACHE_SIZE = 20_000


@dataclass
class _Cached:
    session: LegacySession
    endpoint_id: int
    user_id: int | None
    oauth_client_id: str
    # The idle clock as this process knows it (another process may have refreshed it since).
    last_seen_at: datetime

    def owned_by(self, endpoint_id: int, user_id: int | None, oauth_client_id: str) -> bool:
        return (self.endpoint_id, self.user_id, self.oauth_client_id) == (
            endpoint_id,
            user_id,
            oauth_client_id,
        )


# This process's live sessions by id, trusted until invalidated or re-checked.
_cache: ProcessCache[str, _Cached] = ProcessCache(SESSION_CACHE_SIZE)


def _forget(message: invalidation.Invalidation) -> None:
    _cache.forget(message.session_ids, everything=message.everything)


invalidation.register(_forget)


def _fresh(session_id: str) -> _Cached | None:
    entry = _cache.fresh(session_id, get_conf().MCP_CACHE_RECHECK_SECONDS)
    return entry.value if entry is not None else None


def clear_session_cache() -> None:
    """Forget every session this process keeps in memory (tests, database resets)."""
    _cache.clear()


def _cached(row: Session, epoch: int) -> LegacySession:
    session = _as_legacy(row)
    _cache.put(
        row.id,
        _Cached(
            session=session,
            endpoint_id=row.endpoint_id,
            user_id=row.user_id,
            oauth_client_id=row.oauth_client_id,
            last_seen_at=row.last_seen_at,
        ),
        epoch,
    )
    return session


def _new_session_id() -> str:
    return secrets.token_urlsafe(32)


def _as_legacy(row: Session) -> LegacySession:
    return LegacySession(
        id=row.id,
        protocol_version=row.protocol_version,
        client_capabilities=row.client_capabilities or {},
        client_info=row.client_info or {},
        log_level=row.log_level,
        subscriptions=frozenset(row.subscriptions or ()),
    )


def session_open(
    *,
    endpoint_id: int,
    protocol_version: str,
    client_capabilities: dict[str, Any],
    client_info: dict[str, Any],
    user_id: int | None = None,
    oauth_client_id: str = "",
) -> LegacySession:
    """Create a session for a successful ``initialize`` and return its state."""
    epoch = _cache.epoch
    row = Session.objects.create(
        id=_new_session_id(),
        endpoint_id=endpoint_id,
        protocol_version=protocol_version,
        client_capabilities=client_capabilities,
        client_info=client_info,
        last_seen_at=timezone.now(),
        user_id=user_id,
        oauth_client_id=oauth_client_id,
    )
    return _cached(row, epoch)


def _live(endpoint_id: int) -> Q:
    idle = timedelta(seconds=get_conf().MCP_SESSION_IDLE_SECONDS)
    return Q(
        endpoint_id=endpoint_id, closed_at__isnull=True, last_seen_at__gte=timezone.now() - idle
    )


def _live_and_owned(endpoint_id: int, user_id: int | None, oauth_client_id: str) -> Q:
    owner = Q(user__isnull=True) if user_id is None else Q(user_id=user_id)
    return _live(endpoint_id) & owner & Q(oauth_client_id=oauth_client_id)


def _from_memory(
    session_id: str, endpoint_id: int, user_id: int | None, oauth_client_id: str, now: datetime
) -> tuple[bool, LegacySession | None]:
    """Answer a lookup from this process's memory: ``(answered, session)``.

    Not answered when the session is not held, is due for a re-check, or looks idle (another
    process may have used it since): the database decides then.
    """
    cached = _fresh(session_id)
    if cached is None:
        return False, None
    if not cached.owned_by(endpoint_id, user_id, oauth_client_id):
        return True, None  # owners never change
    idle = timedelta(seconds=get_conf().MCP_SESSION_IDLE_SECONDS)
    if cached.last_seen_at < now - idle:
        return False, None
    return True, cached.session


def session_held(session_id: str) -> LegacySession | None:
    """The session as this process holds it in memory, however old; None when not held.

    No query: for what only labels a request (the call log's client of a DELETE), never for
    deciding whether a session is live or whose it is.
    """
    held = _cache.held(session_id)
    return held.value.session if held is not None else None


def _claim_touch(session_id: str, now: datetime) -> bool:
    """Whether the caller should refresh the session's idle clock now (once per interval)."""
    cached = _fresh(session_id)
    if cached is None or cached.last_seen_at >= now - TOUCH_INTERVAL:
        return False
    cached.last_seen_at = now
    return True


def _touch(session_id: str, now: datetime) -> None:
    try:
        Session.objects.filter(id=session_id, last_seen_at__lt=now - TOUCH_INTERVAL).update(
            last_seen_at=now
        )
    except DatabaseError:
        # The idle clock is refreshed again within a minute; a request never fails for it.
        logger.warning("Database unavailable; a session's idle clock was not refreshed")


def session_load(
    *, session_id: str, endpoint_id: int, user_id: int | None = None, oauth_client_id: str = ""
) -> LegacySession | None:
    """Return a live session of this endpoint, refreshing its idle clock; else ``None``.

    Unknown, closed, expired, other endpoints' and other principals' sessions all look the
    same to the caller: the transport answers 404 for each. No query for a session this
    process holds in memory, but one UPDATE per ``TOUCH_INTERVAL`` for its idle clock.
    """
    if not session_id or len(session_id) > 64:
        return None
    now = timezone.now()
    answered, session = _from_memory(session_id, endpoint_id, user_id, oauth_client_id, now)
    if answered:
        if session is not None and _claim_touch(session_id, now):
            _touch(session_id, now)
        return session
    epoch = _cache.epoch
    try:
        row = Session.objects.filter(
            _live_and_owned(endpoint_id, user_id, oauth_client_id), id=session_id
        ).first()
    except DatabaseError:
        held = _cache.held(session_id)
        if held is None or not held.value.owned_by(endpoint_id, user_id, oauth_client_id):
            raise
        # The database is unreachable: go on with what this process knew, re-check soon.
        logger.warning("Database unavailable; serving a session from memory")
        _cache.keep_serving(held, get_conf().MCP_CACHE_RECHECK_SECONDS)
        return held.value.session
    if row is None:
        return None
    if row.last_seen_at < now - TOUCH_INTERVAL:
        _touch(session_id, now)
        row.last_seen_at = now
    return _cached(row, epoch)


async def asession_load(
    *, session_id: str, endpoint_id: int, user_id: int | None = None, oauth_client_id: str = ""
) -> LegacySession | None:
    """Async twin of ``session_load``: no thread hop for a session held in memory."""
    if not session_id or len(session_id) > 64:
        return None
    now = timezone.now()
    answered, session = _from_memory(session_id, endpoint_id, user_id, oauth_client_id, now)
    if not answered:
        return await _in_thread(session_load)(
            session_id=session_id,
            endpoint_id=endpoint_id,
            user_id=user_id,
            oauth_client_id=oauth_client_id,
        )
    if session is not None and _claim_touch(session_id, now):
        await _in_thread(_touch)(session_id, now)
    return session


def session_close(
    *, session_id: str, endpoint_id: int, user_id: int | None = None, oauth_client_id: str = ""
) -> bool:
    """End a session (DELETE). Returns whether a live session was closed."""
    if not session_id or len(session_id) > 64:
        return False
    closed = Session.objects.filter(
        _live_and_owned(endpoint_id, user_id, oauth_client_id), id=session_id
    ).update(closed_at=timezone.now())
    if closed:
        invalidation.invalidate(session_ids=[session_id])
    return closed > 0


def session_is_live(
    *, session_id: str, endpoint_id: int, user_id: int | None = None, oauth_client_id: str = ""
) -> bool:
    return Session.objects.filter(
        _live_and_owned(endpoint_id, user_id, oauth_client_id), id=session_id
    ).exists()


def session_subscriptions(*, session_id: str, endpoint_id: int) -> frozenset[str] | None:
    """Return the resource URIs a live session subscribed to, or None if it is gone."""
    found = (
        Session.objects.filter(_live(endpoint_id), id=session_id)
        .values_list("subscriptions", flat=True)
        .first()
    )
    return None if found is None else frozenset(found or ())


def sessions_subscriptions(*, session_ids: Iterable[str]) -> dict[str, frozenset[str]]:
    """Return the resource URIs each live session of ``session_ids`` subscribed to (sessions
    closed, expired or unknown are left out)."""
    idle = timedelta(seconds=get_conf().MCP_SESSION_IDLE_SECONDS)
    rows = Session.objects.filter(
        id__in=list(session_ids),
        closed_at__isnull=True,
        last_seen_at__gte=timezone.now() - idle,
    ).values_list("id", "subscriptions")
    return {session_id: frozenset(uris or ()) for session_id, uris in rows}


def session_purge(*, idle_for: timedelta) -> int:
    """Delete sessions closed, or last used, more than ``idle_for`` ago; return how many.

    Clients that never send DELETE (most of them) leave their rows behind; expired sessions
    already answer 404, so removing them changes nothing a client can see.
    """
    cutoff = timezone.now() - idle_for
    deleted, _ = Session.objects.filter(
        Q(closed_at__lt=cutoff) | Q(last_seen_at__lt=cutoff)
    ).delete()
    return deleted


asession_open = _in_thread(session_open)
asession_close = _in_thread(session_close)
asession_is_live = _in_thread(session_is_live)
asession_subscriptions = _in_thread(session_subscriptions)
asessions_subscriptions = _in_thread(sessions_subscriptions)


@dataclass(frozen=True)
class DatabaseSessionStore:
    """protocol.ports.SessionStore over the Session table."""

    @staticmethod
    @_in_thread
    def _set_log_level(session_id: str, level: str) -> None:
        Session.objects.filter(id=session_id).update(log_level=level)
        invalidation.invalidate(session_ids=[session_id])

    @staticmethod
    @_in_thread
    def _change_subscription(session_id: str, uri: str, add: bool) -> None:
        # A read-modify-write under a row lock: two concurrent subscribes must not lose one.
        with transaction.atomic():
            row = Session.objects.select_for_update().filter(id=session_id).first()
            if row is None:
                return
            uris = list(row.subscriptions or [])
            if add and uri not in uris:
                uris.append(uri)
            elif not add and uri in uris:
                uris.remove(uri)
            else:
                return
            row.subscriptions = uris
            row.save(update_fields=["subscriptions"])
            invalidation.invalidate(session_ids=[session_id])

    async def set_log_level(self, session_id: str, level: str) -> None:
        await self._set_log_level(session_id, level)

    async def subscribe(self, session_id: str, uri: str) -> None:
        await self._change_subscription(session_id, uri, True)

    async def unsubscribe(self, session_id: str, uri: str) -> None:
        await self._change_subscription(session_id, uri, False)
