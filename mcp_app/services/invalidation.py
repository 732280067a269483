"""Keep every process's in-memory caches in step: pushed invalidations over Redis pub/sub.

The hot path reads no row in steady state: each web process keeps endpoint states (catalog
snapshots) and legacy sessions in memory and trusts them until told otherwise. Whoever changes
one of them (an admin edit, a DELETE, a subscription) calls ``invalidate``: this process's
caches drop the entries at once, and every other process hears of it on the Redis channel
``invalidation_channel()`` once the change is committed. A transaction publishes once,
whatever it changed: ``on_commit_merged`` merges everything it asks to publish (here and in
``services.notify``), so an import of 300 tools sends one message, not 300.

A push can be missed (Redis restarted, unreachable when the change committed, a process that
was not subscribed yet), so the caches also re-check each entry against the database at most
once per ``MCP_CACHE_RECHECK_SECONDS``; and whenever the subscription is (re)established, every
cache entry is dropped, since pushes may have been lost while it was down. Without
``REDIS_URL`` (the embedded single-process setup) only the local half applies.

The subscriber is one daemon thread per process (started on first use, again after a fork),
so it is bound to no event loop: it serves Daphne, uvicorn, Celery workers and tests alike.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
import redis
from django.conf import settings
from django.db import transaction

from mcp_app.conf import redis_key
from mcp_app.services import redis_sentinel

logger = logging.getLogger(__name__)

SUBSCRIBER_THREAD = "mcp-invalidation"
# Seconds between reconnection attempts while Redis is unreachable (doubling up to the max).
RECONNECT_FIRST_SECONDS = 0.2
RECONNECT_MAX_SECONDS = 5.0
# redis-py pings an idle subscription this often, so a dead connection is noticed.
HEALTH_CHECK_SECONDS = 10
# Publishing runs after an operator's commit: never hold their request long on Redis.
SOCKET_TIMEOUT_SECONDS = 2.0


@dataclass(frozen=True)
class Invalidation:
    """What to forget: endpoints (by id or slug), legacy sessions (by id), or everything."""

    endpoint_ids: frozenset[int] = frozenset()
    slugs: frozenset[str] = frozenset()
    session_ids: frozenset[str] = frozenset()
    everything: bool = False

    def encode(self) -> bytes:
        return orjson.dumps(
            {
                "e": sorted(self.endpoint_ids),
                "s": sorted(self.slugs),
                "x": sorted(self.session_ids),
                "all": self.everything,
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> Invalidation | None:
        """Parse a pushed message; None for anything malformed (never trusted blindly)."""
        try:
            raw = orjson.loads(data)
            return cls(
                endpoint_ids=frozenset(int(i) for i in raw.get("e", ())),
                slugs=frozenset(str(s) for s in raw.get("s", ())),
                session_ids=frozenset(str(s) for s in raw.get("x", ())),
                everything=bool(raw.get("all", False)),
            )
        except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
            return None

    def merge(self, other: Invalidation) -> Invalidation:
        """Forget what either names."""
        return Invalidation(
            endpoint_ids=self.endpoint_ids | other.endpoint_ids,
            slugs=self.slugs | other.slugs,
            session_ids=self.session_ids | other.session_ids,
            everything=self.everything or other.everything,
        )


def invalidation_channel() -> str:
    """The pub/sub channel of this installation's invalidations (``REDIS_NAMESPACE``)."""
    return redis_key("invalidate")


Handler = Callable[[Invalidation], None]


@dataclass
class _State:
    handlers: list[Handler] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    subscriber: tuple[int, threading.Thread] | None = None
    client: tuple[int, redis.Redis] | None = None
    # Counts successful (re)subscriptions, pushes published and pushes applied, for tests.
    subscriptions: int = 0
    sent: int = 0
    received: int = 0
    subscribed: threading.Event = field(default_factory=threading.Event)


_state = _State()


def register(handler: Handler) -> None:
    """Have ``handler`` applied to every invalidation, local or pushed (idempotent)."""
    with _state.lock:
        if handler not in _state.handlers:
            _state.handlers.append(handler)


def apply_locally(message: Invalidation) -> None:
    """Drop what ``message`` names from this process's caches."""
    for handler in list(_state.handlers):
        try:
            handler(message)
        except Exception:
            logger.exception("Cache invalidation handler failed")


def invalidate(
    *,
    endpoint_ids: Iterable[int] = (),
    slugs: Iterable[str] = (),
    session_ids: Iterable[str] = (),
    everything: bool = False,
) -> None:
    """Make every process forget these entries: this one now, and all of them after commit.

    Dropping locally both now and after the commit keeps this process from caching a state
    read between the two; the push goes out only once the change is visible to others.
    """
    message = Invalidation(
        endpoint_ids=frozenset(endpoint_ids),
        slugs=frozenset(slugs),
        session_ids=frozenset(session_ids),
        everything=everything,
    )
    apply_locally(message)
    on_commit_merged(order=0, value=message, merge=Invalidation.merge, publish=_after_commit)


def _after_commit(message: Invalidation) -> None:
    apply_locally(message)
    _publish(message)


@dataclass
class _CommitBatch:
    """What one transaction publishes once it commits: per kind of message, one merged value."""

    # The connection's list of commit hooks when the batch began. Django replaces that list
    # when the transaction ends (commit or rollback) and when a savepoint is rolled back:
    # a batch then takes no more values, so nothing is added to a batch that will never run.
    hooks: list[Any]
    # order -> (merged value, how to publish it); published in ascending order.
    parts: dict[int, tuple[Any, Callable[[Any], None]]] = field(default_factory=dict)
    done: bool = False

    def publish(self) -> None:
        # Each call that added a value registered this hook; the first to run publishes all.
        if self.done:
            return
        self.done = True
        for _order, (value, publish) in sorted(self.parts.items(), key=lambda item: item[0]):
            publish(value)


T = TypeVar("T")
# The connection attribute holding its current _CommitBatch.
_BATCH_ATTR = "_mcp_commit_batch"


def on_commit_merged(
    *, order: int, value: T, merge: Callable[[T, T], T], publish: Callable[[T], None]
) -> None:
    """Run ``publish`` once the transaction commits, with every ``value`` it was given merged.

    A bulk change (an import, an admin action on many rows, an upstream sync) makes one call
    per row; Redis and the connected clients hear of the transaction once per ``order``,
    lower orders first (invalidations before the notifications that make clients refetch).
    Each call still registers its own commit hook, so Django's savepoint rules apply as
    before: a value added after a savepoint rollback is never lost (a value added inside the
    rolled-back savepoint may still be published: an extra invalidation is harmless). Outside
    a transaction ``publish`` runs now, as ``transaction.on_commit`` would.
    """
    connection = transaction.get_connection()
    if not connection.in_atomic_block:
        transaction.on_commit(lambda: publish(value))
        return
    batch = connection.__dict__.get(_BATCH_ATTR)
    if batch is None or batch.done or batch.hooks is not connection.run_on_commit:
        batch = _CommitBatch(hooks=connection.run_on_commit)
        connection.__dict__[_BATCH_ATTR] = batch
    held = batch.parts.get(order)
    batch.parts[order] = (value if held is None else merge(held[0], value), publish)
    transaction.on_commit(batch.publish)


def _redis_url() -> str:
    return getattr(settings, "REDIS_URL", "") or ""


def _client() -> redis.Redis | None:
    url = _redis_url()
    if not url:
        return None
    pid = os.getpid()
    if _state.client is None or _state.client[0] != pid:
        client = redis_sentinel.sync_client(
            url,
            socket_timeout=SOCKET_TIMEOUT_SECONDS,
            socket_connect_timeout=SOCKET_TIMEOUT_SECONDS,
        )
        _state.client = (pid, client)
    return _state.client[1]


def _publish(message: Invalidation) -> None:
    client = _client()
    if client is None:
        return
    try:
        client.publish(invalidation_channel(), message.encode())
        _state.sent += 1
    except redis.RedisError:
        # The change is committed whatever happens here; other processes see it at their
        # next re-check (MCP_CACHE_RECHECK_SECONDS).
        logger.warning("Could not publish a cache invalidation; others re-check in time")


def ensure_subscribed() -> None:
    """Start this process's subscriber thread if it is not running (cheap when it is)."""
    current = _state.subscriber
    if current is not None and current[1].is_alive():
        return
    if not _redis_url():
        return
    pid = os.getpid()
    with _state.lock:
        current = _state.subscriber
        if current is not None and current[0] == pid and current[1].is_alive():
            return
        _state.subscribed.clear()
        thread = threading.Thread(target=_subscribe_forever, name=SUBSCRIBER_THREAD, daemon=True)
        _state.subscriber = (pid, thread)
        thread.start()


def wait_subscribed(timeout: float) -> bool:
    """Wait until this process's subscription is live (tests, the benchmark)."""
    ensure_subscribed()
    return _state.subscribed.wait(timeout)


def pushes_sent() -> int:
    """How many invalidations this process has published (tests)."""
    return _state.sent


def pushes_received() -> int:
    """How many pushed invalidations this process has applied (tests)."""
    return _state.received


def _subscribe_forever() -> None:
    delay = RECONNECT_FIRST_SECONDS
    while True:
        client = redis_sentinel.sync_client(
            _redis_url(),
            socket_connect_timeout=SOCKET_TIMEOUT_SECONDS,
            health_check_interval=HEALTH_CHECK_SECONDS,
        )
        pubsub = client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]  # redis-py
        try:
            pubsub.subscribe(invalidation_channel())
            # Pushes sent while this process was not listening are lost: forget everything
            # once, so nothing older than this subscription is trusted.
            apply_locally(Invalidation(everything=True))
            _state.subscriptions += 1
            _state.subscribed.set()
            delay = RECONNECT_FIRST_SECONDS
            while True:
                message = pubsub.get_message(timeout=HEALTH_CHECK_SECONDS)
                if message is None or message.get("type") != "message":
                    continue
                parsed = Invalidation.decode(message["data"])
                if parsed is not None:
                    apply_locally(parsed)
                    _state.received += 1
        except (redis.RedisError, OSError):
            _state.subscribed.clear()
            logger.warning("Cache invalidation subscription lost; reconnecting in %.1f s", delay)
        finally:
            try:
                pubsub.close()
                client.close()
            except (redis.RedisError, OSError):
                pass
        threading.Event().wait(delay)
        delay = min(delay * 2, RECONNECT_MAX_SECONDS)
