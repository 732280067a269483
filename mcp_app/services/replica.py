"""Reads of the call log from a streaming read replica (``DATABASE_REPLICA_URL``).

With the ``replica`` database alias configured (mcpsite/settings.py), the audit pages, the
call-log exports and the API's call-log endpoints enter ``reading_from_replica()``; inside it
``ReplicaRouter`` sends reads of ``CallLog`` to the replica. Everything else stays on the
primary: every write, every other model (sessions, users, OAuth, teams, the catalog: the
scope a viewer sees is always the primary's), and any read inside a transaction, which may
follow a write of its own. Nothing outside those scopes ever touches the replica: the MCP
path, the admin and OAuth never enter one.

Each scope first asks ``replica_state()`` whether the replica may serve: it must answer and
be at most ``MCP_REPLICA_MAX_LAG_SECONDS`` behind, else the scope reads from the primary and
says why (``ReplicaState.reason``). The answer is kept ``MCP_REPLICA_CHECK_SECONDS`` per
process, so a busy page costs no extra round trip; a fallback is logged when it begins and
ends and counted in ``mcphost_replica_reads``.

How far behind the replica is (``_LAG_SQL``): ``now() - pg_last_xact_replay_timestamp()``
alone is the age of the last transaction replayed, which grows on a replica that is fully
caught up whenever the primary has nothing to commit. So the replica compares the WAL it has
received with the WAL it has replayed: when everything received is replayed and its WAL
receiver is running (connected to the primary), it is current (lag 0), however old its last
transaction is. Only when received WAL waits to be replayed (replay is slow or paused) is
the age of the last replayed transaction the lag: the replica shows nothing newer than it,
and the primary has committed since (the waiting WAL), so it is the bound on how stale a
read is. Without a WAL receiver (the primary is unreachable, or the replica restores from an
archive) the replica cannot know what it misses, and that same age is taken: on an idle
primary it overstates the lag, which only sends reads to the primary. No transaction
replayed since the replica started, with WAL waiting, is an unknown lag: the primary serves.
A server that is not in recovery (a promoted replica, or the mirror of the test database)
is current by definition.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from functools import wraps
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db import Error as DatabaseError
from django.db.models import Model
from django.http.response import HttpResponseBase

from mcp_app.conf import get_conf
from mcp_app.models import CallLog
from mcp_app.services import metrics

logger = logging.getLogger(__name__)

REPLICA = "replica"
# Only the call log is read from the replica: the big table the audit searches and exports.
REPLICA_MODELS: frozenset[type[Model]] = frozenset({CallLog})
# The response header that says where a scope's figures came from (docs/api.md).
HEADER = "X-Read-Source"

# Why a scope reads from the primary (bounded: the values of a metric's label).
LAGGING = "lagging"
UNREACHABLE = "unreachable"

_LAG_SQL = """
SELECT pg_is_in_recovery(),
       EXISTS (SELECT 1 FROM pg_stat_wal_receiver),
       pg_last_wal_receive_lsn() IS NULL
           OR pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn(),
       EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())::float8
"""


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """Whether the replica serves a scope's reads, and how far behind it was.

    ``lag_seconds`` is None when unknown (unreachable, or nothing replayed yet).
    """

    serves: bool
    lag_seconds: float | None
    reason: str = ""
    # What failed, for the log and /readyz (an exception's class, never its message).
    detail: str = ""

    @property
    def source(self) -> str:
        return REPLICA if self.serves else "primary"

    def describe(self) -> str:
        """The header's value: ``replica; lag=0.4`` or ``primary; reason=lagging; lag=42.0``."""
        parts = [self.source]
        if self.reason:
            parts.append(f"reason={self.reason}")
        if self.lag_seconds is not None:
            parts.append(f"lag={self.lag_seconds:.1f}")
        return "; ".join(parts)


_current: ContextVar[ReplicaState | None] = ContextVar("mcp_replica_reads", default=None)
_lock = threading.Lock()
_cached: tuple[float, ReplicaState] | None = None


def replica_configured() -> bool:
    """Whether ``DATABASE_REPLICA_URL`` gave this process a replica: a database other than
    the primary's. In tests the alias mirrors the test database (``TEST["MIRROR"]``), so it
    names the primary's, and every read stays on the primary's own alias."""
    replica = settings.DATABASES.get(REPLICA)
    if replica is None:
        return False
    primary = settings.DATABASES[DEFAULT_DB_ALIAS]
    return any(replica.get(key) != primary.get(key) for key in ("HOST", "PORT", "NAME"))


def measure_lag() -> float | None:
    """Seconds the replica is behind the primary (module docstring), None if unknown.

    Raises:
        django.db.Error: the replica did not answer.
    """
    replica = connections[REPLICA]
    try:
        with replica.cursor() as cursor:
            cursor.execute(_LAG_SQL)
            in_recovery, receiving, replayed_all, age = cursor.fetchone()
    except DatabaseError:
        # A connection that failed mid-query is not handed to the next scope.
        replica.close()
        raise
    if not in_recovery or (receiving and replayed_all):
        return 0.0
    return None if age is None else max(0.0, age)


def _measure() -> ReplicaState:
    bound = get_conf().MCP_REPLICA_MAX_LAG_SECONDS
    try:
        lag = measure_lag()
    except DatabaseError as exc:
        # The class only: a psycopg message may carry the server's address.
        return ReplicaState(False, None, UNREACHABLE, type(exc).__name__)
    if lag is None:
        return ReplicaState(False, None, LAGGING, "lag unknown")
    if lag > bound:
        return ReplicaState(False, lag, LAGGING)
    return ReplicaState(True, lag)


def replica_state(*, fresh: bool = False) -> ReplicaState:
    """Whether the replica may serve now: measured at most ``MCP_REPLICA_CHECK_SECONDS`` ago
    in this process (or now, with ``fresh``)."""
    global _cached
    interval = get_conf().MCP_REPLICA_CHECK_SECONDS
    # One measurement at a time: scopes arriving meanwhile wait for it, then reuse it.
    with _lock:
        now = time.monotonic()
        if not fresh and _cached is not None and now - _cached[0] < interval:
            return _cached[1]
        previous = _cached[1] if _cached is not None else None
        state = _measure()
        _cached = (now, state)
    metrics.REPLICA_LAG.set(state.lag_seconds if state.lag_seconds is not None else -1)
    if previous is None or previous.serves != state.serves:
        if state.serves:
            logger.info("Call-log reads go to the replica (%.1f s behind)", state.lag_seconds)
        else:
            logger.warning(
                "Call-log reads fall back to the primary: replica %s %s",
                state.reason,
                state.detail or f"{state.lag_seconds} s behind",
            )
    return state


@contextlib.contextmanager
def reading_from_replica() -> Iterator[ReplicaState | None]:
    """Send this scope's call-log reads to the replica if it may serve; yield its state
    (None without a replica, or inside a transaction, where reads stay on the primary)."""
    if not replica_configured() or connections[DEFAULT_DB_ALIAS].in_atomic_block:
        yield None
        return
    state = replica_state()
    metrics.REPLICA_READS.labels(state.source, state.reason).inc()
    token = _current.set(state)
    try:
        yield state
    except DatabaseError:
        if state.serves:
            _forget()  # the replica may be what failed: the next scope measures it afresh
        raise
    finally:
        _current.reset(token)


def _forget() -> None:
    global _cached
    with _lock:
        _cached = None


def current_read_state() -> ReplicaState | None:
    """The state of the replica scope this code runs in (None outside one)."""
    return _current.get()


View = Callable[..., HttpResponseBase]


def replica_reads(view: View) -> View:
    """Run ``view`` in ``reading_from_replica()`` and name its source in ``HEADER``."""

    @wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> HttpResponseBase:
        with reading_from_replica() as state:
            response = view(*args, **kwargs)
        if state is not None:
            response[HEADER] = state.describe()
        return response

    return wrapped


class ReplicaRouter:
    """Send call-log reads inside ``reading_from_replica()`` to the replica; nothing else.

    Writes always go to the primary, also of a row read from the replica (Django would
    otherwise write where the row came from). The replica is never migrated: it replays the
    primary's schema.
    """

    def db_for_read(self, model: type[Model], **hints: Any) -> str | None:
        state = _current.get()
        if (
            state is not None
            and state.serves
            and model in REPLICA_MODELS
            and not connections[DEFAULT_DB_ALIAS].in_atomic_block
        ):
            return REPLICA
        return None

    def db_for_write(self, model: type[Model], **hints: Any) -> str:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Model, obj2: Model, **hints: Any) -> bool | None:
        # One database, two ways to reach it.
        if {obj1._state.db, obj2._state.db} <= {DEFAULT_DB_ALIAS, REPLICA}:
            return True
        return None

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return False if db == REPLICA else None
