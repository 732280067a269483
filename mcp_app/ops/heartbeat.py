"""Worker heartbeats in Redis: each Celery worker says it is alive; readiness counts them.

Each worker's main process adds its hostname to one sorted set, scored by the time of its
latest beat (``WORKER_HEARTBEAT_SECONDS``). A worker that stops beating (killed, host lost,
Redis unreachable from it) drops out of the count once its beat is older than
``WORKER_HEARTBEAT_STALE_SECONDS``; a worker that shuts down cleanly leaves at once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

import redis
from django.conf import settings

from mcp_app.conf import redis_key
from mcp_app.services import redis_sentinel

logger = logging.getLogger(__name__)


def worker_heartbeats_key() -> str:
    """The sorted set of this installation's worker beats (``REDIS_NAMESPACE``)."""
    return redis_key("worker-heartbeats")


# Members older than this many stale bounds are removed by the next beat of any worker, so
# the set does not grow with every hostname that ever ran.
_FORGET_AFTER_STALE_BOUNDS = 10

_stop = threading.Event()


def _client() -> redis.Redis:
    timeout = settings.WORKER_HEARTBEAT_SECONDS
    return redis_sentinel.sync_client(
        settings.REDIS_URL, socket_timeout=timeout, socket_connect_timeout=timeout
    )


def heartbeat_once(client: redis.Redis, hostname: str) -> None:
    """Record one beat of ``hostname`` now and forget long-gone workers."""
    now = time.time()
    forget_before = now - _FORGET_AFTER_STALE_BOUNDS * settings.WORKER_HEARTBEAT_STALE_SECONDS
    pipe = client.pipeline(transaction=False)
    pipe.zadd(worker_heartbeats_key(), {hostname: now})
    pipe.zremrangebyscore(worker_heartbeats_key(), "-inf", forget_before)
    pipe.execute()


def _beat_forever(hostname: str) -> None:
    client = _client()
    failing = False
    while not _stop.is_set():
        try:
            heartbeat_once(client, hostname)
        except redis.RedisError:
            # Logged once per outage: the beat resumes by itself when Redis is back.
            if not failing:
                logger.warning("Worker heartbeat not written: Redis unavailable")
            failing = True
        else:
            if failing:
                logger.warning("Worker heartbeat written again")
            failing = False
        _stop.wait(settings.WORKER_HEARTBEAT_SECONDS)


def start_worker_heartbeat(hostname: str) -> None:
    """Beat for ``hostname`` on a daemon thread until ``stop_worker_heartbeat``.

    Nothing to beat into without ``REDIS_URL`` (the embedded worker lives in the web process,
    whose readiness is its own).
    """
    if not settings.REDIS_URL:
        return
    _stop.clear()
    threading.Thread(
        target=_beat_forever, args=(hostname,), name="mcp-worker-heartbeat", daemon=True
    ).start()


def stop_worker_heartbeat(hostname: str) -> None:
    """Stop beating and leave the set, so readiness stops counting this worker at once."""
    if not settings.REDIS_URL:
        return
    _stop.set()
    # Redis unreachable: the beat goes stale by itself.
    with contextlib.suppress(redis.RedisError):
        _client().zrem(worker_heartbeats_key(), hostname)
