#!/usr/bin/env python3
"""The relay benchmark (issue #26): an upstream tool called directly and through mcphost, and
the cost of per-identity upstream sessions.

Usage (from the project root; it makes .venv first if needed, like dev.py):

    python3 bench/relay.py [--rounds 3] [--seconds 5] [--connections 1,32] [--users 1000]
                           [--only relay,identities]

Loopback only, bounded (a default run takes about 8 minutes on a 2-core VM). It starts a
throwaway PostgreSQL and Redis, the SDK test upstream (tests/support/mcp_upstream_server.py,
stateful, pinned to CPU 1 with wrk and the databases) and our server in its production shape
(bench/compare.py's ``server``: one uvicorn process on CPU 0, DEBUG off, call log on).

* ``relay``: the upstream's ``echo`` called by wrk, ``--rounds`` interleaved rounds of each
  row at each ``--connections``: directly on the upstream (2026-07-28 request; 2025-11-25
  session) and through our tool ``echo`` relaying to it (2026-07-28 and 2025-11-25 session,
  OAuth bearer: one user, so one upstream session; and 2026-07-28 anonymous, where each call
  opens and closes an upstream session of its own). Our server speaks 2025-11-25 to the
  upstream whatever the caller's era.
* ``identities``: ``--users`` distinct OAuth users (tokens issued into the database, as the
  tests do) each call the relayed tool once (2026-07-28), 20 at a time, then again; RSS of
  our process and of the upstream's, and the TCP connections from our process to the
  upstream (/proc), before and after, with the upstream's ``max_sessions`` at its default
  (100: least recently used sessions closed) and raised to ``--users``. Fresh processes for
  each cap.

Prints a Markdown report; raw rows go to .cache/bench/relay-<time>.jsonl and the report to
.cache/bench/relay-<time>.md (``--report <jsonl>`` prints it again without measuring); the
figures in docs/performance.md are written by hand from it. Speed is measured here, never
asserted in tests.
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
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402

from bench.compare import (  # noqa: E402
    CACHE,
    CLIENT_CPU,
    CONNECTIONS,
    SECRET_KEY,
    WARMUP_SECONDS,
    Bench,
    ensure_wrk,
    legacy_call,
    log,
    modern,
    pin,
    prime,
    raise_open_files,
    server,
    tune_postgres,
)
from bench.load import Request, cpu_seconds, rss_kib, wrk  # noqa: E402
from scripts import services  # noqa: E402
from tests.support.live import free_port  # noqa: E402
from tests.support.mcp_upstream_server import run_mcp_upstream  # noqa: E402

MESSAGE = "hello world"
UPSTREAM = "bench-up"
PUBLIC, OAUTH = "relay", "relay-oauth"
DEFAULT_CAP = 100  # Upstream.max_sessions' default
CONCURRENT_USERS = 20
ROWS = {
    # name: (label, through us, era, OAuth)
    "direct-2026": ("upstream directly, 2026-07-28", False, "2026", False),
    "relay-2026-oauth": ("through mcphost, 2026-07-28, OAuth", True, "2026", True),
    "relay-2026-public": ("through mcphost, 2026-07-28, anonymous", True, "2026", False),
    "direct-legacy": ("upstream directly, 2025-11-25 session", False, "legacy", False),
    "relay-legacy-oauth": ("through mcphost, 2025-11-25 session, OAuth", True, "legacy", True),
}
# Which direct row a relayed row is compared with.
BASELINE = {"2026": "direct-2026", "legacy": "direct-legacy"}


def echo_params() -> dict[str, Any]:
    return {"name": "echo", "arguments": {"text": MESSAGE}}


# -- the bench database ----------------------------------------------------------------------


def prepare_database(upstream_url: str, users: int) -> tuple[str, list[str]]:
    """The upstream row, our relaying tool on a public and an OAuth endpoint, and ``users``
    + 1 users with a token each; returns the benchmark's token and the users' tokens."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from mcp_app.auth.resources import endpoint_resource
    from mcp_app.services.catalog_writes import endpoint_create
    from tests.support.mcp_upstream import upstream_row, upstream_tool
    from tests.support.oauth import issue_token, make_client

    call_command("migrate", verbosity=0)
    public = endpoint_create(slug=PUBLIC, auth_mode="public")
    secured = endpoint_create(slug=OAUTH, auth_mode="oauth")
    upstream_row(UPSTREAM, upstream_url)
    tool = upstream_tool("echo", UPSTREAM, "echo")
    public.tools.add(tool)
    secured.tools.add(tool)
    client = make_client("bench client")
    model = get_user_model()

    def token(name: str) -> str:
        user = model.objects.create_user(name)
        resource = [endpoint_resource(OAUTH)]
        return issue_token(user, resource=resource, scope=secured.base_scope, client=client)

    bench_token = token("bench")
    return bench_token, [token(f"user{n:05d}") for n in range(users)]


def set_cap(max_sessions: int) -> None:
    from mcp_app.models import Upstream

    upstream = Upstream.objects.get(name=UPSTREAM)
    upstream.max_sessions = max_sessions
    upstream.full_clean()
    upstream.save()


# -- processes ----------------------------------------------------------------------------------


@contextlib.contextmanager
def upstream_server(port: int) -> Iterator[int]:
    """The SDK test upstream on ``port`` (CPU 1, with wrk); yields its pid."""
    with (
        tempfile.TemporaryDirectory() as markers,
        run_mcp_upstream(Path(markers), port=port) as running,
    ):
        os.sched_setaffinity(running.process.pid, {CLIENT_CPU % (os.cpu_count() or 1)})
        yield running.process.pid


def upstream_sockets(pid: int, upstream_port: int) -> int:
    """Established TCP connections of process ``pid`` to ``upstream_port`` on loopback."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as lines:
            next(lines)
            for line in lines:
                fields = line.split()
                remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                if remote_port == upstream_port and fields[3] == "01" and fields[9] in inodes:
                    count += 1
    return count


# -- relay rows -------------------------------------------------------------------------------


def request_for(row: str, bench: Bench, base: str, upstream_url: str) -> tuple[str, Request]:
    _label, ours, era, oauth = ROWS[row]
    url = f"{base}/mcp/{OAUTH if oauth else PUBLIC}" if ours else upstream_url
    auth = {"authorization": f"Bearer {bench.token}"} if oauth else {}
    if era == "2026":
        return url, modern("tools/call", echo_params(), auth, "echo")
    return url, legacy_call(url, auth, echo_params())


def relay(bench: Bench, rounds: int, connections: list[int], upstream_url: str) -> None:
    upstream_port = int(upstream_url.split(":")[2].split("/")[0])
    with (
        upstream_server(upstream_port) as upstream_pid,
        server(bench, "ours-uvicorn") as (
            base,
            pid,
        ),
    ):
        for round_no in range(1, rounds + 1):
            for count in connections:
                for row in ROWS:
                    url, request = request_for(row, bench, base, upstream_url)
                    prime_ms = prime(url, request)
                    wrk(url, request, seconds=WARMUP_SECONDS, connections=count, server_pid=None)
                    ours = ROWS[row][1]
                    upstream_cpu = cpu_seconds(upstream_pid)
                    figures = wrk(
                        url,
                        request,
                        seconds=bench.seconds,
                        connections=count,
                        server_pid=pid if ours else upstream_pid,
                    )
                    upstream_cpu = cpu_seconds(upstream_pid) - upstream_cpu
                    figures["upstream_cpu_us_per_req"] = round(
                        upstream_cpu * 1e6 / max(1, figures["requests"]), 1
                    )
                    if not ours:  # wrk's figure is the upstream's own; ours is not in it
                        figures["cpu_us_per_req"] = None
                    figures["prime_ms"] = prime_ms
                    figures["sockets"] = upstream_sockets(pid, upstream_port)
                    bench.record(
                        {"scenario": "relay", "round": round_no, "row": row, "connections": count}
                        | figures
                    )
                    log(
                        f"round {round_no} c{count} {row:<20} {figures['rps']:>8.1f} req/s "
                        f"p50 {figures['p50_ms']} p99 {figures['p99_ms']} ms, bad {figures['bad']}"
                    )


# -- identities --------------------------------------------------------------------------------


async def call_as_each(url: str, tokens: list[str]) -> dict[str, Any]:
    """One 2026-07-28 relayed call per token, ``CONCURRENT_USERS`` at a time."""
    gate = asyncio.Semaphore(CONCURRENT_USERS)
    latencies: list[float] = []
    failures: list[str] = []
    request = modern("tools/call", echo_params(), {}, "echo")
    limits = httpx.Limits(max_connections=CONCURRENT_USERS)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def one(token: str) -> None:
            async with gate:
                began = time.perf_counter()
                answer = await client.post(
                    url,
                    headers={**request.headers, "authorization": f"Bearer {token}"},
                    json=request.body,
                )
                latencies.append((time.perf_counter() - began) * 1000)
                if answer.status_code != 200 or MESSAGE not in answer.text:
                    failures.append(f"{answer.status_code} {answer.text[:200]}")

        began = time.perf_counter()
        await asyncio.gather(*(one(token) for token in tokens))
        seconds = time.perf_counter() - began
    ordered = sorted(latencies)
    return {
        "calls": len(tokens),
        "seconds": round(seconds, 2),
        "calls_per_s": round(len(tokens) / seconds, 1),
        "p50_ms": round(statistics.median(ordered), 1),
        "p99_ms": round(ordered[max(0, int(len(ordered) * 0.99) - 1)], 1),
        "failures": len(failures),
        "first_failure": failures[0] if failures else "",
    }


def identities(bench: Bench, tokens: list[str], upstream_url: str) -> None:
    upstream_port = int(upstream_url.split(":")[2].split("/")[0])
    for cap in (DEFAULT_CAP, len(tokens)):
        set_cap(cap)
        with (
            upstream_server(upstream_port) as upstream_pid,
            server(bench, "ours-uvicorn") as (
                base,
                pid,
            ),
        ):
            url = f"{base}/mcp/{OAUTH}"
            # One call first, so "before" holds a warm process (catalog, one session).
            warm = asyncio.run(call_as_each(url, [bench.token]))
            if warm["failures"]:
                raise RuntimeError(f"the relayed call failed: {warm['first_failure']}")
            before = {
                "rss_kib": rss_kib(pid),
                "upstream_rss_kib": rss_kib(upstream_pid),
                "sockets": upstream_sockets(pid, upstream_port),
            }
            first = asyncio.run(call_as_each(url, tokens))
            after = {
                "rss_kib": rss_kib(pid),
                "upstream_rss_kib": rss_kib(upstream_pid),
                "sockets": upstream_sockets(pid, upstream_port),
            }
            again = asyncio.run(call_as_each(url, tokens))
            row = {
                "scenario": "identities",
                "cap": cap,
                "users": len(tokens),
                "before": before,
                "after": after,
                "first": first,
                "again": again,
                "after_again": {
                    "rss_kib": rss_kib(pid),
                    "upstream_rss_kib": rss_kib(upstream_pid),
                    "sockets": upstream_sockets(pid, upstream_port),
                },
            }
        bench.record(row)
        log(f"identities, cap {cap}: {json.dumps(row)}")


# -- report -----------------------------------------------------------------------------------


def _med(values: list[float]) -> float:
    return statistics.median(values)


def _range(values: list[float], digits: int = 0) -> str:
    text = f"{_med(values):,.{digits}f}"
    if len(values) > 1:
        text += f" ({min(values):,.{digits}f}–{max(values):,.{digits}f})"
    return text


def report(results: list[dict[str, Any]]) -> str:
    lines = []
    relayed = [r for r in results if r["scenario"] == "relay"]
    if relayed:
        lines += [
            "| era, caller | path | connections | req/s median (min–max) | relayed ÷ direct "
            "req/s, same round | p50 / p99 ms | added p50 ms | mcphost CPU µs/req | "
            "upstream CPU µs/req | bad |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for count in sorted({r["connections"] for r in relayed}):
            for row, (label, ours, era, _oauth) in ROWS.items():
                mine = [r for r in relayed if r["row"] == row and r["connections"] == count]
                if not mine:
                    continue
                base = {
                    r["round"]: r
                    for r in relayed
                    if r["row"] == BASELINE[era] and r["connections"] == count
                }
                ratios = [r["rps"] / base[r["round"]]["rps"] for r in mine if r["round"] in base]
                added = [
                    r["p50_ms"] - base[r["round"]]["p50_ms"] for r in mine if r["round"] in base
                ]
                cpu = [r["cpu_us_per_req"] for r in mine if r["cpu_us_per_req"] is not None]
                path, _, caller = label.partition(", ")
                lines.append(
                    f"| {caller} | {path} | {count} | {_range([r['rps'] for r in mine])} | "
                    + (f"{_range(ratios, 2)}× | " if ours else "| ")
                    + f"{_med([r['p50_ms'] for r in mine]):.1f} / "
                    f"{_med([r['p99_ms'] for r in mine]):.1f} | "
                    + (f"{_range(added, 1)} | " if ours else "| ")
                    + (f"{_range(cpu)} | " if cpu else "| ")
                    + f"{_range([r['upstream_cpu_us_per_req'] for r in mine])} | "
                    f"{sum(r['bad'] or 0 for r in mine)} |"
                )
        lines.append("")
    rows = [r for r in results if r["scenario"] == "identities"]
    if rows:
        lines += [
            "| upstream `max_sessions` | mcphost RSS before → after (MiB) | growth per user "
            "KiB | connections to upstream before → after | upstream RSS before → after "
            "(MiB) | first call each: calls/s, p50 / p99 ms | second call each: calls/s, "
            "p50 / p99 ms | failures |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            before, after, first, again = r["before"], r["after"], r["first"], r["again"]
            per = (after["rss_kib"] - before["rss_kib"]) / r["users"]
            lines.append(
                f"| {r['cap']:,} | {before['rss_kib'] / 1024:.1f} → "
                f"{after['rss_kib'] / 1024:.1f} | {per:.1f} | {before['sockets']} → "
                f"{after['sockets']} (after the second pass {r['after_again']['sockets']}) | "
                f"{before['upstream_rss_kib'] / 1024:.1f} → "
                f"{after['upstream_rss_kib'] / 1024:.1f} | {first['calls_per_s']:,.0f}, "
                f"{first['p50_ms']:.1f} / {first['p99_ms']:.1f} | {again['calls_per_s']:,.0f}, "
                f"{again['p50_ms']:.1f} / {again['p99_ms']:.1f} | "
                f"{first['failures'] + again['failures']} |"
            )
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", default=f"1,{CONNECTIONS}")
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--only", default="relay,identities")
    parser.add_argument(
        "--report",
        type=Path,
        metavar="RESULTS_JSONL",
        help="measure nothing: print the report of an earlier run's raw results",
    )
    args = parser.parse_args()
    if args.report:
        results = [json.loads(line) for line in args.report.read_text().splitlines() if line]
        print(report(results))
        return
    chosen = set(args.only.split(","))
    if not chosen <= {"relay", "identities"} or args.users < 1:
        parser.error("--only takes relay and/or identities; --users at least 1")
    connections = [int(n) for n in args.connections.split(",") if n]
    began = time.monotonic()
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    CACHE.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S")
    out = CACHE / f"relay-{stamp}.jsonl"
    ensure_wrk()
    raise_open_files()
    pin(CLIENT_CPU)()
    with services.postgres(database="mcphost_relay") as database_url, services.redis() as redis_url:
        tune_postgres(database_url)
        port = free_port()
        upstream_url = f"http://127.0.0.1:{free_port()}/mcp"
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "DEBUG": "0",
            "SECRET_KEY": SECRET_KEY,
            "PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
            "DJANGO_SETTINGS_MODULE": "mcpsite.settings",
            "PYTHONUNBUFFERED": "1",
        }
        os.environ.update(env)
        log(f"preparing the bench database ({args.users} users)")
        token, tokens = prepare_database(upstream_url, args.users)
        bench = Bench(env, port, Path(sys.executable), token, args.seconds, False, [], out)
        if "relay" in chosen:
            relay(bench, args.rounds, connections, upstream_url)
        if "identities" in chosen:
            identities(bench, tokens, upstream_url)
    minutes = round((time.monotonic() - began) / 60, 1)
    text = f"Relay benchmark, {started}, {minutes} minutes\n\n{report(bench.results)}"
    out.with_suffix(".md").write_text(text)
    print(text)
    log(f"raw results: {out}")


if __name__ == "__main__":
    main()
