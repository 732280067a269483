"""The audit and the API over a big partitioned call log: fill N rows, time every read.

Usage (from the project root, after ``python3 dev.py test`` or ``run`` made .venv):

    .venv/bin/python bench/call_log_scale.py [--rows 5000000] [--days 30] [--repeat 20]

Starts a throwaway PostgreSQL (scripts/services.py), migrates, replaces the empty legacy
partition by daily partitions over ``--days`` days (as an installation has once it has run
that long), and fills ``--rows`` generated rows with COPY (the writer's statement), newest
now, spread evenly, in the mix of the audit's scale test (three endpoints, twenty tools, a
session per hundred legacy rows, 2 % tool errors, a rare client). Then, ``--repeat`` times
each, as a logged-in superuser: the /audit/ list and its filter pages (endpoint, tool, status,
session, request id, client, failures, a deep keyset page), the stats and overview charts, the
first byte of both exports, and the API's call-log list and a filtered one. Prints one JSON
line per read (p50 and p95 in ms) and one with the fill's figures; ``--layout legacy`` keeps
every row in the legacy partition (an upgraded installation's first weeks), and
``--compare-time-index`` times the reads by time again with a BRIN in place of the btree on
``created_at``. The stats and overview pages are timed twice: on the call log alone
(``--raw-chart-repeat`` reads, 3 by default; a read cut by the statement timeout is reported), then
after the upkeep job ``call_log_rollup`` rolled up the last ``--rollup-days`` (2; its time and
rows printed), as the charts read them in service. Run it on a quiet machine:
the figures are the database's and this process's time, nothing else.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts import services  # noqa: E402

COLUMNS = (
    "created_at", "duration_ms", "endpoint_id", "endpoint_slug", "era", "protocol_version",
    "session_id", "http_method", "http_status", "message_type", "rpc_method", "rpc_id",
    "target", "client_id", "user_agent", "status", "error_message", "capture", "truncated",
    "task_id", "worker", "request_id", "client_name", "client_version",
)  # fmt: skip
CHUNK = 200_000


def fill(
    rows: int, days: int, endpoints: list[tuple[int, str]], *, layout: str
) -> dict[str, float]:
    from django.db import connection
    from django.utils import timezone

    from mcp_app.services.calllog.partitions import LEGACY_PARTITION, call_log_partitions_ensure

    now = timezone.now()
    oldest = now - timedelta(days=days)
    step = timedelta(days=days) / rows
    if layout == "days":
        with connection.cursor() as cursor:
            cursor.execute(f'DROP TABLE IF EXISTS "{LEGACY_PARTITION}"')
        call_log_partitions_ensure(since=oldest, now=now)
    started = time.perf_counter()
    sql = f"COPY mcp_app_calllog ({', '.join(COLUMNS)}) FROM STDIN"
    for first in range(0, rows, CHUNK):
        with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
            for n in range(first, min(rows, first + CHUNK)):
                endpoint_id, slug = endpoints[n % 3]
                modern = n % 2 == 0
                listing = n % 4 == 0
                copy.write_row((
                    oldest + step * n, (n % 997) / 10.0, endpoint_id, slug,
                    "modern" if modern else "legacy",
                    "2026-07-28" if modern else "2025-11-25",
                    "" if modern else f"session-{n // 100}", "POST", 200, "request",
                    "tools/list" if listing else "tools/call", str(n),
                    "" if listing else f"tool_{n % 20}", "", "bench",
                    "tool_error" if n % 50 == 0 else ("rejected" if n % 997 == 0 else "ok"),
                    "", "metadata", False, "", "", f"request-{n}",
                    "rare-client" if n % 1000 == 0 else "claude-code", "2.0",
                ))  # fmt: skip
    filled = time.perf_counter() - started
    with connection.cursor() as cursor:
        # The product's statement timeout guards requests; analysing every partition of a big
        # fill takes longer than it and is this command's own maintenance, not a request.
        cursor.execute("SET statement_timeout = 0")
        cursor.execute("ANALYZE mcp_app_calllog")
        cursor.execute("RESET statement_timeout")
        cursor.execute(
            "SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits "
            "WHERE inhparent = 'mcp_app_calllog'::regclass"
        )
        size = int(cursor.fetchone()[0])
    return {"fill_s": round(filled, 1), "rows_per_s": round(rows / filled), "bytes": size}


def timed(repeat: int, read: object) -> dict[str, float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        read()  # type: ignore[operator]
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
    return {"p50_ms": round(statistics.median(samples), 1), "p95_ms": round(p95, 1)}


def compare_time_index(client: object, repeat: int) -> None:
    """The reads that select by time, with the btree on created_at (as shipped), then with a
    BRIN in its place."""
    from django.db import connection
    from django.utils import timezone

    from mcp_app.models import CallLog

    now = timezone.now()
    reads = {
        "stats page (last 24 h)": lambda: client.get("/audit/stats/"),  # type: ignore[attr-defined]
        "count of the last hour": lambda: CallLog.objects.filter(
            created_at__gte=now - timedelta(hours=1)
        ).count(),
        "count of a day a week ago": lambda: CallLog.objects.filter(
            created_at__gte=now - timedelta(days=7, hours=12),
            created_at__lt=now - timedelta(days=6, hours=12),
        ).count(),
    }

    def index_bytes(name: str) -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT coalesce(sum(pg_relation_size(relid)), 0) FROM pg_partition_tree(%s)",
                [name],
            )
            return int(cursor.fetchone()[0])

    btree_bytes = index_bytes("calllog_created")
    for label in ("btree", "brin"):
        if label == "brin":
            with connection.cursor() as cursor:
                cursor.execute("DROP INDEX calllog_created")
                cursor.execute(
                    "CREATE INDEX calllog_created_brin ON mcp_app_calllog USING brin (created_at)"
                )
                cursor.execute("ANALYZE mcp_app_calllog")
        for name, read in reads.items():
            print(json.dumps({"time index": label, "read": name, **timed(repeat, read)}))
    brin_bytes = index_bytes("calllog_created_brin")
    print(json.dumps({"btree_bytes": btree_bytes, "brin_bytes": brin_bytes}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument(
        "--raw-chart-repeat",
        type=int,
        default=3,
        help="reads of the stats and overview charts from the call log alone, before the "
        "rollups (their time grows with the day's rows)",
    )
    parser.add_argument(
        "--layout",
        choices=("days", "legacy"),
        default="days",
        help="days: a partition per day (default); legacy: every row in the one legacy "
        "partition, as an upgraded installation has in its first weeks",
    )
    parser.add_argument(
        "--rollup-days",
        type=float,
        default=2.0,
        help="days the rollup job rolls up before the charts are timed again (0: not)",
    )
    parser.add_argument(
        "--compare-time-index",
        action="store_true",
        help="last, time the time-range reads again with a BRIN in place of the btree on "
        "created_at",
    )
    args = parser.parse_args()
    with ExitStack() as stack:
        os.environ["DATABASE_URL"] = stack.enter_context(services.postgres())
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")
        os.environ.setdefault("SECRET_KEY", "bench-" + "x" * 50)
        # Django's test clients say they are "testserver".
        os.environ.setdefault("ALLOWED_HOSTS", "testserver")
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.db.models import Max
        from django.test import AsyncClient, Client

        from mcp_app.models import CallLog, Endpoint

        call_command("migrate", verbosity=0)
        endpoints = [
            (Endpoint.objects.create(slug=slug).pk, slug) for slug in ("alpha", "beta", "gamma")
        ]
        figures = fill(args.rows, args.days, endpoints, layout=args.layout)
        scenario = f"fill {args.rows} rows over {args.days} days ({args.layout})"
        print(json.dumps({"scenario": scenario, **figures}))
        user = get_user_model().objects.create_superuser("bench", "bench@example.com", "x")
        client = Client()
        client.force_login(user)
        # The fill's ids are consecutive, newest highest: the middle one without an OFFSET
        # of millions (which the statement timeout cuts at 50,000,000 rows).
        deep = CallLog.objects.aggregate(top=Max("id"))["top"] - args.rows // 2
        pages = {
            "audit list": "/audit/",
            "audit deep keyset page": f"/audit/?before={deep}",
            "audit endpoint filter": f"/audit/?endpoint={endpoints[1][0]}",
            "audit tool filter": "/audit/?tool=tool_7",
            "audit status filter (rare)": "/audit/?status=rejected",
            "audit failures": "/audit/?status=failed",
            "audit session": "/audit/?session=session-4321",
            "audit request id": "/audit/?request_id=request-4321",
            "audit client": "/audit/?client_name=rare-client",
            "audit stats (charts)": "/audit/stats/",
            "audit overview": "/audit/overview/",
            "api call-log list": "/api/v1/call-log/",
            "api call-log filtered": "/api/v1/call-log/?status=rejected",
        }
        charts = ("audit stats (charts)", "audit overview")
        for name, url in pages.items():

            def read(url: str = url) -> None:
                response = client.get(url)
                if response.status_code != 200:
                    raise SystemExit(f"{url}: {response.status_code}")

            if name not in charts:
                print(json.dumps({"read": name, "url": url, **timed(args.repeat, read)}))
                continue
            # The charts from the call log alone, before any rollup: a yardstick that grows
            # with the day's rows (slow at this size), so fewer reads, and a read the
            # statement timeout cuts is reported, not fatal.
            try:
                figures = timed(args.raw_chart_repeat, read)
            except Exception as exc:  # noqa: BLE001 - the bench reports and goes on
                figures = {"error": f"{type(exc).__name__}: {exc}".strip()[:200]}
            print(json.dumps({"read": f"{name}, call log alone", "url": url,
                              "reads": args.raw_chart_repeat, **figures}))  # fmt: skip

        if args.rollup_days > 0:
            from mcp_app.models import CallLogRollup
            from mcp_app.services.calllog.rollup import call_log_rollup

            started = time.perf_counter()
            run = call_log_rollup(backfill=timedelta(days=args.rollup_days))
            print(
                json.dumps(
                    {
                        "rollup": f"first run, last {args.rollup_days} days",
                        "s": round(time.perf_counter() - started, 1),
                        "minutes": run.minutes,
                        "rollup_rows": CallLogRollup.objects.count(),
                    }
                )
            )
            started = time.perf_counter()
            call_log_rollup()
            print(json.dumps({"rollup": "next run", "s": round(time.perf_counter() - started, 2)}))
            for name in ("audit stats (charts)", "audit overview"):
                url = pages[name]

                def read(url: str = url) -> None:
                    response = client.get(url)
                    if response.status_code != 200:
                        raise SystemExit(f"{url}: {response.status_code}")

                print(json.dumps({"read": f"{name}, rollups", "url": url,
                                  **timed(args.repeat, read)}))  # fmt: skip

        async def first_byte(url: str) -> float:
            aclient = AsyncClient()
            await aclient.aforce_login(user)
            started = time.perf_counter()
            response = await aclient.get(url)
            if response.status_code != 200:
                raise SystemExit(f"{url}: {response.status_code}")
            async for _chunk in response.streaming_content:
                break
            return (time.perf_counter() - started) * 1000

        for url in ("/audit/export.csv", "/audit/export.jsonl"):
            samples = sorted(asyncio.run(first_byte(url)) for _ in range(min(args.repeat, 5)))
            print(
                json.dumps(
                    {
                        "read": "export first byte",
                        "url": url,
                        "p50_ms": round(statistics.median(samples), 1),
                        "max_ms": round(samples[-1], 1),
                    }
                )
            )

        if args.compare_time_index:
            compare_time_index(client, args.repeat)


if __name__ == "__main__":
    main()
