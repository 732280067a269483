"""The call log's time partitions on PostgreSQL: the upgrade from one table, upkeep, dropping.

On PostgreSQL ``mcp_app_calllog`` is partitioned by range of ``created_at``: one partition per
``MCP_CALL_LOG_PARTITION_DAYS`` (aligned on UTC midnights), created ahead by the upkeep job
``call_log_partitions`` and at migrate time, a default partition that catches a row whose day
has none (never lost), and, on an upgraded installation, ``mcp_app_calllog_legacy``: the table
as it was, attached without copying a row, until retention drops it. The database's primary
key is ``(id, created_at)`` (PostgreSQL wants the partition key in it); Django's pk stays
``id``, still unique: one sequence numbers every row. SQLite (the embedded default) keeps one
plain table, and every function here does nothing there.

Locks (docs/operations.md, "Call-log partitions"): a new partition is built as a table of its
own and then attached, which takes SHARE UPDATE EXCLUSIVE on the parent (reads and writes go
on) and ACCESS EXCLUSIVE on the default partition only while PostgreSQL checks that it holds
no row of the new range (it is empty but for strays). Dropping a partition takes ACCESS
EXCLUSIVE on the parent for a moment; it waits at most ``LOCK_TIMEOUT_MS`` for it (so it
never queues the writer behind a long export) and tries again later.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from mcp_app.conf import get_conf

logger = logging.getLogger(__name__)

TABLE = "mcp_app_calllog"
DEFAULT_PARTITION = f"{TABLE}_default"
LEGACY_PARTITION = f"{TABLE}_legacy"
# The CHECK that lets the legacy table be attached without a scan under an exclusive lock.
LEGACY_BOUND_CHECK = "calllog_legacy_bound"
# The legacy table's new primary key (id, created_at), built concurrently before the swap.
LEGACY_KEY = f"{TABLE}_pkey_legacy"
# Two upkeeps (or an upkeep and a migrate) at once: the second waits here, then finds the
# partitions the first made.
ADVISORY_LOCK = 0x63616C6C  # "call"
# How long a brief exclusive step waits for its lock before giving up (and trying again).
LOCK_TIMEOUT_MS = 2000
LOCK_ATTEMPTS = 5
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_BOUND = re.compile(r"FOR VALUES FROM \((.+?)\) TO \((.+?)\)")
_INDEX = re.compile(r"^CREATE (UNIQUE )?INDEX (\S+) ON (?:ONLY )?(\S+) (USING .*)$")


@dataclass(frozen=True)
class Partition:
    name: str
    # None: unbounded (MINVALUE) below, or the default partition (both None).
    start: datetime | None
    end: datetime | None

    @property
    def is_default(self) -> bool:
        return self.start is None and self.end is None


def is_partitioned(*, using: str = DEFAULT_DB_ALIAS) -> bool:
    connection = connections[using]
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [TABLE])
        row = cursor.fetchone()
    return row is not None and row[0] == "p"


def call_log_partitions(*, using: str = DEFAULT_DB_ALIAS) -> list[Partition]:
    """The call log's partitions, oldest first, the default one last; [] when not partitioned."""
    if not is_partitioned(using=using):
        return []
    with connections[using].cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, pg_get_expr(c.relpartbound, c.oid)
            FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = to_regclass(%s)
            """,
            [TABLE],
        )
        rows = cursor.fetchall()
    found = [_partition(name, bound) for name, bound in rows]
    return sorted(found, key=lambda p: (p.is_default, p.start or datetime.min.replace(tzinfo=UTC)))


def _partition(name: str, bound: str) -> Partition:
    if bound == "DEFAULT":
        return Partition(name, None, None)
    match = _BOUND.search(bound)
    if match is None:
        raise ValueError(f"unexpected partition bound of {name}: {bound}")
    return Partition(name, _bound_value(match[1]), _bound_value(match[2]))


def _bound_value(text: str) -> datetime | None:
    if text == "MINVALUE":
        return None
    if text == "MAXVALUE":
        return datetime.max.replace(tzinfo=UTC)
    return datetime.fromisoformat(text.strip("'")).astimezone(UTC)


def partition_days() -> int:
    """``MCP_CALL_LOG_PARTITION_DAYS``, checked: a partition covers one day or more."""
    days = get_conf().MCP_CALL_LOG_PARTITION_DAYS
    if days < 1:
        raise ImproperlyConfigured(
            f"MCP_CALL_LOG_PARTITION_DAYS must be a whole number of days, 1 or more (not {days})"
        )
    return days


def slot_start(moment: datetime, *, days: int) -> datetime:
    """The start of the partition slot holding ``moment``: UTC midnights, every ``days``."""
    whole = (moment.astimezone(UTC) - EPOCH) // timedelta(days=days)
    return EPOCH + whole * timedelta(days=days)


def _name_for(start: datetime) -> str:
    suffix = start.strftime("p%Y%m%d")
    return suffix if (start.hour, start.minute) == (0, 0) else start.strftime("p%Y%m%d_%H%M")


def _q(cursor: CursorWrapper, name: str) -> str:
    database: BaseDatabaseWrapper = cursor.db  # django-stubs leave CursorWrapper.db untyped
    return database.ops.quote_name(name)


def _literal(moment: datetime) -> str:
    return "'" + moment.astimezone(UTC).isoformat() + "'"


def _parent_indexes(cursor: CursorWrapper) -> list[tuple[str, str]]:
    """(name, definition) of the parent's indexes that are not its primary key."""
    cursor.execute(
        """
        SELECT i.relname, pg_get_indexdef(x.indexrelid)
        FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
        WHERE x.indrelid = to_regclass(%s) AND NOT x.indisprimary
        ORDER BY i.relname
        """,
        [TABLE],
    )
    return list(cursor.fetchall())


def _primary_key(cursor: CursorWrapper, table: str) -> tuple[str, str] | None:
    cursor.execute(
        """
        SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
        WHERE conrelid = to_regclass(%s) AND contype = 'p'
        """,
        [table],
    )
    row = cursor.fetchone()
    return (row[0], row[1]) if row else None


def _create_partition(cursor: CursorWrapper, name: str, suffix: str, bound: str) -> None:
    """Build ``name`` as a table of its own with the parent's indexes (named after the
    parent's, plus ``_<suffix>``), move any stray rows of its range out of the default
    partition, and attach it: no ACCESS EXCLUSIVE lock on the parent."""
    table = _q(cursor, TABLE)
    partition = _q(cursor, name)
    cursor.execute(
        f"CREATE TABLE {partition} (LIKE {table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
    )
    primary = _primary_key(cursor, TABLE)
    if primary is not None:
        key_name, definition = primary
        cursor.execute(
            f"ALTER TABLE {partition} ADD CONSTRAINT {_q(cursor, f'{key_name}_{suffix}')} "
            f"{definition}"
        )
    for index, definition in _parent_indexes(cursor):
        match = _INDEX.match(definition)
        if match is None:
            raise ValueError(f"unexpected index definition: {definition}")
        unique, _name, _table, rest = match.groups()
        cursor.execute(
            f"CREATE {unique or ''}INDEX {_q(cursor, f'{index}_{suffix}')} ON {partition} {rest}"
        )
    if bound != "DEFAULT" and _exists(cursor, DEFAULT_PARTITION):
        low, high = _BOUND.search(bound).groups()  # type: ignore[union-attr]
        cursor.execute(
            f"WITH moved AS (DELETE FROM {_q(cursor, DEFAULT_PARTITION)} "
            f"WHERE created_at >= {low} AND created_at < {high} RETURNING *) "
            f"INSERT INTO {partition} SELECT * FROM moved"
        )
    cursor.execute(f"ALTER TABLE {table} ATTACH PARTITION {partition} {bound}")


def _exists(cursor: CursorWrapper, name: str) -> bool:
    cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
    return bool(cursor.fetchone()[0])


def _ranges_to_create(
    existing: list[Partition], *, since: datetime, until: datetime, days: int
) -> list[tuple[datetime, datetime]]:
    """The slots from the one holding ``since`` to the one holding ``until``, less what the
    existing partitions cover (a slot cut by an older partition's end keeps its rest)."""
    taken = [
        (p.start or datetime.min.replace(tzinfo=UTC), p.end)
        for p in existing
        if not p.is_default and p.end is not None
    ]
    wanted = []
    start = slot_start(since, days=days)
    while start <= until:
        end = start + timedelta(days=days)
        low = start
        for taken_start, taken_end in sorted(taken):
            if taken_start <= low < taken_end:
                low = taken_end
        if low < end and not any(s < end and low < e for s, e in taken):
            wanted.append((low, end))
        start = end
    return wanted


def call_log_partitions_ensure(
    *,
    ahead_days: int | None = None,
    since: datetime | None = None,
    now: datetime | None = None,
    using: str = DEFAULT_DB_ALIAS,
) -> list[str]:
    """Create the default partition and every partition from ``since`` (default: now) to
    ``ahead_days`` past now that is missing; return the names created.

    Idempotent, and safe to run twice at once (an advisory lock orders the runs). A range
    whose rows went to the default partition gets them moved into its new partition.
    """
    if not is_partitioned(using=using):
        return []
    conf = get_conf()
    days = partition_days()
    ahead = conf.MCP_CALL_LOG_PARTITIONS_AHEAD_DAYS if ahead_days is None else ahead_days
    if ahead < 0:
        raise ImproperlyConfigured(f"Call-log partitions ahead: {ahead} days is negative")
    now = now or timezone.now()
    created: list[str] = []
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ADVISORY_LOCK])
        existing = call_log_partitions(using=using)
        if not any(p.is_default for p in existing):
            _create_partition(cursor, DEFAULT_PARTITION, "default", "DEFAULT")
            created.append(DEFAULT_PARTITION)
        for start, end in _ranges_to_create(
            existing, since=since or now, until=now + timedelta(days=ahead), days=days
        ):
            suffix = _name_for(start)
            name = f"{TABLE}_{suffix}"
            bound = f"FOR VALUES FROM ({_literal(start)}) TO ({_literal(end)})"
            _create_partition(cursor, name, suffix, bound)
            created.append(name)
    if created:
        logger.info("Call-log partitions created: %s", ", ".join(created))
    return created


def call_log_partitions_after_migrate(*, using: str = DEFAULT_DB_ALIAS, **kwargs: Any) -> None:
    """``post_migrate``: each ``migrate`` (a deploy's migrate job) makes the days ahead too."""
    call_log_partitions_ensure(using=using)


def call_log_partitions_drop(
    *, before: datetime, using: str = DEFAULT_DB_ALIAS
) -> tuple[int, datetime | None]:
    """Drop every partition whose range ends at or before ``before``; return how many rows
    they held, and the end of the newest partition left in place because its lock was not
    granted (its rows stay for the next run; None when every one went)."""
    dropped = 0
    kept_until: datetime | None = None
    for partition in call_log_partitions(using=using):
        if partition.is_default or partition.end is None or partition.end > before:
            continue
        rows = _drop_partition(partition.name, using=using)
        if rows is None:
            kept_until = max(kept_until or partition.end, partition.end)
        else:
            dropped += rows
    return dropped, kept_until


def _drop_partition(name: str, *, using: str) -> int | None:
    connection = connections[using]
    for attempt in range(LOCK_ATTEMPTS):
        try:
            with transaction.atomic(using=using), connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = {int(LOCK_TIMEOUT_MS)}")
                partition = _q(cursor, name)
                # SHARE: no row can arrive between the count and the drop.
                cursor.execute(f"LOCK TABLE {partition} IN SHARE MODE")
                cursor.execute(f"SELECT count(*) FROM {partition}")
                rows = int(cursor.fetchone()[0])
                cursor.execute(f"DROP TABLE {partition}")
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != "55P03":  # lock_not_available
                raise
            logger.warning(
                "Call-log partition %s: lock not granted (attempt %d of %d)",
                name, attempt + 1, LOCK_ATTEMPTS,
            )  # fmt: skip
            time.sleep(0.5 * (attempt + 1))  # back off before asking again (not a wait on state)
            continue
        logger.info("Call-log partition %s dropped (%d rows)", name, rows)
        return rows
    return None


# --- the upgrade: one plain table to a partitioned one, without copying a row -----------------


def convert_to_partitioned(*, using: str = DEFAULT_DB_ALIAS, now: datetime | None = None) -> bool:
    """Turn the plain ``mcp_app_calllog`` into a partitioned table whose first partition is
    the old table itself (renamed ``mcp_app_calllog_legacy``); return False when there was
    nothing to do. Runs outside a transaction (autocommit): the long steps (VALIDATE, the
    concurrent index builds) let reads and writes go on; only the last step, a few catalog
    changes, holds ACCESS EXCLUSIVE on the table, and it copies nothing.
    """
    connection = connections[using]
    if connection.vendor != "postgresql" or is_partitioned(using=using):
        return False
    if connection.in_atomic_block:
        raise RuntimeError("convert_to_partitioned runs outside a transaction (autocommit)")
    now = now or timezone.now()
    days = partition_days()
    with connection.cursor() as cursor:
        table = _q(cursor, TABLE)
        # 1. The legacy table's range: everything before the slot after next, and past any
        # row dated later (a skewed clock), so that no insert of a running process fails.
        cursor.execute(f"SELECT max(created_at) FROM {table}")
        newest = cursor.fetchone()[0]
        bound = slot_start(now, days=days) + timedelta(days=2 * days)
        if newest is not None and newest >= bound:
            bound = slot_start(newest, days=days) + timedelta(days=days)
        # 2. CHECK (created_at < bound): added NOT VALID (a moment's lock), then validated
        # with SHARE UPDATE EXCLUSIVE (a scan during which reads and writes go on).
        cursor.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = to_regclass(%s) AND conname = %s",
            [TABLE, LEGACY_BOUND_CHECK],
        )
        if (row := cursor.fetchone()) is not None:
            bound = _check_bound(row[0])
        else:
            _brief(
                cursor,
                f"ALTER TABLE {table} ADD CONSTRAINT {_q(cursor, LEGACY_BOUND_CHECK)} "
                f"CHECK (created_at < {_literal(bound)}) NOT VALID",
            )
        cursor.execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT {_q(cursor, LEGACY_BOUND_CHECK)}")
        # 3. The legacy partition's primary key (id, created_at), built concurrently (writes
        # go on) so that attaching it builds nothing: its other indexes are the parent's.
        _drop_if_invalid(cursor, LEGACY_KEY)
        cursor.execute(
            f"CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS {_q(cursor, LEGACY_KEY)} "
            f"ON {table} (id, created_at)"
        )
        # 4. The swap: catalog changes only, under one short ACCESS EXCLUSIVE lock.
        for attempt in range(LOCK_ATTEMPTS * 6):
            try:
                with transaction.atomic(using=using):
                    cursor.execute(f"SET LOCAL lock_timeout = {int(LOCK_TIMEOUT_MS)}")
                    _swap(cursor, bound=bound, now=now, days=days)
                break
            except OperationalError as exc:
                if getattr(exc.__cause__, "sqlstate", None) != "55P03":
                    raise
                logger.warning("Call-log upgrade: lock not granted (attempt %d)", attempt + 1)
                time.sleep(0.5)  # back off before asking again (not a wait on state)
        else:
            raise RuntimeError(
                "The call log's table stayed busy: stop long audit exports and migrate again"
            )
    return True


def _check_bound(definition: str) -> datetime:
    match = re.search(r"'([^']+)'", definition)
    if match is None:
        raise ValueError(f"unexpected {LEGACY_BOUND_CHECK}: {definition}")
    return datetime.fromisoformat(match[1]).astimezone(UTC)


def _drop_if_invalid(cursor: CursorWrapper, index: str) -> None:
    """An index a failed CONCURRENTLY build left behind (invalid) is dropped and rebuilt."""
    cursor.execute(
        "SELECT NOT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", [index]
    )
    row = cursor.fetchone()
    if row is not None and row[0]:
        cursor.execute(f"DROP INDEX CONCURRENTLY {_q(cursor, index)}")


def _brief(cursor: CursorWrapper, sql: str) -> None:
    """Run one statement needing a moment's exclusive lock, never queueing for long."""
    connection = cursor.db
    for attempt in range(LOCK_ATTEMPTS * 6):
        try:
            with transaction.atomic(using=connection.alias):
                cursor.execute(f"SET LOCAL lock_timeout = {int(LOCK_TIMEOUT_MS)}")
                cursor.execute(sql)
            return
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != "55P03":
                raise
            logger.warning("Call-log upgrade: lock not granted (attempt %d)", attempt + 1)
            time.sleep(0.5)  # back off before asking again (not a wait on state)
    raise RuntimeError("The call log's table stayed busy: stop long audit exports and retry")


def _swap(cursor: CursorWrapper, *, bound: datetime, now: datetime, days: int) -> None:
    table = _q(cursor, TABLE)
    legacy = _q(cursor, LEGACY_PARTITION)
    cursor.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
    # What the new parent takes over: the secondary indexes (but the key built above), the
    # id sequence's position, the primary key's name.
    indexes = [(name, sql) for name, sql in _parent_indexes(cursor) if name != LEGACY_KEY]
    primary = _primary_key(cursor, TABLE)
    cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [TABLE])
    sequence = cursor.fetchone()[0]
    cursor.execute(f"SELECT coalesce(max(id), 0) FROM {table}")
    top = int(cursor.fetchone()[0])
    if sequence is not None:
        cursor.execute(f"SELECT last_value, is_called FROM {sequence}")
        last_value, is_called = cursor.fetchone()
        top = max(top, int(last_value) if is_called else int(last_value) - 1)
    cursor.execute(
        "SELECT attidentity FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = 'id'",
        [TABLE],
    )
    identity = cursor.fetchone()[0]

    cursor.execute(f"ALTER TABLE {table} RENAME TO {legacy}")
    if identity:
        cursor.execute(f"ALTER TABLE {legacy} ALTER COLUMN id DROP IDENTITY")
    else:
        cursor.execute(f"ALTER TABLE {legacy} ALTER COLUMN id DROP DEFAULT")
        if sequence is not None:
            cursor.execute(f"DROP SEQUENCE {sequence}")
    if primary is not None:
        cursor.execute(f"ALTER TABLE {legacy} DROP CONSTRAINT {_q(cursor, primary[0])}")
    key_name = primary[0] if primary is not None else f"{TABLE}_pkey"
    cursor.execute(
        f"ALTER TABLE {legacy} ADD CONSTRAINT {_q(cursor, f'{key_name}_legacy')} "
        f"PRIMARY KEY USING INDEX {_q(cursor, LEGACY_KEY)}"
    )
    for name, _sql in indexes:
        cursor.execute(f"ALTER INDEX {_q(cursor, name)} RENAME TO {_q(cursor, f'{name}_legacy')}")

    # The parent: the same columns, defaults and CHECKs (but the legacy bound), one sequence.
    cursor.execute(
        f"CREATE TABLE {table} (LIKE {legacy} INCLUDING DEFAULTS INCLUDING CONSTRAINTS) "
        "PARTITION BY RANGE (created_at)"
    )
    cursor.execute(f"ALTER TABLE {table} DROP CONSTRAINT {_q(cursor, LEGACY_BOUND_CHECK)}")
    sequence_name = _q(cursor, f"{TABLE}_id_seq")
    cursor.execute(f"CREATE SEQUENCE {sequence_name} OWNED BY {table}.id")
    if top > 0:
        cursor.execute("SELECT setval(%s, %s, true)", [f"{TABLE}_id_seq", top])
    cursor.execute(
        f"ALTER TABLE {table} ALTER COLUMN id SET DEFAULT nextval('{TABLE}_id_seq'::regclass)"
    )
    cursor.execute(
        f"ALTER TABLE {table} ADD CONSTRAINT {_q(cursor, key_name)} PRIMARY KEY (id, created_at)"
    )
    # Each index as it was (its definition names the table, which is now the parent).
    for _name, sql in indexes:
        cursor.execute(sql)
    # Attached without a scan (the validated CHECK proves the range) or an index build (each
    # index above finds its twin on the legacy table).
    cursor.execute(
        f"ALTER TABLE {table} ATTACH PARTITION {legacy} "
        f"FOR VALUES FROM (MINVALUE) TO ({_literal(bound)})"
    )
    cursor.execute(f"ALTER TABLE {legacy} DROP CONSTRAINT {_q(cursor, LEGACY_BOUND_CHECK)}")
    # The default partition and the days ahead, as upkeep makes them.
    cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ADVISORY_LOCK])
    _create_partition(cursor, DEFAULT_PARTITION, "default", "DEFAULT")
    ahead = get_conf().MCP_CALL_LOG_PARTITIONS_AHEAD_DAYS
    for start, end in _ranges_to_create(
        [Partition(LEGACY_PARTITION, None, bound)],
        since=now,
        until=now + timedelta(days=ahead),
        days=days,
    ):
        suffix = _name_for(start)
        _create_partition(
            cursor,
            f"{TABLE}_{suffix}",
            suffix,
            f"FOR VALUES FROM ({_literal(start)}) TO ({_literal(end)})",
        )
