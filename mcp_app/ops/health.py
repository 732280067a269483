"""Readiness: whether this web process can serve, answered in bounded time (``/readyz``).

Checked on every call, concurrently, each within ``READINESS_TIMEOUT_SECONDS``:

- ``database``: ``SELECT 1`` on a connection of one dedicated thread (kept open, health-checked
  before reuse like every other); a check still hanging from an earlier probe is waited on
  again rather than joined by another thread, so a black-holed database costs one thread.
- ``redis`` (with ``REDIS_URL``): ``PING``.
- ``workers`` (with ``REDIS_URL``, a broker other than the embedded one, and at least one tool
  that may run on a worker): at least one worker heartbeat (``ops/heartbeat.py``) newer than
  ``WORKER_HEARTBEAT_STALE_SECONDS``. Skipped when the database check failed, since whether
  such tools exist is not known then.

- ``replica`` (with ``DATABASE_REPLICA_URL``): the read replica answers and is at most
  ``MCP_REPLICA_MAX_LAG_SECONDS`` behind (``services/replica.py``). Never required: while it
  lags or is down, the call-log reads it would serve go to the primary, so the process serves
  everything still; it is reported as a missing worker is.

The database and Redis are required: without them this process cannot serve (503). Workers
are not, unless ``MCP_READY_REQUIRES_WORKER``: without them only background calls wait,
while inline calls, lists and reads go on, and every web process shares the same workers,
so failing readiness on them would take every process out of rotation at once. A missing
worker is then reported (``"status": "degraded"``, the check named in ``failed``, the
``mcphost_readiness_check`` gauge) on a 200.

Liveness (``/healthz``) checks nothing: the process answered.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from dataclasses import dataclass

import redis.asyncio
from django.conf import settings
from django.db import close_old_connections, connection

from mcp_app.conf import get_conf
from mcp_app.models import Tool
from mcp_app.ops.heartbeat import worker_heartbeats_key
from mcp_app.services import metrics, redis_sentinel
from mcp_app.services.background.embedded import embedded_worker_enabled
from mcp_app.services.replica import ReplicaState, replica_configured, replica_state

# One thread for every database check of this process: a hung connect holds only it.
_database_thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mcp-readiness")
_database_check: concurrent.futures.Future[bool] | None = None
# And one for the replica's, likewise.
_replica_thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mcp-replica")
_replica_check: concurrent.futures.Future[ReplicaState] | None = None


@dataclass(frozen=True)
class Check:
    """One dependency's verdict; ``detail`` says what failed (never a secret or a URL).

    A failed ``required`` check makes the process unready; another only degrades it.
    """

    name: str
    ok: bool
    detail: str
    required: bool = True


@dataclass(frozen=True)
class Readiness:
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        """Whether this process can serve: every required check passed."""
        return all(check.ok for check in self.checks if check.required)

    def as_json(self) -> dict[str, object]:
        failed = [check.name for check in self.checks if not check.ok]
        return {
            "status": "unavailable" if not self.ok else "degraded" if failed else "ready",
            "failed": failed,
            "checks": {
                check.name: {"ok": check.ok, "detail": check.detail, "required": check.required}
                for check in self.checks
            },
        }


def _query_database() -> bool:
    """Run the check query; return whether any tool may run on a worker."""
    close_old_connections()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return Tool.objects.exclude(execution_mode=Tool.Execution.INLINE).exists()
    except Exception:
        # A connection that failed mid-query is not reused by the next probe.
        connection.close()
        raise


async def _check_database(timeout: float) -> tuple[Check, bool]:
    global _database_check
    if _database_check is None or _database_check.done():
        _database_check = _database_thread.submit(_query_database)
    future = asyncio.wrap_future(_database_check)
    try:
        async with asyncio.timeout(timeout):
            needs_workers = await asyncio.shield(future)
    except TimeoutError:
        return Check("database", False, f"no answer within {timeout:g} s"), False
    except Exception as exc:
        return Check("database", False, f"unavailable ({type(exc).__name__})"), False
    return Check("database", True, "ok"), needs_workers


def _query_replica() -> ReplicaState:
    close_old_connections()
    return replica_state(fresh=True)


async def _check_replica(timeout: float) -> Check:
    global _replica_check
    if _replica_check is None or _replica_check.done():
        _replica_check = _replica_thread.submit(_query_replica)
    try:
        async with asyncio.timeout(timeout):
            state = await asyncio.shield(asyncio.wrap_future(_replica_check))
    except TimeoutError:
        return Check("replica", False, f"no answer within {timeout:g} s", required=False)
    if state.serves:
        detail = f"{state.lag_seconds or 0:.1f} s behind"
    elif state.lag_seconds is not None:
        bound = get_conf().MCP_REPLICA_MAX_LAG_SECONDS
        detail = f"{state.lag_seconds:.1f} s behind (bound {bound:g} s): reads go to the primary"
    else:
        detail = f"{state.reason} ({state.detail}): reads go to the primary"
    return Check("replica", state.serves, detail, required=False)


async def _check_redis(timeout: float, *, count_workers: bool) -> list[Check]:
    client = redis_sentinel.async_client(
        settings.REDIS_URL, socket_timeout=timeout, socket_connect_timeout=timeout
    )
    checks = []
    try:
        async with asyncio.timeout(timeout):
            await client.ping()
            checks.append(Check("redis", True, "ok"))
            if count_workers:
                since = time.time() - settings.WORKER_HEARTBEAT_STALE_SECONDS
                alive = await client.zcount(worker_heartbeats_key(), since, "+inf")
                stale = settings.WORKER_HEARTBEAT_STALE_SECONDS
                detail = f"{alive} alive" if alive else f"no worker heartbeat within {stale:g} s"
                checks.append(Check("workers", alive > 0, detail, _workers_required()))
    except (TimeoutError, redis.RedisError, OSError) as exc:
        reason = (
            f"no answer within {timeout:g} s"
            if isinstance(exc, TimeoutError)
            else (f"unavailable ({type(exc).__name__})")
        )
        checks = [Check("redis", False, reason)]
        if count_workers:
            checks.append(
                Check("workers", False, "unknown: Redis unavailable", _workers_required())
            )
    finally:
        await client.aclose()
    return checks


def _workers_required() -> bool:
    return get_conf().MCP_READY_REQUIRES_WORKER


async def areadiness() -> Readiness:
    """Check every dependency this process needs, concurrently, in bounded time."""
    readiness = await _areadiness()
    for check in readiness.checks:
        metrics.READINESS_CHECK.labels(check.name).set(1 if check.ok else 0)
    return readiness


async def _areadiness() -> Readiness:
    timeout = settings.READINESS_TIMEOUT_SECONDS
    redis_wanted = bool(settings.REDIS_URL)
    workers_possible = redis_wanted and not embedded_worker_enabled()
    database = asyncio.ensure_future(_check_database(timeout))
    replica = asyncio.ensure_future(_check_replica(timeout)) if replica_configured() else None
    if not redis_wanted:
        check, _ = await database
        return Readiness((check, *([await replica] if replica else [])))
    # Redis is checked while the database answers; workers only once it is known they matter.
    redis_checks = await _check_redis(timeout, count_workers=workers_possible)
    database_check, needs_workers = await database
    if not (database_check.ok and needs_workers):
        redis_checks = [check for check in redis_checks if check.name != "workers"]
    return Readiness((database_check, *redis_checks, *([await replica] if replica else [])))
