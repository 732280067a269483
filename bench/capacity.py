#!/usr/bin/env python3
"""The capacity model's per-process figures (issue #30), and the fleet check that they add up.

Usage (from the project root; it makes .venv first if needed, like dev.py):

    python3 bench/capacity.py [--requests 1000] [--seconds 6] [--sessions 2000] [--changes 20]
    python3 bench/capacity.py fleet [--web 1,2,4] [--workers 2] [--clients 100] [--minutes 1.5]

Loopback only, bounded (the figures about 7 minutes, the fleet about 20, on a loaded 2-core VM).

**Figures** (the default): a throwaway PostgreSQL and Redis and the bench database of
bench/compare.py (its endpoints, tools and token), one uvicorn process in compare.py's
production shape on CPU 0 (``DATABASE_APPLICATION_NAME=capacity-web``). Per era and auth
(``call-2026``, ``call-2026-oauth``, ``call-legacy``, ``call-legacy-oauth``, ``list-10``):

- Redis commands per request: ``INFO commandstats`` before and after ``--requests`` requests
  sent one at a time, less the process's idle rate (measured first, with nothing sent) over
  the same seconds; by command.
- server CPU µs per request (so requests per core-second = 1e6 / µs), call-log bytes per row
  (the partitions' ``pg_table_size`` + ``pg_indexes_size`` before and after, over the rows
  added) and the PostgreSQL connections the process holds (``pg_stat_activity`` by
  application name, every 0.1 s): all three over a closed-loop wrk run of compare.py's
  (``--seconds`` after its warm-up, 32 connections; ``bench/load.py``'s measurement).
- Redis commands per catalog change: ``--changes`` saves of one tool through the ORM from this
  process (the signals, the version bump, the notice every process hears), one each 0.2 s,
  with the web process listening; less its idle rate.
- memory per session and per idle stream: bench/idle_streams.py on a fresh process with
  ``--sessions`` sessions, then a GET stream each; the PostgreSQL bytes per session row.
- call-log rows written per second and CPU per row: bench/call_log_writer.py (its own
  PostgreSQL; 20,000 records).

**Fleet** (``fleet``): for each count of ``--web`` (uvicorn processes) a fresh soak stack
(bench/soak.py's: PostgreSQL, Redis, ``--workers`` Celery workers of concurrency 8, the seeded
endpoint and staff users) without outages. Redis's idle rate first (10 s, nothing sent), then
the soak's mixed load (bench/soak_fleet.py) for ``--minutes`` from ``--clients`` clients:
database connections per process (peaks by application name), Redis commands per MCP request
less the idle rate, web CPU per request; then wrk on every web process at once (the 2026-07-28
echo call, 32 connections shared out, ``--seconds``): total throughput, web CPU per request
and the CPU the rest of the machine used; then ``--changes`` catalog changes (Redis commands
per change, with one session's GET stream open on every process, so each has a stream to
tell). The table checks, against the first row: connections per web process within its pool
and the same; Redis commands per request within
±``REDIS_TOLERANCE``; CPU per request within ±``CPU_TOLERANCE``; throughput within
±``THROUGHPUT_TOLERANCE`` of min(processes, cores left to the web) × the one-process rate per
core, where cores left = cores - the CPU everything else used (wrk, PostgreSQL, Redis, the
workers) during that run.

Every figure is printed as a JSON line on stdout and kept in .cache/bench/capacity-<time>.jsonl;
the fleet also prints a Markdown table. Nothing is asserted in tests but the counting itself
(tests/bench/test_capacity_counts.py). docs/operations.md, "Capacity model", is written by hand
from these figures.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dev  # noqa: E402  (stdlib only: it runs before .venv exists)

dev.reexec_in_venv(__file__)

import argparse  # noqa: E402
import asyncio  # noqa: E402
import contextlib  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402
import psycopg  # noqa: E402
import redis  # noqa: E402

from bench import compare, idle_streams  # noqa: E402
from bench.common import JSON, open_session  # noqa: E402
from bench.load import Request, cpu_seconds, wrk  # noqa: E402
from scripts import services  # noqa: E402
from tests.support.live import free_port  # noqa: E402

CACHE = ROOT / ".cache" / "bench"
APPLICATION_NAME = "capacity-web"
SCENARIOS = [
    "call-2026",
    "call-2026-oauth",
    "call-2026-limits",
    "call-legacy",
    "call-legacy-oauth",
    "list-10",
    "session-open",
]
IDLE_SECONDS = 10.0
CHANGE_INTERVAL_SECONDS = 0.2
# After the last change, how long the processes may take to hear and act on it.
CHANGE_SETTLE_SECONDS = 2.0
CONNECTION_SAMPLE_SECONDS = 0.1
LOG_STABLE_SECONDS = 1.0
LOG_WAIT_SECONDS = 60.0
WRITER_RECORDS = 20_000

# The fleet's checks, fixed before the run.
REDIS_TOLERANCE = 0.20
CPU_TOLERANCE = 0.25
THROUGHPUT_TOLERANCE = 0.25
FLEET_CONNECTIONS = 32
FLEET_STOP_SECONDS = 60.0


def log(message: str) -> None:
    print(f"[capacity {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Output:
    """JSON lines on stdout and in the raw file."""

    def __init__(self, kind: str) -> None:
        CACHE.mkdir(parents=True, exist_ok=True)
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S")
        self.path = CACHE / f"capacity-{kind}-{stamp}.jsonl"
        self.rows: list[dict[str, Any]] = []

    def emit(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        line = json.dumps(row)
        print(line, flush=True)
        with self.path.open("a") as out:
            out.write(line + "\n")


# -- counting ---------------------------------------------------------------------------------


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def command_calls(client: redis.Redis) -> Counter[str]:
    """Calls per Redis command so far (``INFO commandstats``), our own INFO left out."""
    stats = client.info("commandstats")
    calls = Counter(
        {
            name.removeprefix("cmdstat_"): int(value["calls"])
            for name, value in stats.items()
            if isinstance(value, dict) and "calls" in value
        }
    )
    calls.pop("info", None)
    return calls


class RedisCounter:
    """Redis commands over a stretch of time, less an idle rate measured beforehand."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.idle_per_second: dict[str, float] = {}

    def measure_idle(self, seconds: float) -> dict[str, float]:
        before, began = command_calls(self.client), time.monotonic()
        time.sleep(seconds)  # the idle stretch is the measurement
        delta = command_calls(self.client) - before
        elapsed = time.monotonic() - began
        self.idle_per_second = {name: n / elapsed for name, n in delta.items()}
        return self.idle_per_second

    @contextlib.contextmanager
    def count(self) -> Iterator[dict[str, Any]]:
        """Yield a dict filled on exit: commands by name (idle rate taken off) and in all."""
        got: dict[str, Any] = {}
        before, began = command_calls(self.client), time.monotonic()
        yield got
        delta = command_calls(self.client) - before
        elapsed = time.monotonic() - began
        net = {
            name: max(0.0, delta.get(name, 0) - self.idle_per_second.get(name, 0.0) * elapsed)
            for name in set(delta) | set(self.idle_per_second)
        }
        got.update(
            seconds=elapsed,
            raw=sum(delta.values()),
            total=sum(net.values()),
            by_command={k: v for k, v in sorted(net.items()) if v >= 0.5},
        )


def per(counted: dict[str, Any], n: int) -> dict[str, Any]:
    """Redis figures of ``counted`` divided by ``n`` (requests or changes)."""
    return {
        "redis_per": round(counted["total"] / n, 2),
        "redis_raw_per": round(counted["raw"] / n, 2),
        "redis_by_command_per": {k: round(v / n, 3) for k, v in counted["by_command"].items()},
    }


def pg_query(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


CALL_LOG_SIZE = """
SELECT count(*), coalesce(sum(pg_table_size(c.oid)), 0), coalesce(sum(pg_indexes_size(c.oid)), 0)
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'mcp_app_calllog'::regclass
"""


def call_log(url: str) -> dict[str, int]:
    """Rows in the call log, and its partitions' table and index bytes."""
    rows = pg_query(url, "SELECT count(*) FROM mcp_app_calllog")[0][0]
    partitions, table, indexes = pg_query(url, CALL_LOG_SIZE)[0]
    return {
        "rows": int(rows),
        "partitions": int(partitions),
        "table": int(table),
        "index": int(indexes),
    }


def call_log_settled(url: str) -> dict[str, int]:
    """The call log once its row count has not moved for LOG_STABLE_SECONDS (bounded)."""
    deadline = time.monotonic() + LOG_WAIT_SECONDS
    last = call_log(url)
    since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = call_log(url)
        if now["rows"] != last["rows"]:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= LOG_STABLE_SECONDS:
            return now
    return last


def bytes_per_row(before: dict[str, int], after: dict[str, int]) -> dict[str, Any]:
    rows = after["rows"] - before["rows"]
    table = after["table"] - before["table"]
    index = after["index"] - before["index"]
    return {
        "call_log_rows": rows,
        "table_bytes_per_row": round(table / rows, 1) if rows else None,
        "index_bytes_per_row": round(index / rows, 1) if rows else None,
        "bytes_per_row": round((table + index) / rows, 1) if rows else None,
    }


CONNECTIONS_BY_NAME = """
SELECT application_name, count(*) FROM pg_stat_activity
WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() GROUP BY 1
"""


class ConnectionPeaks:
    """The most PostgreSQL connections each application name held, sampled on a thread."""

    def __init__(self, url: str, every: float = CONNECTION_SAMPLE_SECONDS) -> None:
        self.url, self.every = url, every
        self.peaks: Counter[str] = Counter()
        self.samples: dict[str, list[int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.is_set():
                with contextlib.suppress(psycopg.Error):
                    for name, count in conn.execute(CONNECTIONS_BY_NAME).fetchall():
                        self.peaks[name] = max(self.peaks[name], int(count))
                        self.samples.setdefault(name, []).append(int(count))
                self._stop.wait(self.every)

    def __enter__(self) -> ConnectionPeaks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def median(self, name: str) -> float | None:
        got = self.samples.get(name)
        return statistics.median(got) if got else None


def system_busy_seconds() -> float:
    """CPU seconds every core spent not idle so far (/proc/stat), over all cores."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    values = [int(v) for v in fields[:8]]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values) - idle) / os.sysconf("SC_CLK_TCK")


# -- figures ----------------------------------------------------------------------------------


def send_one_by_one(url: str, request: Request, n: int) -> int:
    """``n`` requests one at a time on one keep-alive connection; the good answers."""
    good = 0
    with httpx.Client(timeout=30) as client:
        for number in range(1, n + 1):
            answer = client.post(url, headers=request.headers, json={**request.body, "id": number})
            good += answer.status_code == 200 and request.expect in answer.text
    return good


def scenario_figures(
    bench: compare.Bench, counter: RedisCounter, base: str, pid: int, scenario: str, n: int
) -> dict[str, Any]:
    url, template = compare.request_for(scenario, "ours-uvicorn", base)
    request = compare.materialize(bench, url, template)
    compare.prime(url, request)
    database = bench.env["DATABASE_URL"]
    # Redis commands per request: exact counts, one request at a time.
    with counter.count() as counted:
        good = send_one_by_one(url, request, n)
    if good != n:
        raise RuntimeError(f"{scenario}: {n - good} of {n} requests answered badly")
    row: dict[str, Any] = {"figure": "request", "scenario": scenario, "requests": n}
    row.update(per(counted, n))
    # CPU per request, bytes per call-log row and connections held, under a closed loop.
    before = call_log_settled(database)
    wrk(
        url, request, seconds=compare.WARMUP_SECONDS, connections=compare.CONNECTIONS,
        server_pid=None,
    )  # fmt: skip
    with ConnectionPeaks(database) as peaks:
        run = wrk(
            url, request, seconds=bench.seconds, connections=compare.CONNECTIONS, server_pid=pid
        )
    after = call_log_settled(database)
    row.update(
        rps=run["rps"],
        cpu_us_per_req=run["cpu_us_per_req"],
        requests_per_core_second=round(1e6 / run["cpu_us_per_req"]),
        bad=(run["bad"] or 0) + run["non_2xx"],
        pg_connections_peak=peaks.peaks.get(APPLICATION_NAME, 0),
        pg_connections_median=peaks.median(APPLICATION_NAME),
        **bytes_per_row(before, after),
    )
    return row


def change_figures(counter: RedisCounter, changes: int) -> dict[str, Any]:
    """Redis commands per catalog change, from ``changes`` saves of one tool of list-10."""
    from mcp_app.models import Tool

    tool = Tool.objects.get(endpoints__slug=compare.LIST_10, name=compare.EDITED_TOOL)
    with counter.count() as counted:
        started = time.monotonic()
        for number in range(changes):
            tool.description = f"Changed by bench/capacity.py ({number})."
            tool.save()
            time.sleep(
                max(0.0, started + (number + 1) * CHANGE_INTERVAL_SECONDS - time.monotonic())
            )
        time.sleep(CHANGE_SETTLE_SECONDS)  # the listening process acts on the last one
    return {"figure": "catalog-change", "changes": changes, **per(counted, changes)}


def session_figures(bench: compare.Bench, counter: RedisCounter, sessions: int) -> dict[str, Any]:
    database = bench.env["DATABASE_URL"]
    size = "SELECT count(*), pg_total_relation_size('mcp_app_session') FROM mcp_app_session"
    rows_before, bytes_before = pg_query(database, size)[0]
    with compare.server(bench, "ours-uvicorn") as (_base, pid), counter.count() as counted:
        measured = asyncio.run(
            idle_streams.measure(
                port=bench.port, path=f"/mcp/{compare.PUBLIC}", server_pid=pid,
                count=sessions, auth={}, timeout=300,
            )
        )  # fmt: skip
    rows_after, bytes_after = pg_query(database, size)[0]
    rows = rows_after - rows_before
    return {
        "figure": "sessions",
        **{k: measured[k] for k in ("streams", "opened", "still_open", "rss_start_kib")},
        "rss_sessions_kib": measured["rss_sessions_kib"],
        "rss_streams_kib": measured["rss_streams_kib"],
        "kib_per_session": measured["kib_per_session"],
        "kib_per_stream_incl_session": measured["kib_per_stream"],
        # Per session: its initialize and its GET stream (and 20 calls in all beforehand).
        "redis_per_session_and_stream": round(counted["total"] / sessions, 2),
        "redis_by_command_per_session_and_stream": {
            k: round(v / sessions, 3) for k, v in counted["by_command"].items()
        },
        "session_rows": rows,
        "pg_bytes_per_session": round((bytes_after - bytes_before) / rows, 1) if rows else None,
    }


def writer_figures() -> dict[str, Any]:
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "call_log_writer.py"),
         "--records", str(WRITER_RECORDS)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, preexec_fn=compare.unpin,
    )  # fmt: skip
    if run.returncode != 0:
        raise RuntimeError(f"call_log_writer failed:\n{run.stderr[-2000:]}")
    return {"figure": "call-log-writer", **json.loads(run.stdout.strip().splitlines()[-1])}


def figures(args: argparse.Namespace) -> None:
    out = Output("figures")
    out.emit({"figure": "machine", "loadavg_start": loadavg(), "cpus": os.cpu_count()})
    compare.ensure_wrk()
    compare.raise_open_files()
    compare.pin(compare.CLIENT_CPU)()
    with (
        services.postgres(database="mcphost_capacity") as database_url,
        services.redis() as redis_url,
    ):
        compare.tune_postgres(database_url)
        port = free_port()
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "DEBUG": "0",
            "SECRET_KEY": compare.SECRET_KEY,
            "PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
            "DJANGO_SETTINGS_MODULE": "mcpsite.settings",
            "PYTHONUNBUFFERED": "1",
            "DATABASE_APPLICATION_NAME": APPLICATION_NAME,
        }
        os.environ.update(env)
        log("preparing the bench database (10,000 tools)")
        token = compare.prepare_database(port)
        # No SDK here: the Bench's SDK python is never used.
        bench = compare.Bench(
            env, port, Path(sys.executable), token, args.seconds, False, [], out.path
        )
        counter = RedisCounter(redis_url)
        with compare.server(bench, "ours-uvicorn") as (base, pid):
            # The process settles (its pool, its channel-layer receive loop), then idles.
            send_one_by_one(*compare.request_for("call-2026", "ours-uvicorn", base), 20)
            idle = counter.measure_idle(IDLE_SECONDS)
            idle_connections = pg_query(
                database_url,
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                APPLICATION_NAME,
            )[0][0]
            out.emit(
                {
                    "figure": "idle-process",
                    "redis_per_second": round(sum(idle.values()), 2),
                    "redis_by_command_per_second": {k: round(v, 3) for k, v in idle.items()},
                    "pg_connections": idle_connections,
                }
            )
            for scenario in args.only.split(","):
                row = scenario_figures(bench, counter, base, pid, scenario, args.requests)
                out.emit(row)
                log(
                    f"{scenario}: {row['redis_per']} Redis commands/request, "
                    f"{row['cpu_us_per_req']} µs/request, {row['bytes_per_row']} B/row, "
                    f"{row['pg_connections_peak']} connections at most"
                )
            out.emit(change_figures(counter, args.changes))
        out.emit(session_figures(bench, counter, args.sessions))
    out.emit(writer_figures())
    out.emit({"figure": "machine", "loadavg_end": loadavg()})
    log(f"raw figures: {out.path}")


# -- fleet ------------------------------------------------------------------------------------


def fleet(args: argparse.Namespace) -> None:
    out = Output("fleet")
    compare.ensure_wrk()
    compare.raise_open_files()
    rows = []
    for web in [int(n) for n in args.web.split(",") if n]:
        log(f"fleet: {web} web process(es), {args.workers} workers, loadavg {loadavg()}")
        row = asyncio.run(fleet_step(args, web))
        out.emit(row)
        rows.append(row)
    table = fleet_table(rows)
    print(table)
    out.path.with_suffix(".md").write_text(table + "\n")
    log(f"raw figures: {out.path}")


async def fleet_step(args: argparse.Namespace, web_count: int) -> dict[str, Any]:
    from bench import soak
    from bench.soak_fleet import Fleet

    workdir = Path(tempfile.mkdtemp(prefix="mcphost-capacity-"))
    workdir.chmod(0o755)
    (workdir / "pg").mkdir()
    (workdir / "redis").mkdir()
    logs = CACHE / f"capacity-logs-{datetime.datetime.now(datetime.UTC):%Y%m%dT%H%M%S}-{web_count}"
    logs.mkdir(parents=True)
    stack = soak.Stack(
        workdir,
        logs,
        soak.Postgres(workdir / "pg", services.free_port()),
        soak.Redis(workdir / "redis", services.free_port()),
    )
    row: dict[str, Any] = {"figure": "fleet", "web": web_count, "workers": args.workers}
    row["loadavg_start"] = loadavg()
    try:
        users = max(1, -(-args.clients // soak.CLIENTS_PER_USER))
        await asyncio.to_thread(
            stack.start, web_count, users, workers=args.workers, servers=("uvicorn",)
        )
        database = stack.postgres.url
        counter = RedisCounter(stack.redis.url)
        clients = Fleet(
            [w.url for w in stack.webs], clients=args.clients, management=stack.management
        )
        await clients.prime()
        await asyncio.to_thread(call_log_settled, database)
        idle = await asyncio.to_thread(counter.measure_idle, IDLE_SECONDS)
        row["redis_idle_per_second"] = round(sum(idle.values()), 2)
        # The soak's mixed load.
        webs = {w.proc.name: w.proc.process.pid for w in stack.webs}
        before_log = await asyncio.to_thread(call_log_settled, database)
        cpu_before = {name: cpu_seconds(pid) for name, pid in webs.items()}
        t0 = time.time()
        with ConnectionPeaks(database, every=1.0) as peaks, counter.count() as counted:
            await clients.run(args.minutes * 60, stop_seconds=FLEET_STOP_SECONDS)
            after_log = await asyncio.to_thread(call_log_settled, database)
        web_cpu = sum(cpu_seconds(pid) - cpu_before[name] for name, pid in webs.items())
        got = clients.figures([], t0)
        answered_mcp, answered_all = got["answered"], got["answered_all"]
        web_names = [f"soak-{name}" for name in webs]
        worker_names = [
            f"soak-{p.name}"
            for p in [*([stack.worker] if stack.worker else []), *stack.more_workers]
        ]
        row.update(
            mix_seconds=round(counted["seconds"], 1),
            mix_requests=answered_all,
            mix_mcp_requests=answered_mcp,
            mix_5xx=got["5xx_outside"],
            mix_rps=round(answered_all / counted["seconds"], 1),
            mix_web_cpu_us_per_req=round(web_cpu * 1e6 / answered_all),
            mix_redis_per_mcp_request=round(counted["total"] / answered_mcp, 2),
            mix_redis_raw_per_mcp_request=round(counted["raw"] / answered_mcp, 2),
            mix_redis_by_command_per_mcp_request={
                k: round(v / answered_mcp, 3) for k, v in counted["by_command"].items()
            },
            **{f"mix_{k}": v for k, v in bytes_per_row(before_log, after_log).items()},
            pg_peak_per_web={name: peaks.peaks.get(name, 0) for name in web_names},
            pg_peak_per_worker={name: peaks.peaks.get(name, 0) for name in worker_names},
            pg_peak_total=sum(peaks.peaks.values()),
        )
        # Saturation: wrk on every web process at once.
        row.update(await asyncio.to_thread(saturate, stack, args.seconds))
        # Catalog changes with every web process listening.
        try:
            row.update(await asyncio.to_thread(fleet_changes, stack, counter, args.changes))
        except (httpx.HTTPError, subprocess.SubprocessError) as exc:  # the rest still counts
            row["change_error"] = repr(exc)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.to_thread(stack.stop)
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    row["loadavg_end"] = loadavg()
    return row


def saturate(stack: Any, seconds: float) -> dict[str, Any]:
    """wrk on every web process at once (2026-07-28 echo call); throughput and where CPU went."""
    request = compare.modern("tools/call", compare._echo_params(), {}, "echo")
    urls = [w.url for w in stack.webs]
    pids = [w.proc.process.pid for w in stack.webs]
    each = max(1, FLEET_CONNECTIONS // len(urls))

    def one(url: str, warm: bool) -> dict[str, Any]:
        duration = compare.WARMUP_SECONDS if warm else seconds
        return wrk(url, request, seconds=duration, connections=each, server_pid=None)

    for url in urls:
        compare.prime(url, request)
    with ThreadPoolExecutor(len(urls)) as pool:
        list(pool.map(lambda u: one(u, True), urls))
        cpu_before = [cpu_seconds(pid) for pid in pids]
        busy_before, began = system_busy_seconds(), time.monotonic()
        runs = list(pool.map(lambda u: one(u, False), urls))
        elapsed = time.monotonic() - began
        busy = system_busy_seconds() - busy_before
        web_cpu = sum(cpu_seconds(pid) - b for pid, b in zip(pids, cpu_before, strict=True))
    requests = sum(r["requests"] for r in runs)
    cores = os.cpu_count() or 1
    other_cores = max(0.0, (busy - web_cpu) / elapsed)
    return {
        "wrk_connections_per_process": each,
        "wrk_rps": round(sum(r["rps"] for r in runs), 1),
        "wrk_bad": sum((r["bad"] or 0) + r["non_2xx"] for r in runs),
        "wrk_web_cpu_us_per_req": round(web_cpu * 1e6 / requests, 1) if requests else None,
        "wrk_web_cores": round(web_cpu / elapsed, 2),
        "wrk_other_cores": round(other_cores, 2),
        "wrk_cores_left_to_web": round(max(0.0, cores - other_cores), 2),
    }


def fleet_changes(stack: Any, counter: RedisCounter, changes: int) -> dict[str, Any]:
    """Redis commands per catalog change with every web process listening (a manage.py shell
    saves the tool, as the admin would)."""
    script = (
        "import time\n"
        "from mcp_app.models import Tool\n"
        "tool = Tool.objects.get(name='echo')\n"
        "started = time.monotonic()\n"
        f"for n in range({changes}):\n"
        "    tool.description = f'Changed by bench/capacity.py ({n}).'\n"
        "    tool.save()\n"
        f"    due = started + (n + 1) * {CHANGE_INTERVAL_SECONDS}\n"
        "    time.sleep(max(0.0, due - time.monotonic()))\n"
    )
    env = {**os.environ, **stack.env, "DATABASE_APPLICATION_NAME": "capacity-changes"}
    # The shell's own start-up commands (if any) are counted with the changes: an upper bound.
    # One session's GET stream open on each web process, so every process has a stream of the
    # endpoint to tell.
    with held_streams([w.url for w in stack.webs]), counter.count() as counted:
        subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", script],
            cwd=ROOT, env=env, check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        time.sleep(CHANGE_SETTLE_SECONDS)  # every process acts on the last one
    return {f"change_{k}": v for k, v in per(counted, changes).items()}


@contextlib.contextmanager
def held_streams(urls: list[str]) -> Iterator[None]:
    """A 2025-11-25 session with its GET stream open at each URL while the block runs."""
    with contextlib.ExitStack() as streams:
        for url in urls:
            client = streams.enter_context(httpx.Client(timeout=30))
            session = {"mcp-session-id": open_session(url), "mcp-protocol-version": "2025-11-25"}
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            client.post(url, headers={**JSON, **session}, json=initialized).raise_for_status()
            headers = {"accept": "text/event-stream", **session}
            stream = streams.enter_context(client.stream("GET", url, headers=headers))
            stream.raise_for_status()
        yield


def fleet_table(rows: list[dict[str, Any]]) -> str:
    """The per-process figures as processes are added, each checked against the first row."""
    first = rows[0]
    per_core = 1e6 / first["wrk_web_cpu_us_per_req"]
    head = (
        "| web processes | workers | mix req/s (5xx) | web CPU µs/req, mix | PG conns per web "
        "process (peak) | per worker | Redis cmds per MCP request (idle rate taken off) | "
        "Redis cmds per catalog change | wrk req/s | web CPU µs/req, wrk | cores left to web "
        "| predicted req/s | measured ÷ predicted | checks |"
    )
    lines = [head, "|" + "---|" * 14]
    for row in rows:
        web = row["web"]
        conns = list(row["pg_peak_per_web"].values())
        workers = list(row["pg_peak_per_worker"].values())
        predicted = min(web, row["wrk_cores_left_to_web"]) * per_core
        ratio = row["wrk_rps"] / predicted if predicted else float("nan")
        checks = {
            "conns": max(conns) <= 10 and max(conns) <= max(first["pg_peak_per_web"].values()) + 1,
            "redis": abs(row["mix_redis_per_mcp_request"] / first["mix_redis_per_mcp_request"] - 1)
            <= REDIS_TOLERANCE,
            "cpu": abs(row["wrk_web_cpu_us_per_req"] / first["wrk_web_cpu_us_per_req"] - 1)
            <= CPU_TOLERANCE,
            "throughput": abs(ratio - 1) <= THROUGHPUT_TOLERANCE,
        }
        row["checks"] = checks
        verdict = ", ".join(f"{name} {'ok' if ok else '**missed**'}" for name, ok in checks.items())
        lines.append(
            f"| {web} | {row['workers']} | {row['mix_rps']:,} ({row['mix_5xx']}) "
            f"| {row['mix_web_cpu_us_per_req']:,} | {', '.join(map(str, conns))} "
            f"| {', '.join(map(str, workers))} | {row['mix_redis_per_mcp_request']} "
            f"| {row.get('change_redis_per', 'n/a')} | {row['wrk_rps']:,} "
            f"| {row['wrk_web_cpu_us_per_req']:,} "
            f"| {row['wrk_cores_left_to_web']} | {predicted:,.0f} | {ratio:.2f} | {verdict} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", default="figures", choices=["figures", "fleet"])
    parser.add_argument("--requests", type=int, default=1000, help="per scenario, one at a time")
    parser.add_argument("--seconds", type=float, default=6.0, help="each wrk run")
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--only", default=",".join(SCENARIOS), help="scenarios (figures)")
    parser.add_argument("--web", default="1,2,4", help="web process counts (fleet)")
    parser.add_argument("--workers", type=int, default=2, help="Celery workers (fleet)")
    parser.add_argument("--clients", type=int, default=100, help="soak clients (fleet)")
    parser.add_argument("--minutes", type=float, default=1.5, help="soak load per step (fleet)")
    args = parser.parse_args()
    unknown = set(args.only.split(",")) - set(compare.SCENARIO_BY_NAME)
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    run: Callable[[argparse.Namespace], None] = fleet if args.mode == "fleet" else figures
    run(args)


if __name__ == "__main__":
    main()
