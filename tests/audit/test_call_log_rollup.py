"""The call log's rollups (issue #30): the charts read them and show what the call log holds.

A generated day of calls (three endpoints of two teams, try-it runs, every status, callers,
client programs, latencies from 0.01 ms to 20 s and none) is rolled up, then rows arrive late
into rolled-up minutes and into the open tail: the stats and overview fed by the rollups must
count exactly what the raw aggregation counts and give percentiles within one histogram bin,
for a superuser and for a team member. The stats page's reads must not grow with rows.
"""

from __future__ import annotations

import dataclasses
import math
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection, connections
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from mcp_app.audit.forms import CallFilterForm
from mcp_app.audit.selectors import (
    CallFilter,
    CallStats,
    LatencyRow,
    Overview,
    call_log_overview,
    call_log_stats,
)
from mcp_app.models import CallLog, CallLogRollup, CallLogRollupMark
from mcp_app.models.call_log_rollup import BINS_PER_DECADE, LATENCY_EDGES
from mcp_app.services.calllog.retention import call_log_purge
from mcp_app.services.calllog.rollup import (
    CHUNK,
    HOUR,
    MINUTE,
    Measures,
    call_log_rollup,
    measures_by,
    raw_measures,
    rollup_measures,
    rollup_plan,
)
from tests.support.teams import World, two_teams

pytestmark = pytest.mark.django_db

# One histogram bin: the most a percentile estimate may be off by (and 0.1 ms near zero).
BIN = 10 ** (1 / BINS_PER_DECADE)
STATUSES = ("ok", "ok", "ok", "ok", "tool_error", "rejected", "running", "timed_out")


def _calls(world: World, count: int, *, start: datetime, end: datetime, seed: int) -> None:
    """``count`` varied rows with ``created_at`` in [start, end)."""
    rng = random.Random(seed)
    users = [world.alpha.member, world.beta.member, None]
    endpoints = [world.alpha.endpoint, world.beta.endpoint, world.site_endpoint, None]
    span = (end - start).total_seconds()
    rows = []
    for n in range(count):
        endpoint = rng.choice(endpoints)
        method = rng.choice(("tools/call", "tools/call", "tools/list", "resources/read"))
        duration = None if n % 17 == 0 else 10 ** rng.uniform(-2, 4.3)
        rows.append(
            CallLog(
                created_at=start + timedelta(seconds=rng.uniform(0, span)),
                duration_ms=duration,
                endpoint=endpoint,
                endpoint_slug=endpoint.slug if endpoint else rng.choice(("", "gone")),
                tool_team=world.alpha.group if endpoint is None and n % 2 else None,
                era=rng.choice(("modern", "legacy")),
                http_method="POST",
                rpc_method=method,
                target=f"tool_{rng.randrange(6)}" if method != "tools/list" else "",
                status=rng.choice(STATUSES),
                principal=rng.choice(users),
                client_id=rng.choice(("", "client-a", "client-b")),
                client_name=rng.choice(("", "claude-code", "inspector")),
                client_version=rng.choice(("1.0", "2.0")),
                client_info={"name": "x"} if n % 3 else None,
            )
        )
    CallLog.objects.bulk_create(rows, batch_size=1000)


@pytest.fixture
def world(db: None) -> World:
    return two_teams()


def _filters(world: World, *, member: bool) -> CallFilter:
    if not member:
        return CallFilter()
    form = CallFilterForm({}, user=world.alpha.member)
    assert form.is_valid()
    return form.call_filter()


def _close(estimate: float | None, exact: float | None) -> bool:
    if exact is None or estimate is None:
        return estimate is exact
    return exact / BIN - 0.1 <= estimate <= exact * BIN + 0.1


def _same_latency(rolled: list[LatencyRow], raw: list[LatencyRow]) -> None:
    exact = {row.name: row for row in raw}
    assert {row.name: (row.calls, row.errors) for row in rolled} == {
        row.name: (row.calls, row.errors) for row in raw
    }
    for row in rolled:
        for key in ("p50", "p95", "p99"):
            assert _close(getattr(row, key), getattr(exact[row.name], key)), (row.name, key)


def _same_stats(rolled: CallStats, raw: CallStats) -> None:
    assert rolled.estimated and not raw.estimated
    assert [(b.start, b.total, b.errors) for b in rolled.buckets] == [
        (b.start, b.total, b.errors) for b in raw.buckets
    ]
    for part in ("per_tool", "per_endpoint", "per_client"):
        _same_latency(getattr(rolled, part), getattr(raw, part))


def _same_overview(rolled: Overview, raw: Overview) -> None:
    for part in ("busiest", "failing", "slowest"):
        assert {row.name for row in getattr(rolled, part)} == {
            row.name for row in getattr(raw, part)
        } or part == "slowest"
    _same_latency(rolled.busiest, raw.busiest)
    for part in ("users", "clients", "client_programs"):
        assert sorted(getattr(rolled, part), key=str) == sorted(getattr(raw, part), key=str)


def test_rollup_fed_charts_show_what_the_call_log_holds(world: World) -> None:
    now = timezone.now()
    _calls(world, 3000, start=now - timedelta(hours=26), end=now - timedelta(minutes=3), seed=1)
    call_log_rollup(now=now - timedelta(minutes=2))
    # Late: rows of minutes and hours already rolled up, written after the run, then rolled
    # up by the next; and the open tail since it, read raw.
    _calls(world, 300, start=now - timedelta(hours=20), end=now - timedelta(minutes=3), seed=2)
    call_log_rollup(now=now - timedelta(minutes=1))
    _calls(world, 200, start=now - timedelta(minutes=1), end=now, seed=3)
    until = timezone.now()
    assert CallLogRollup.objects.filter(grain="hour").exists()

    for member in (False, True):
        filters = _filters(world, member=member)
        for span in (timedelta(hours=24), timedelta(hours=2), timedelta(days=2)):
            since = until - span
            _same_stats(
                call_log_stats(filters=filters, since=since, until=until),
                call_log_stats(filters=filters, since=since, until=until, rollups=False),
            )
        for narrowed in (
            filters,
            dataclasses.replace(filters, status="failed", method="tools/call"),
            dataclasses.replace(filters, tool="tool_3", method="tools/call"),
            dataclasses.replace(filters, user=world.alpha.member.username),
        ):
            since = until - timedelta(hours=24)
            _same_stats(
                call_log_stats(filters=narrowed, since=since, until=until),
                call_log_stats(filters=narrowed, since=since, until=until, rollups=False),
            )
        _same_overview(
            call_log_overview(since=until - timedelta(hours=24), idle_seconds=60, filters=filters),
            call_log_overview(
                since=until - timedelta(hours=24), idle_seconds=60, filters=filters, rollups=False
            ),
        )


def test_a_team_member_sees_only_their_teams_rollups(world: World) -> None:
    now = timezone.now()
    _calls(world, 600, start=now - timedelta(hours=5), end=now - timedelta(minutes=3), seed=4)
    call_log_rollup(now=now)
    client = Client()
    client.force_login(world.alpha.member)

    page = client.get(reverse("mcp_app:audit_stats"))

    stats = page.context["stats"]
    assert stats.estimated
    seen = (
        CallLog.objects.filter(created_at__gte=stats.since, created_at__lt=stats.until)
        .filter(endpoint=world.alpha.endpoint)
        .count()
        + CallLog.objects.filter(
            created_at__gte=stats.since, endpoint=None, tool_team=world.alpha.group
        ).count()
    )
    assert stats.total == seen
    assert {row.name for row in stats.per_endpoint} <= {world.alpha.endpoint.slug, "gone"}
    assert b"estimated from the call log" in page.content
    overview = client.get(reverse("mcp_app:audit_overview"))
    assert overview.context["overview"].estimated
    assert b"Estimated from the call log" in overview.content


def _rollup_rows() -> list[tuple[Any, ...]]:
    fields = [f.name for f in CallLogRollup._meta.concrete_fields if f.name != "id"]
    return sorted(CallLogRollup.objects.values_list(*fields), key=str)


def test_a_run_again_writes_the_same_rows_and_late_rows_reach_their_buckets(
    world: World,
) -> None:
    now = timezone.now().replace(second=30)
    _calls(world, 500, start=now - timedelta(hours=3), end=now - timedelta(minutes=5), seed=5)
    call_log_rollup(now=now)
    first = _rollup_rows()
    # Every bucket counted again (as if every row were new) gives the same rows.
    CallLogRollupMark.objects.update(prior_id=0)
    again = call_log_rollup(now=now)
    assert again.minutes > 100 and again.hours >= 3
    assert _rollup_rows() == first
    # A run a minute later counts that minute, not the rows the first run counted.
    assert call_log_rollup(now=now + MINUTE).minutes == 1

    # An id the last run could not see yet (its batch committed after the run read the
    # newest id), for a minute long rolled up.
    _calls(world, 50, start=now - timedelta(minutes=4), end=now - timedelta(minutes=3), seed=6)
    gap = CallLog.objects.order_by("-id")[25]
    CallLog.objects.filter(pk=gap.pk).delete()
    call_log_rollup(now=now + 2 * MINUTE)
    late_at = now - timedelta(hours=2, minutes=30)
    gap.created_at = late_at
    gap.save(force_insert=True)
    call_log_rollup(now=now + 3 * MINUTE)

    minute = late_at.replace(second=0, microsecond=0)
    hour = minute.replace(minute=0)
    for grain, start, step in (("minute", minute, MINUTE), ("hour", hour, timedelta(hours=1))):
        rolled = sum(
            CallLogRollup.objects.filter(grain=grain, bucket_start=start).values_list(
                "calls", flat=True
            )
        )
        raw = CallLog.objects.filter(created_at__gte=start, created_at__lt=start + step).count()
        assert rolled == raw, grain


def _stats_reads(client: Client) -> tuple[int, int, CallStats]:
    with CaptureQueriesContext(connection) as queries:
        page = client.get(reverse("mcp_app:audit_stats"))
    stats = page.context["stats"]
    plan = rollup_plan(since=stats.since, until=stats.until, hours=True)
    assert plan.rollups is not None
    read = CallLogRollup.objects.filter(plan.rollups).count()
    return len(queries), read, stats


def test_the_stats_page_reads_as_many_rollup_rows_whatever_the_number_of_calls(
    world: World,
) -> None:
    now = timezone.now()
    # Inside the page's last 24 hours however long the test takes, so both reads see all.
    start, end = now - timedelta(hours=23), now - timedelta(minutes=3)
    _calls(world, 2000, start=start, end=end, seed=7)
    # And a few before the page's range, so the rollups start before it.
    _calls(world, 5, start=now - timedelta(hours=30), end=now - timedelta(hours=29), seed=70)
    call_log_rollup(now=now)
    client = Client()
    client.force_login(world.superuser)
    queries, read, stats = _stats_reads(client)

    # The same calls again, in the same buckets: twice the rows, the same rollup rows.
    copies = list(CallLog.objects.all())
    for row in copies:
        row.pk = None
    CallLog.objects.bulk_create(copies, batch_size=1000)
    call_command("call_log_rollup", "--rebuild", "--backfill-days", "2")
    queries_after, read_after, stats_after = _stats_reads(client)

    assert (queries_after, read_after) == (queries, read)
    assert stats_after.total == 2 * stats.total
    # Hours for the day and minutes only at its two ends: bounded by the buckets.
    combos = CallLogRollup.objects.filter(grain="hour").values(
        "endpoint_id", "endpoint_slug", "tool_team_id", "rpc_method", "target", "status", "era",
        "principal_id", "client_id", "client_name", "client_version",
    ).distinct().count()  # fmt: skip
    assert read <= combos * (25 + 2 * 60)
    raw = rollup_plan(since=stats.since, until=stats.until, hours=True).raw
    assert sum(((b - a) for a, b in raw), timedelta()) <= 2 * MINUTE


def test_the_rollup_command_refuses_a_negative_backfill_and_is_on_the_schedule(
    world: World,
) -> None:
    with pytest.raises(CommandError, match="must not be negative"):
        call_command("call_log_rollup", "--backfill-days", "-1")
    assert not CallLogRollupMark.objects.exists()
    assert settings.CELERY_BEAT_SCHEDULE["call_log_rollup"]["task"] == (
        "mcp_app.upkeep.call_log_rollup"
    )


def test_without_rollups_the_charts_read_the_call_log_exactly(world: World) -> None:
    now = timezone.now()
    _calls(world, 200, start=now - timedelta(hours=2), end=now, seed=8)

    stats = call_log_stats(filters=CallFilter(), since=now - timedelta(hours=3), until=now)

    assert not stats.estimated
    assert stats.total == 200


def test_retention_takes_the_minute_rollups_with_their_rows_and_keeps_the_hours(
    world: World,
) -> None:
    now = timezone.now()
    _calls(world, 400, start=now - timedelta(hours=30), end=now - timedelta(minutes=3), seed=9)
    call_log_rollup(now=now)
    before = call_log_stats(filters=CallFilter(), since=now - timedelta(days=2), until=now)

    call_log_purge(older_than=timedelta(hours=12))

    cutoff = now - timedelta(hours=12)
    assert not CallLogRollup.objects.filter(
        grain="minute", bucket_start__lt=cutoff - MINUTE
    ).exists()
    assert CallLogRollup.objects.filter(grain="minute", bucket_start__gte=cutoff).exists()
    after = call_log_stats(filters=CallFilter(), since=now - timedelta(days=2), until=now)
    # By hour, the whole hours before the cutoff still count what their rows held.
    whole = [b for b in before.buckets if b.start + timedelta(hours=1) <= cutoff - MINUTE]
    assert whole and sum(b.total for b in whole) > 0
    kept = {b.start: b.total for b in after.buckets}
    assert all(kept[b.start] == b.total for b in whole[1:])


def test_the_charts_sql_counts_what_the_orms_aggregates_count(world: World) -> None:
    """The stats and overview add up ``measures_by`` (SQL written by hand, for speed); the
    upkeep job builds rows with the ORM's aggregates. Both must agree to the call, values on
    and either side of every histogram edge included."""
    now = timezone.now()
    _calls(world, 600, start=now - timedelta(hours=3), end=now - timedelta(minutes=3), seed=11)
    at = now - timedelta(hours=2)
    edges = [v for edge in LATENCY_EDGES for v in (math.nextafter(edge, 0), edge)]
    CallLog.objects.bulk_create(
        CallLog(created_at=at, duration_ms=duration, http_method="POST", rpc_method="tools/call",
                target="edge", status="ok" if n % 3 else "tool_error")
        for n, duration in enumerate([0.0, *edges, 2e6])
    )  # fmt: skip
    call_log_rollup(now=now)
    key = ("rpc_method", "target", "endpoint_slug", "client_name")

    for qs, measures in (
        (CallLog.objects.order_by(), raw_measures()),
        (CallLogRollup.objects.filter(grain="minute").order_by(), rollup_measures()),
        (CallLogRollup.objects.filter(grain="hour").order_by(), rollup_measures()),
    ):
        orm = {
            tuple(row[name] for name in key): Measures.of(row)
            for row in qs.values(*key).annotate(**measures)
        }
        sql = dict(measures_by(qs, key))
        assert orm.keys() == sql.keys() and len(sql) > 10
        for name, exact in orm.items():
            found = sql[name]
            assert found.duration_sum == pytest.approx(exact.duration_sum)
            assert dataclasses.replace(found, duration_sum=0) == dataclasses.replace(
                exact, duration_sum=0
            ), name
        assert sql[("tools/call", "edge", "", "")].histogram == [2] * (len(LATENCY_EDGES) + 1)
    # A filter that selects nothing before the database is asked (no endpoint in scope).
    assert measures_by(CallLog.objects.filter(endpoint_id__in=[]), key) == []


@pytest.fixture
def committed_world(transactional_db: None) -> World:
    return two_teams()


def _mark_seen_elsewhere() -> Any:
    """The mark as another connection sees it (what has been committed)."""
    try:
        mark = CallLogRollupMark.objects.first()
        return None if mark is None else mark.minute_until
    finally:
        connections.close_all()


@pytest.mark.django_db(transaction=True)
def test_a_first_run_commits_its_backfill_hour_by_hour(committed_world: World) -> None:
    now = timezone.now().replace(minute=30, second=0, microsecond=0)
    _calls(committed_world, 500, start=now - timedelta(hours=5), end=now, seed=12)
    seen: list[Any] = []

    def at_each_lock(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if "FOR UPDATE" in sql and "calllogrollupmark" in sql:
            with ThreadPoolExecutor(1) as other:
                seen.append(other.submit(_mark_seen_elsewhere).result(timeout=30))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(at_each_lock):
        run = call_log_rollup(now=now)

    start = CallLogRollupMark.objects.get().start
    assert CHUNK == HOUR and start == now.replace(minute=0) - 5 * HOUR
    # Each hour was committed, and seen by others, before the next began.
    assert seen == [start + k * HOUR for k in range(6)]
    assert run.minutes == 5 * 60 + 30 and run.hours == 5
    assert sum(CallLogRollup.objects.filter(grain="hour").values_list("calls", flat=True)) == (
        CallLog.objects.filter(created_at__lt=now.replace(minute=0)).count()
    )

    # Three hours the job was down: caught up an hour a transaction too, each minute counted
    # once (not again as "late" in the last transaction, which would hold them all).
    later = now + 3 * HOUR
    _calls(committed_world, 300, start=now, end=later, seed=14)
    seen.clear()
    with connection.execute_wrapper(at_each_lock):
        run = call_log_rollup(now=later)
    assert seen == [now + k * HOUR for k in range(3)]
    assert run.minutes == 3 * 60 and run.hours == 3


@pytest.mark.django_db(transaction=True)
def test_two_first_runs_at_once_write_what_one_run_writes(committed_world: World) -> None:
    now = timezone.now().replace(second=30)
    _calls(committed_world, 800, start=now - timedelta(hours=4), end=now, seed=13)
    together = threading.Barrier(2)

    def first_run() -> None:
        try:
            together.wait(timeout=30)
            call_log_rollup(now=now)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(2) as runners:
        for done in [runners.submit(first_run) for _ in range(2)]:
            done.result(timeout=120)
    twice = _rollup_rows()
    CallLogRollupMark.objects.all().delete()
    CallLogRollup.objects.all().delete()
    call_log_rollup(now=now)

    assert twice == _rollup_rows()
    assert CallLogRollupMark.objects.count() == 1
    assert sum(CallLogRollup.objects.filter(grain="minute").values_list("calls", flat=True)) == (
        CallLog.objects.filter(created_at__lt=now.replace(second=0, microsecond=0)).count()
    )
