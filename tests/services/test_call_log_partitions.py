"""The call log partitioned by time on PostgreSQL (issue #30): rows land in their day's
partition, the default partition catches the rest, partitions are made ahead idempotently
(two upkeeps at once included), and retention drops whole partitions.

The test database was migrated a moment ago, so its ``mcp_app_calllog_legacy`` partition
(the table as it was) covers everything up to the day after tomorrow; these tests work in
the days after that. "A moment ago" may be yesterday: a run that starts before midnight
migrates on one day and tests on the next, so no test counts days from its own clock
where the migration counted from its own.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.sql import emit_post_migrate_signal
from django.db import connection, connections
from django.utils import timezone

from mcp_app.models import CallLog
from mcp_app.services.calllog import partitions
from mcp_app.services.calllog.partitions import (
    call_log_partitions,
    call_log_partitions_ensure,
    slot_start,
)
from mcp_app.services.calllog.retention import call_log_purge

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _postgresql() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("partitions are PostgreSQL's")


def row(created_at: datetime, **fields: Any) -> CallLog:
    return CallLog.objects.create(created_at=created_at, http_method="POST", status="ok", **fields)


def partition_of(record: CallLog) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tableoid::regclass::text FROM mcp_app_calllog WHERE id = %s", [record.pk]
        )
        return cursor.fetchone()[0]


def day_name(moment: datetime) -> str:
    return "mcp_app_calllog_" + slot_start(moment, days=1).strftime("p%Y%m%d")


def test_the_migrated_table_is_partitioned_with_a_legacy_default_and_days_ahead():
    found = call_log_partitions()
    names = [p.name for p in found]
    assert names[0] == "mcp_app_calllog_legacy" and found[0].start is None
    assert names[-1] == "mcp_app_calllog_default" and found[-1].is_default
    # The migration made the days up to a week past its own now, whose day the legacy
    # range tells: it ends at the start of the day after the next.
    assert found[0].end is not None
    migrated_on = found[0].end - timedelta(days=2)
    assert found[-2].end is not None and found[-2].end >= migrated_on + timedelta(days=7 + 1)
    # Consecutive ranges, no gap, no overlap.
    ranged = found[:-1]
    assert all(a.end == b.start for a, b in zip(ranged, ranged[1:], strict=False))
    # Each partition has the parent's indexes under names that say which.
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s", [names[1]])
        indexes = {name for (name,) in cursor.fetchall()}
    suffix = names[1].removeprefix("mcp_app_calllog_")
    assert {f"mcp_app_calllog_pkey_{suffix}", f"calllog_created_{suffix}"} <= indexes
    assert f"calllog_status_id_{suffix}" in indexes


def test_rows_land_in_their_days_partition_and_strays_in_the_default():
    call_log_partitions_ensure(ahead_days=7)
    now = timezone.now()
    third = row(now + timedelta(days=3))
    fourth = row(now + timedelta(days=4))
    far = row(now + timedelta(days=400))
    assert partition_of(third) == day_name(third.created_at)
    assert partition_of(fourth) == day_name(fourth.created_at)
    assert partition_of(far) == "mcp_app_calllog_default"
    # Ids stay unique and growing across partitions (one sequence), and the ORM reads by pk.
    assert third.pk < fourth.pk < far.pk
    assert CallLog.objects.get(pk=far.pk).created_at == far.created_at


def test_a_new_partition_takes_the_default_partitions_rows_of_its_range():
    later = timezone.now() + timedelta(days=400)
    stray = row(later)
    other = row(later + timedelta(days=30))
    created = call_log_partitions_ensure(now=later, ahead_days=0)
    assert created == [day_name(later)]
    assert partition_of(stray) == day_name(later)
    assert partition_of(other) == "mcp_app_calllog_default"
    assert CallLog.objects.filter(pk__in=[stray.pk, other.pk]).count() == 2


def test_ensure_is_idempotent_and_the_command_lists_partitions():
    later = timezone.now() + timedelta(days=200)
    first = call_log_partitions_ensure(now=later, ahead_days=2)
    assert first == [day_name(later + timedelta(days=n)) for n in range(3)]
    assert call_log_partitions_ensure(now=later, ahead_days=2) == []
    # Today's week ahead too, which the command makes: the migration made it from its own
    # day, which may be yesterday.
    call_log_partitions_ensure()
    from io import StringIO

    out = StringIO()
    call_command("call_log_partitions", "--list", stdout=out)
    assert "Created 0 call-log partition(s)." in out.getvalue()
    assert f"{first[0]}  " in out.getvalue()
    assert "mcp_app_calllog_default  DEFAULT" in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_two_upkeeps_at_once_create_each_partition_once():
    later = timezone.now() + timedelta(days=300)
    barrier = threading.Barrier(2)
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def upkeep() -> None:
        try:
            barrier.wait(timeout=30)
            results.append(call_log_partitions_ensure(now=later, ahead_days=4))
        except BaseException as exc:  # noqa: BLE001  (reported below)
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=upkeep) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    try:
        assert not errors, errors
        expected = [day_name(later + timedelta(days=n)) for n in range(5)]
        assert sorted(results, key=len) == [[], expected]
        names = [p.name for p in call_log_partitions()]
        assert len(names) == len(set(names))
    finally:
        with connection.cursor() as cursor:
            for name in [name for made in results for name in made]:
                cursor.execute(f'DROP TABLE IF EXISTS "{name}"')


def test_purge_drops_whole_partitions_and_deletes_only_in_the_straddling_one():
    call_log_partitions_ensure(ahead_days=7)
    now = timezone.now()
    s3 = slot_start(now + timedelta(days=3), days=1)
    s4 = s3 + timedelta(days=1)
    rows = [row(s3 + timedelta(hours=1)), row(s3 + timedelta(hours=2))]
    rows.append(row(s4 + timedelta(hours=1)))
    kept = row(s4 + timedelta(hours=20))
    cutoff = s4 + timedelta(hours=12)
    expired = CallLog.objects.filter(created_at__lt=cutoff).count()
    assert expired >= 3

    # A negative age puts the cutoff in the future: the legacy partition and the days up to
    # the fourth from now are past it.
    deleted = call_log_purge(older_than=now - cutoff)

    assert deleted == expired
    assert not CallLog.objects.filter(created_at__lt=cutoff).exists()
    assert CallLog.objects.filter(pk=kept.pk).exists()
    names = {p.name for p in call_log_partitions()}
    assert "mcp_app_calllog_legacy" not in names
    assert day_name(s3) not in names
    assert day_name(s4) in names  # it straddles the cutoff: its rows went one by one
    assert "mcp_app_calllog_default" in names


def test_a_partition_whose_lock_is_not_granted_is_kept_whole_for_the_next_run(
    monkeypatch: pytest.MonkeyPatch,
):
    call_log_partitions_ensure(ahead_days=7)
    now = timezone.now()
    s3 = slot_start(now + timedelta(days=3), days=1)
    busy = row(s3 + timedelta(hours=1))
    # Another session reads the partition (as a long export would) while the purge runs.
    monkeypatch.setattr(partitions, "LOCK_TIMEOUT_MS", 50)
    monkeypatch.setattr(partitions, "LOCK_ATTEMPTS", 1)
    reader_ready = threading.Event()
    release = threading.Event()

    def reader() -> None:
        other = connections.create_connection("default")
        try:
            with other.cursor() as cursor:
                cursor.execute("BEGIN")
                cursor.execute(f'LOCK TABLE "{day_name(s3)}" IN ACCESS SHARE MODE')
                reader_ready.set()
                release.wait(30)
                cursor.execute("ROLLBACK")
        finally:
            other.close()

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        assert reader_ready.wait(30)
        # The partition was made at migrate time (committed), so the other session sees it.
        call_log_purge(older_than=now - (s3 + timedelta(days=1)))
    finally:
        release.set()
        thread.join(30)
    assert day_name(s3) in {p.name for p in call_log_partitions()}
    assert CallLog.objects.filter(pk=busy.pk).exists()


def test_each_migrate_makes_the_days_ahead():
    day = slot_start(timezone.now() + timedelta(days=5), days=1)
    with connection.cursor() as cursor:
        cursor.execute(f'DROP TABLE "{day_name(day)}"')
    assert day_name(day) not in {p.name for p in call_log_partitions()}
    # What manage.py migrate sends when it ends, whether or not it applied a migration.
    emit_post_migrate_signal(verbosity=0, interactive=False, db="default")
    assert day_name(day) in {p.name for p in call_log_partitions()}


def test_a_partition_of_no_days_is_refused_and_changes_nothing(settings: Any):
    before = call_log_partitions()
    settings.MCP_CALL_LOG_PARTITION_DAYS = "0"
    later = timezone.now() + timedelta(days=500)
    with pytest.raises(ImproperlyConfigured, match="MCP_CALL_LOG_PARTITION_DAYS"):
        call_log_partitions_ensure(now=later)
    settings.MCP_CALL_LOG_PARTITION_DAYS = "1"
    with pytest.raises(ImproperlyConfigured, match="negative"):
        call_log_partitions_ensure(now=later, ahead_days=-1)
    assert call_log_partitions() == before
