#!/usr/bin/env python3
"""The comparative benchmark: our server against the official SDK and a bare ASGI app.

Usage (from the project root; it makes .venv first if needed, like dev.py):

    python3 bench/compare.py [--rounds 3] [--seconds 8] [--only SCENARIOS] [--quick]
                             [--write-docs]

Loopback only, bounded (a default run takes about 13 minutes on a 2-core VM). It starts a
throwaway PostgreSQL and Redis (scripts/services.py), then in turn, interleaved, ``--rounds``
times: our server in its production shape (one uvicorn process, uvloop + httptools, DEBUG
off, REDIS_URL set, call log on), the same under Daphne, the official ``mcp`` SDK 2.3 server
(stateful SSE, and stateless JSON which also answers 2026-07-28 requests) and a bare ASGI echo
app, both in their own virtual environment (.cache/bench/venv-sdk). The server runs on CPU 0;
wrk, PostgreSQL, Redis and this script share CPU 1. Each throughput figure is a closed loop of
32 connections for ``--seconds`` after a 2 s warm-up; server CPU per request comes from
/proc/PID/stat. After the first round the idle-stream memory is measured (once), and at the
end bench/progress_latency.py runs.

Prints a Markdown table (medians with min-max over rounds, and each of our figures as a ratio
to the SDK's figure of the same round) and the budget lines of issue #12; raw results go to
.cache/bench/results-<time>.jsonl and the table to .cache/bench/results-<time>.md.
``--write-docs`` also rewrites docs/performance.md. Speed is measured here, never asserted in
tests.
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
import platform  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from importlib import metadata  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402

sys.path.insert(0, str(ROOT))

from bench import idle_streams  # noqa: E402
from bench.common import initialize_body  # noqa: E402
from bench.load import TIMEOUT_SECONDS, Request, rss_kib, wrk  # noqa: E402
from scripts import services  # noqa: E402
from tests.support.live import free_port, wait_for_port  # noqa: E402

CACHE = ROOT / ".cache" / "bench"
SDK_VENV = CACHE / "venv-sdk"
SDK_PACKAGES = ["mcp==2.3.*", "uvicorn", "uvloop", "httptools"]
SDK_VERSIONS_OF = ["mcp", "mcp-types", "starlette", "sse-starlette", "pydantic", "anyio"]
OUR_VERSIONS_OF = ["django", "channels", "channels-redis", "django-oauth-toolkit", "psycopg"]
SERVER_VERSIONS_OF = ["uvicorn", "uvloop", "httptools"]
DOCS = ROOT / "docs" / "performance.md"
# docs/performance.md from this heading on is written by people and kept by --write-docs.
NOTES_HEADING = "## What the figures say"

CONNECTIONS = 32
WARMUP_SECONDS = 2.0
PRIME_TIMEOUT_SECONDS = 120.0
SERVER_CPU = 0
CLIENT_CPU = 1
OPEN_FILES = 65536
SECRET_KEY = "bench-secret-key-not-secret"
MESSAGE = "hello world"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
ACCEPT = {"accept": "application/json, text/event-stream"}

# Endpoints of our server (made once per run in the bench database).
PUBLIC, OAUTH, LIST_10, LIST_10K = "echo", "echo-oauth", "list-10", "list-10k"
# The public echo endpoint again, under three rate limits no call reaches (issue #27).
LIMITED = "echo-limited"
EDITED_TOOL = "tool_00000"

# Servers, by target name: how to start them.
OURS = ("ours-uvicorn", "ours-daphne")
TARGET_LABELS = {
    "ours-uvicorn": "ours, uvicorn",
    "ours-daphne": "ours, Daphne",
    "sdk-stateful": "SDK stateful (SSE)",
    "sdk-stateless": "SDK stateless JSON",
    "sdk-2026": "SDK 2026-07-28",
    "raw": "raw ASGI (ceiling)",
}


@dataclass(frozen=True)
class Scenario:
    """A throughput row family: which servers serve it, and what the SDK row to compare is."""

    name: str
    label: str
    targets: tuple[str, ...]
    # The SDK row (scenario, target) our rows are divided by, round by round. The OAuth rows
    # use the SDK's public row: the SDK serves no authorization server of its own.
    baseline: tuple[str, str] | None = None


SCENARIOS = [
    Scenario(
        "call-2026",
        "`tools/call` echo, 2026-07-28, public",
        ("ours-uvicorn", "ours-daphne", "sdk-2026", "raw"),
        ("call-2026", "sdk-2026"),
    ),
    Scenario(
        "call-2026-oauth",
        "`tools/call` echo, 2026-07-28, OAuth bearer",
        ("ours-uvicorn", "ours-daphne"),
        ("call-2026", "sdk-2026"),
    ),
    Scenario(
        "call-2026-limits",
        "`tools/call` echo, 2026-07-28, public, three active rate limits",
        ("ours-uvicorn",),
    ),
    Scenario(
        "call-legacy",
        "`tools/call` echo, 2025-11-25 session, public",
        ("ours-uvicorn", "ours-daphne", "sdk-stateful", "sdk-stateless"),
        ("call-legacy", "sdk-stateful"),
    ),
    Scenario(
        "call-legacy-oauth",
        "`tools/call` echo, 2025-11-25 session, OAuth bearer",
        ("ours-uvicorn", "ours-daphne"),
        ("call-legacy", "sdk-stateful"),
    ),
    Scenario("list-10", "`tools/list`, endpoint with 10 tools", ("ours-uvicorn",)),
    Scenario(
        "list-10k", "`tools/list`, endpoint with 10,000 tools (first page)", ("ours-uvicorn",)
    ),
    Scenario(
        "list-10k-edits",
        "`tools/list`, 10,000 tools, one catalog edit every 200 ms",
        ("ours-uvicorn",),
    ),
    Scenario(
        "session-open",
        "session open (`initialize`)",
        ("ours-uvicorn", "sdk-stateful"),
        ("session-open", "sdk-stateful"),
    ),
]
SCENARIO_BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}
IDLE = "idle-sse"
PROGRESS = "progress"
RUN = "run"  # the last raw row: when, how long, rounds, the machine and versions
ALL = [*SCENARIO_BY_NAME, IDLE, PROGRESS]
# The process that serves each target (the SDK's 2026 rows come from its stateless process).
PROCESS_OF = {"sdk-2026": "sdk-stateless"}


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- environment ---------------------------------------------------------------------------


def ensure_wrk() -> None:
    if shutil.which("wrk") is None:
        services.apt_install("wrk")  # as root; otherwise it says what to install


def ensure_sdk_venv() -> Path:
    """The SDK's own virtual environment, made once (pip from PyPI)."""
    python = SDK_VENV / "bin" / "python"
    stamp = SDK_VENV / ".bench-packages"
    if python.exists() and stamp.exists() and stamp.read_text() == " ".join(SDK_PACKAGES):
        return python
    log(f"making {SDK_VENV} ({' '.join(SDK_PACKAGES)})")
    shutil.rmtree(SDK_VENV, ignore_errors=True)
    # The interpreter .venv was made from, not .venv's: the SDK must not see our packages.
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", str(SDK_VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, *SDK_PACKAGES], check=True)
    stamp.write_text(" ".join(SDK_PACKAGES))
    return python


def raise_open_files() -> None:
    """Room for 10,000 streams in this process and in the servers it starts (inherited)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, max(hard, OPEN_FILES)))
    except (ValueError, PermissionError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def pin(cpu: int) -> Callable[[], None]:
    cpus = os.cpu_count() or 1
    return lambda: os.sched_setaffinity(0, {cpu % cpus})


def unpin() -> None:
    os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))


@dataclass
class Bench:
    """What every step needs: the services, ports, the SDK's python, tokens."""

    env: dict[str, str]
    port: int  # ours always listens here: PUBLIC_BASE_URL (and so tokens' resource) names it
    sdk_python: Path
    token: str
    seconds: float
    quick: bool
    results: list[dict[str, Any]]
    out: Path

    def record(self, row: dict[str, Any]) -> None:
        row = {"at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), **row}
        self.results.append(row)
        with self.out.open("a") as out:
            out.write(json.dumps(row) + "\n")


@contextlib.contextmanager
def server(bench: Bench, process: str) -> Iterator[tuple[str, int]]:
    """Start one server process on CPU 0; yield its base URL and pid."""
    port = bench.port if process.startswith("ours") else free_port()
    p = str(port)
    env = dict(bench.env)
    python = str(bench.sdk_python)
    fast = ["--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level", "warning"]
    if process == "ours-uvicorn":
        command = [
            sys.executable,
            "-m",
            "uvicorn",
            "mcpsite.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            p,
            "--lifespan",
            "off",
            *fast,
        ]
    elif process == "ours-daphne":
        command = [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            p,
            "-v",
            "0",
            "mcpsite.asgi:application",
        ]
    elif process in ("sdk-stateful", "sdk-stateless"):
        env["BENCH_SDK_MODE"] = process.removeprefix("sdk-")
        command = [
            python,
            "-m",
            "uvicorn",
            "bench.peers.sdk_server:app",
            "--host",
            "127.0.0.1",
            "--port",
            p,
            *fast,
        ]
    elif process == "raw":
        command = [
            python,
            "-m",
            "uvicorn",
            "bench.peers.raw_echo:app",
            "--host",
            "127.0.0.1",
            "--port",
            p,
            "--lifespan",
            "off",
            *fast,
        ]
    else:
        raise ValueError(process)
    log_path = CACHE / f"server-{process}.log"
    with log_path.open("wb") as server_log:
        child = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=server_log,
            stderr=subprocess.STDOUT,
            preexec_fn=pin(SERVER_CPU),
        )
        try:
            wait_for_port(port, child)
            yield f"http://127.0.0.1:{port}", child.pid
        finally:
            child.terminate()
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(5)


# -- the bench database ----------------------------------------------------------------------


def prepare_database(port: int) -> str:
    """Endpoints, tools and an access token in the bench database; returns the token."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import transaction

    from mcp_app.auth.resources import endpoint_resource
    from mcp_app.models import RateLimit, Tool
    from mcp_app.services.catalog_changes import catalog_changed
    from mcp_app.services.catalog_writes import endpoint_create, tool_create
    from tests.support.oauth import issue_token

    call_command("migrate", verbosity=0)
    public = endpoint_create(slug=PUBLIC, auth_mode="public")
    secured = endpoint_create(slug=OAUTH, auth_mode="oauth")
    tool_create(
        name="echo", kind="python", config={"function": "echo"}, endpoints=[public, secured]
    )
    echo = Tool.objects.get(name="echo")
    limited = endpoint_create(slug=LIMITED, auth_mode="public")
    limited.tools.add(echo)
    # Endpoint-wide, per caller and per tool; counted on every call, never reached.
    most = 2_000_000_000
    for fields in (
        {"scope": "endpoint", "rate": most},
        {"scope": "caller", "quota": most},
        {"scope": "caller", "target_kind": "tool", "target_name": "echo", "rate": most},
    ):
        RateLimit.objects.create(endpoint=limited, **fields)
    for slug, count in ((LIST_10, 10), (LIST_10K, 10_000)):
        endpoint = endpoint_create(slug=slug, auth_mode="public")
        # Row by row (signals, full_clean) would take minutes for 10,000; the version bump
        # below is what the signals would have done.
        with transaction.atomic():
            fields = {"kind": echo.kind, "config": echo.config, "input_schema": echo.input_schema}
            tools = Tool.objects.bulk_create(
                Tool(
                    name=f"tool_{n:05d}",
                    description=f"Echo number {n}: {echo.description}",
                    **fields,
                )
                for n in range(count)
            )
            through = Tool.endpoints.through
            through.objects.bulk_create(
                through(tool_id=tool.pk, endpoint_id=endpoint.pk) for tool in tools
            )
            catalog_changed(endpoint_ids=[endpoint.pk])
    user = get_user_model().objects.create_user("bench")
    # endpoint_resource reads PUBLIC_BASE_URL, which names bench.port.
    return issue_token(user, resource=[endpoint_resource(OAUTH)], scope=secured.base_scope)


# -- requests ---------------------------------------------------------------------------------


def _echo_params() -> dict[str, Any]:
    return {"name": "echo", "arguments": {"message": MESSAGE}}


def modern(method: str, params: dict[str, Any], auth: dict[str, str], name: str = "") -> Request:
    headers = {**ACCEPT, **auth, "mcp-protocol-version": "2026-07-28", "mcp-method": method}
    if name:
        headers["mcp-name"] = name
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": MODERN_META}}
    return Request(headers, body)


def legacy_call(url: str, auth: dict[str, str], params: dict[str, Any] | None = None) -> Request:
    """A tools/call (echo, unless ``params``) on a session opened now (initialize +
    initialized)."""
    headers = {**ACCEPT, **auth}
    init = httpx.post(url, headers=headers, json=initialize_body(), timeout=10)
    init.raise_for_status()
    session = {
        "mcp-session-id": init.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-11-25",
    }
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    httpx.post(url, headers={**headers, **session}, json=initialized, timeout=10)
    return Request(
        {**headers, **session},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params or _echo_params()},
    )


def request_for(scenario: str, target: str, base: str) -> tuple[str, Request]:
    """The URL and request of ``scenario`` on ``target`` (a server at ``base``)."""
    ours = target.startswith("ours")
    bearer = {"authorization": "Bearer {token}"}
    slug = OAUTH if scenario.endswith("-oauth") else PUBLIC
    if scenario == "call-2026-limits":
        slug = LIMITED
    url = f"{base}/mcp/{slug}" if ours else f"{base}/mcp"
    auth = bearer if scenario.endswith("-oauth") else {}
    if scenario.startswith("call-2026"):
        return url, modern("tools/call", _echo_params(), auth, "echo")
    if scenario.startswith("call-legacy"):
        if target == "sdk-stateless":
            headers = {**ACCEPT, "mcp-protocol-version": "2025-11-25"}
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": _echo_params()}
            return url, Request(headers, body)
        return url, Request({}, {}, extra={"legacy": auth})
    if scenario.startswith("list-10"):
        slug = LIST_10 if scenario == "list-10" else LIST_10K
        request = modern("tools/list", {}, {})
        return f"{base}/mcp/{slug}", Request(request.headers, request.body, expect="tool_0000")
    if scenario == "session-open":
        return url, Request(dict(ACCEPT), initialize_body(), expect='"protocolVersion"')
    raise ValueError(scenario)


def materialize(bench: Bench, url: str, request: Request) -> Request:
    """Fill in the token and open the session a request needs (once per server start)."""
    if "legacy" in request.extra:
        auth = {k: v.format(token=bench.token) for k, v in request.extra["legacy"].items()}
        return legacy_call(url, auth)
    headers = {k: v.format(token=bench.token) for k, v in request.headers.items()}
    return Request(headers, request.body, request.expect)


# -- runs -------------------------------------------------------------------------------------


def prime(url: str, request: Request) -> float:
    """One request alone before the load (ms): a cold cache is filled once, not 32 times."""
    body = {**request.body, "id": 0}
    began = time.perf_counter()
    answer = httpx.post(url, headers=request.headers, json=body, timeout=PRIME_TIMEOUT_SECONDS)
    elapsed = (time.perf_counter() - began) * 1000
    if answer.status_code != 200 or request.expect not in answer.text:
        raise RuntimeError(f"{url} answered {answer.status_code}: {answer.text[:300]}")
    return round(elapsed, 1)


def plan(chosen: list[str]) -> list[tuple[str, list[str]]]:
    """Server processes of one round, each with the scenarios it serves, in order."""
    steps = []
    for process in ("ours-uvicorn", "ours-daphne", "sdk-stateful", "sdk-stateless", "raw"):
        wanted = [
            s.name for s in SCENARIOS
            if s.name in chosen and any(PROCESS_OF.get(t, t) == process for t in s.targets)
        ]  # fmt: skip
        # Edits under load can leave a backlog of snapshot rebuilds behind them: a fresh
        # process, so no other figure pays for it.
        alone = [name for name in wanted if name == "list-10k-edits"]
        steps += [(process, names) for names in ([n for n in wanted if n not in alone], alone)]
    return [(process, names) for process, names in steps if names]


def throughput(bench: Bench, round_no: int, process: str, scenarios: list[str]) -> None:
    with server(bench, process) as (base, pid):
        for scenario in scenarios:
            for target in SCENARIO_BY_NAME[scenario].targets:
                if PROCESS_OF.get(target, target) != process:
                    continue
                url, template = request_for(scenario, target, base)
                request = materialize(bench, url, template)
                editor = None
                if scenario == "list-10k-edits":
                    editor = subprocess.Popen(
                        [
                            sys.executable,
                            str(ROOT / "bench" / "catalog_edits.py"),
                            "--endpoint",
                            LIST_10K,
                            "--tool",
                            EDITED_TOOL,
                            "--seconds",
                            str(WARMUP_SECONDS + bench.seconds + 1),
                        ],
                        cwd=ROOT,
                        env=bench.env,
                        stdout=subprocess.PIPE,
                        text=True,
                    )
                prime_ms = prime(url, request)
                wrk(url, request, seconds=WARMUP_SECONDS, connections=CONNECTIONS, server_pid=None)
                row = wrk(
                    url, request, seconds=bench.seconds, connections=CONNECTIONS, server_pid=pid
                )
                if editor is not None:
                    out, _ = editor.communicate(timeout=30)
                    row.update(json.loads(out.strip().splitlines()[-1]))
                row["rss_kib"] = rss_kib(pid)
                row["prime_ms"] = prime_ms
                bench.record({"round": round_no, "scenario": scenario, "target": target, **row})
                log(
                    f"round {round_no} {scenario:<16} {target:<14} {row['rps']:>9.1f} req/s "
                    f"p50 {row['p50_ms']} p99 {row['p99_ms']} ms, "
                    f"{row['cpu_us_per_req']} us/req, bad {row['bad']}"
                )


def idle(bench: Bench, round_no: int, counts: list[int], opening: int) -> None:
    for count in counts:
        with server(bench, "ours-uvicorn") as (base, pid):
            row = asyncio.run(
                idle_streams.measure(
                    port=bench.port,
                    path=f"/mcp/{PUBLIC}",
                    server_pid=pid,
                    count=count,
                    auth={},
                    timeout=240,
                    opening=opening,
                )
            )
        bench.record({"round": round_no, "scenario": IDLE, "target": "ours-uvicorn", **row})
        log(
            f"round {round_no} idle streams {count}: {row['kib_per_stream']} KiB each, "
            f"{row['opened']} opened, {row['still_open']} still open, call "
            f"{row['call_ms_while_open']} ms"
        )


def progress(bench: Bench) -> None:
    calls = "3" if bench.quick else "10"
    command = [sys.executable, str(ROOT / "bench" / "progress_latency.py"), "--calls", calls]
    # Its own PostgreSQL, Redis, Daphne and worker: both cores, as in production.
    run = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=300, preexec_fn=unpin
    )
    if run.returncode != 0:
        raise RuntimeError(f"progress_latency failed:\n{run.stderr[-2000:]}")
    row = json.loads(run.stdout.strip().splitlines()[-1])
    bench.record({"round": 1, "scenario": PROGRESS, "target": "ours-daphne", **row})
    log(f"progress latency: {row}")


# -- report -----------------------------------------------------------------------------------


def _spread(values: list[float], digits: int = 0) -> str:
    def fmt(value: float) -> str:
        return f"{value:,.{digits}f}"

    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    if len(values) == 1:
        return fmt(values[0])
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}–{fmt(max(values))})"


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(results: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """The Markdown tables and the budget figures, from the raw rows."""
    rows = [r for r in results if r["scenario"] in SCENARIO_BY_NAME]
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        by.setdefault((row["scenario"], row["target"]), []).append(row)

    def ratios(scenario: Scenario, target: str) -> list[float]:
        """Our req/s over the SDK's, round by round (same run, same host noise)."""
        if scenario.baseline is None or not target.startswith("ours"):
            return []
        base = {r["round"]: r["rps"] for r in by.get(scenario.baseline, [])}
        return [
            r["rps"] / base[r["round"]] for r in by[(scenario.name, target)] if base.get(r["round"])
        ]

    lines = [
        "| scenario | server | req/s median (min–max) | × SDK, same round | p50 / p99 ms "
        "| server CPU µs/req | first request ms | bad answers |",
        "|---|---|---|---|---|---|---|---|",
    ]
    figures: dict[str, Any] = {}
    for scenario in SCENARIOS:
        for target in scenario.targets:
            got = by.get((scenario.name, target))
            if not got:
                continue
            ratio = ratios(scenario, target)
            p50 = _median([r["p50_ms"] for r in got])
            p99s = [r["p99_ms"] for r in got]
            bad = sum((r["bad"] or 0) + r["non_2xx"] for r in got)
            timeouts = sum(r.get("timeouts", 0) for r in got)
            failed = timeouts or any(r["requests"] == 0 for r in got)
            edits = ""
            if scenario.name == "list-10k-edits":
                edits = f" ({sum(r.get('edits', 0) for r in got)} edits)"
            lines.append(
                f"| {scenario.label} | {TARGET_LABELS[target]} "
                f"| {_spread([r['rps'] for r in got])} "
                f"| {_spread(ratio, 2) + '×' if ratio else ''} "
                f"| {'none answered' if failed and not p50 else f'{p50:.1f} / {_spread(p99s, 1)}'} "
                f"| {_spread([r['cpu_us_per_req'] for r in got])} "
                f"| {_spread([r.get('prime_ms') for r in got])} "
                f"| {bad}{f', {timeouts} timeouts' if timeouts else ''}{edits} |"
            )
            figures[f"{scenario.name}/{target}"] = {
                "rps": _median([r["rps"] for r in got]),
                "cpu_us": _median([r["cpu_us_per_req"] for r in got]),
                "ratio": _median(ratio),
                "p99_ms": _median(p99s),
                # A request still unanswered after wrk's timeout has no latency in wrk's
                # figures: the worst p99 is then unknown, and over the timeout.
                "p99_max_ms": float("inf") if failed else max(p99s),
            }
    idle_rows = [r for r in results if r["scenario"] == IDLE]
    if idle_rows:
        lines += [
            "",
            "| idle SSE GET streams (uvicorn, one process) | RSS before | + sessions "
            "| + streams | KiB per stream incl. session | opened / still open | "
            "`tools/call` while open |",
            "|---|---|---|---|---|---|---|",
        ]
        for count in sorted({r["streams"] for r in idle_rows}):
            got = [r for r in idle_rows if r["streams"] == count]

            def mib(key: str, got: list[dict[str, Any]] = got) -> str:
                return _spread([r[key] / 1024 for r in got], 1)

            lines.append(
                f"| {count:,} | {mib('rss_start_kib')} MiB | {mib('rss_sessions_kib')} MiB "
                f"| {mib('rss_streams_kib')} MiB "
                f"| {_spread([r['kib_per_stream'] for r in got], 1)} "
                f"| {min(r['opened'] for r in got):,} / {min(r['still_open'] for r in got):,}"
                f"{refused_note(got)} "
                f"| {_spread([r['call_ms_while_open'] for r in got], 1)} ms |"
            )
            figures[f"idle/{count}"] = {
                "kib_per_stream": max(r["kib_per_stream"] for r in got),
                "all_open": all(r["opened"] == count == r["still_open"] for r in got),
                "opened": min(r["opened"] for r in got),
                "still_open": min(r["still_open"] for r in got),
                "call_ms": max(r["call_ms_while_open"] for r in got),
            }
    progress_rows = [r for r in results if r["scenario"] == PROGRESS]
    if progress_rows:
        p = progress_rows[-1]
        lines += [
            "",
            f"Progress notification, Celery worker → Redis → Daphne → client (SSE), "
            f"{p['events']} events: p50 {p['p50_ms']} ms, p95 {p['p95_ms']} ms, "
            f"max {p['max_ms']} ms.",
        ]
        figures["progress"] = p
    return "\n".join(lines), figures


def refused_note(rows: list[dict[str, Any]]) -> str:
    """How the streams that did not open ended, over all rounds (status 0: connection lost)."""
    refused: dict[str, int] = {}
    for row in rows:
        for status, n in row.get("refused", {}).items():
            refused[status] = refused.get(status, 0) + n
    if not refused:
        return ""

    def what(status: str) -> str:
        return "connection closed" if status == "0" else f"HTTP {status.lstrip('-')}"

    listed = ", ".join(f"{n} × {what(s)}" for s, n in sorted(refused.items()))
    return f" (not opened: {listed})"


def p99_text(p99: float | None, worst: float | None) -> str:
    if p99 is None or worst is None:
        return "n/a"
    if worst == float("inf"):
        return f"requests unanswered within a round (wrk timeout {TIMEOUT_SECONDS} s or run end)"
    return f"{p99:.1f} ms (worst round {worst:.1f})"


def budgets(figures: dict[str, Any]) -> str:
    """The issue's budget lines, each with the figure that decides it."""

    def verdict(ok: bool | None) -> str:
        return "n/a" if ok is None else ("met" if ok else "**missed**")

    def get(key: str, field: str) -> float | None:
        return figures.get(key, {}).get(field)

    checks = []
    ratio = get("call-2026-oauth/ours-uvicorn", "ratio")
    checks.append(
        (
            "2026-07-28 `tools/call`, OAuth + call log ≥ 1.5× SDK 2026 mode",
            f"{ratio:.2f}×" if ratio else "n/a",
            None if ratio is None else ratio >= 1.5,
        )
    )
    ratio = get("call-legacy-oauth/ours-uvicorn", "ratio")
    checks.append(
        (
            "2025-11-25 session `tools/call`, OAuth + call log ≥ 2.5× SDK stateful",
            f"{ratio:.2f}×" if ratio else "n/a",
            None if ratio is None else ratio >= 2.5,
        )
    )
    bare, limited = (
        get("call-2026/ours-uvicorn", "cpu_us"),
        get("call-2026-limits/ours-uvicorn", "cpu_us"),
    )
    more = limited / bare if bare and limited else None
    checks.append(
        (
            "`tools/call` under three active rate limits ≤ 1.15× the server CPU of none",
            f"{more:.2f}× ({limited:.0f} vs {bare:.0f} µs/req)" if more else "n/a",
            None if more is None else more <= 1.15,
        )
    )
    small, large = get("list-10/ours-uvicorn", "rps"), get("list-10k/ours-uvicorn", "rps")
    slower = small / large if small and large else None
    checks.append(
        (
            "`tools/list` on 10,000 tools within 1.5× of the 10-tool figure",
            f"{slower:.2f}× slower" if slower else "n/a",
            None if slower is None else slower <= 1.5,
        )
    )
    p99 = get("list-10k-edits/ours-uvicorn", "p99_ms")
    worst = get("list-10k-edits/ours-uvicorn", "p99_max_ms")
    checks.append(
        (
            "`tools/list` p99 during catalog edits < 500 ms",
            p99_text(p99, worst),
            None if p99 is None else worst < 500,
        )
    )
    ratio = get("session-open/ours-uvicorn", "ratio")
    checks.append(
        (
            "session open rate ≥ SDK's",
            f"{ratio:.2f}×" if ratio else "n/a",
            None if ratio is None else ratio >= 1.0,
        )
    )
    per = [figures[k]["kib_per_stream"] for k in figures if k.startswith("idle/")]
    checks.append(
        (
            "idle SSE stream incl. session ≤ 30 KiB",
            f"{max(per):.1f} KiB (worst)" if per else "n/a",
            None if not per else max(per) <= 30,
        )
    )
    big = figures.get("idle/10000")
    checks.append(
        (
            "10,000 idle streams in one process still answering calls",
            f"{big['opened']:,} opened, {big['still_open']:,} still open; a call meanwhile "
            f"answered in {big['call_ms']:.0f} ms"
            if big
            else "n/a",
            None if big is None else big["all_open"],
        )
    )
    lines = ["| budget | figure | verdict |", "|---|---|---|"]
    lines += [f"| {name} | {figure} | {verdict(ok)} |" for name, figure, ok in checks]
    return "\n".join(lines)


def versions(sdk_python: Path) -> dict[str, str]:
    found = {}
    for name in [*OUR_VERSIONS_OF, *SERVER_VERSIONS_OF, "daphne", "twisted"]:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[name] = metadata.version(name)
    script = (
        "import json, importlib.metadata as m; "
        f"print(json.dumps({{n: m.version(n) for n in {SDK_VERSIONS_OF + SERVER_VERSIONS_OF!r}}}))"
    )
    sdk = json.loads(
        subprocess.run(
            [str(sdk_python), "-c", script], capture_output=True, text=True, check=True
        ).stdout
    )
    found.update({f"SDK venv: {k}": v for k, v in sdk.items()})
    wrk_version = subprocess.run(["wrk", "-v"], capture_output=True, text=True)
    found["wrk"] = (wrk_version.stdout + wrk_version.stderr).split()[1]
    bindir = services.find_pg_bindir()
    if bindir:
        pg = subprocess.run([str(bindir / "postgres"), "--version"], capture_output=True, text=True)
        found["PostgreSQL"] = pg.stdout.split()[2]  # "postgres (PostgreSQL) 15.18 (Debian ...)"
    redis = services.find_redis_server()
    if redis:
        out = subprocess.run([str(redis), "--version"], capture_output=True, text=True).stdout
        found["Redis"] = next((p.split("=")[1] for p in out.split() if p.startswith("v=")), "?")
    return found


def machine(sdk_python: Path) -> str:
    cpu = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        cpu = next(
            (line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "?"
        )
    mem = "?"
    with contextlib.suppress(OSError), open("/proc/meminfo") as info:
        mem = f"{int(info.readline().split()[1]) / 1024 / 1024:.0f} GiB"
    commit = subprocess.run(
        ["git", "log", "-1", "--format=%h %s"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    branch = subprocess.run(
        ["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    # The server code measured: the newest commit that changed it (the harness may be newer).
    server_code = subprocess.run(
        ["git", "log", "-1", "--format=%h %s", "--", "mcp_app", "mcpsite", "requirements.lock"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "mcp_app", "mcpsite"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    found = versions(sdk_python)
    listed = ", ".join(f"{k} {v}" for k, v in found.items())
    return "\n".join(
        [
            f"- Machine: {os.cpu_count()} CPUs ({cpu}), {mem}, kernel {platform.release()}, "
            f"Python {platform.python_version()}.",
            f"- Code: branch `{branch}` at `{commit}`; server code as of `{server_code}`"
            f"{' plus uncommitted changes' if dirty else ''}.",
            f"- Versions: {listed}.",
        ]
    )


DOC_HEAD = """# Performance

Measured by `python3 bench/compare.py` (issue #12): loopback only, one server process pinned to
CPU 0, wrk (one thread, {connections} connections, closed loop), PostgreSQL, Redis and the
harness on CPU 1. Each throughput cell is the median of {rounds} interleaved round(s) of
{seconds:g} s (after a 2 s warm-up), with the range over rounds; "× SDK" divides our req/s by
the SDK's in the same round, then takes the median. Server CPU per request is the server
process's utime + stime over the run divided by the requests. A "bad answer" is a status other
than 200 or an answer without the expected text (wrk's Lua checks every response).
Speed is measured here, never asserted in tests. Re-run: `python3 bench/compare.py
--write-docs` (about 13 minutes); `--report .cache/bench/results-<time>.jsonl --write-docs`
republishes an earlier run without measuring.

Reading the figures: the host is shared and noisy (the same configuration can move by a third
from round to round), so compare rows of the same round (the "× SDK" column) and look at server
CPU per request, the steadier figure. At 32 connections a closed loop saturates the server, so
p50/p99 there are queueing times; the raw ASGI row is bounded by wrk sharing CPU 1, not by the
app. "First request" is one request alone before the load (a cold cache is filled once, not by
32 requests at the same time).

## How each server runs

- **Ours** in its production shape: one `uvicorn mcpsite.asgi:application --loop uvloop --http
  httptools --lifespan off --no-access-log` process (the Daphne rows: `daphne -v 0`), DEBUG off,
  PostgreSQL (`fsync` and `synchronous_commit` on, as in production) and Redis (`REDIS_URL`),
  call log on (every request is recorded). The echo tool is the built-in `echo`; the OAuth rows
  send a bearer token issued for the `echo-oauth` endpoint (token cache on, as in production).
  The `tools/list` endpoints hold 10 and 10,000 tools (same schema); a page is
  `MCP_PAGE_SIZE` = 100 tools, so the 10,000-tool figure serves its first page. During the
  "catalog edit" row a separate process saves one tool of that endpoint through the ORM every
  200 ms (signals fire, the catalog version is bumped, every process is told).
- **SDK**: `mcp` 2.3 `MCPServer` with one `async def echo(message: str) -> str` tool,
  `streamable_http_app()` under the same uvicorn options in its own virtual environment:
  stateful (sessions, SSE answers, `max_sessions` lifted), and stateless + `json_response`
  (2025-11-25 without a session); the 2026-07-28 rows are served by the stateless process.
- **raw ASGI**: `bench/peers/raw_echo.py`, decode, answer, encode: the ceiling of Python here.
- Legacy rows run on one session opened before the run (`initialize` + `initialized`); the
  session-open row sends `initialize` only, a new session per request.
- Idle streams (measured once, after the first round): N sessions, then one GET stream each
  (50 opening at a time, `--opening`), held open; RSS of the server process before and after,
  divided by the streams that opened, and one `tools/call` answered while they are open
  (`bench/idle_streams.py`). A fresh server process for each N.

"""


def render(figures_table: str, budget_table: str, meta: dict[str, Any]) -> str:
    head = DOC_HEAD.format(connections=CONNECTIONS, rounds=meta["rounds"], seconds=meta["seconds"])
    return "\n".join(
        [
            head.rstrip() + "\n",
            f"## Latest run: {meta['started']}, {meta['minutes']} minutes\n",
            meta["info"] + "\n",
            "### Budget lines (issue #12)\n",
            budget_table + "\n",
            "### Figures\n",
            figures_table + "\n",
        ]
    )


def tune_postgres(database_url: str) -> None:
    """Durable commits, as production has (the throwaway cluster turns them off for tests)."""
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        for name in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {name} = on")
        conn.execute("SELECT pg_reload_conf()")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--only", default="", help=f"comma-separated, of: {','.join(ALL)}")
    parser.add_argument("--quick", action="store_true", help="1 round of 3 s runs (smoke check)")
    parser.add_argument("--streams", default="1000,10000", help="idle stream counts")
    parser.add_argument(
        "--opening",
        type=int,
        default=50,
        help="idle streams opening at the same time (a burst of reconnects)",
    )
    parser.add_argument("--write-docs", action="store_true", help="rewrite docs/performance.md")
    parser.add_argument(
        "--report",
        type=Path,
        metavar="RESULTS_JSONL",
        help="measure nothing: print (and with --write-docs publish) the "
        "report of an earlier run's raw results",
    )
    args = parser.parse_args()
    if args.report:
        results = [json.loads(line) for line in args.report.read_text().splitlines() if line]
        publish(results, args.report, args.write_docs)
        return
    if args.quick:
        args.rounds, args.seconds = 1, 3.0
    chosen = [s for s in args.only.split(",") if s] or ALL
    unknown = set(chosen) - set(ALL)
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    # A ratio needs its SDK row from the same round.
    for name in list(chosen):
        baseline = SCENARIO_BY_NAME[name].baseline if name in SCENARIO_BY_NAME else None
        if baseline and baseline[0] not in chosen:
            chosen.append(baseline[0])
    began = time.monotonic()
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    CACHE.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S")
    out = CACHE / f"results-{stamp}.jsonl"
    ensure_wrk()
    sdk_python = ensure_sdk_venv()
    raise_open_files()
    # PostgreSQL, Redis, wrk and the catalog editor inherit CPU 1; servers move to CPU 0.
    pin(CLIENT_CPU)()
    with services.postgres(database="mcphost_bench") as database_url, services.redis() as redis_url:
        tune_postgres(database_url)
        port = free_port()
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
        log("preparing the bench database (10,000 tools)")
        token = prepare_database(port)
        bench = Bench(env, port, sdk_python, token, args.seconds, args.quick, [], out)
        for round_no in range(1, args.rounds + 1):
            for process, scenarios in plan(chosen):
                throughput(bench, round_no, process, scenarios)
            # Memory is steady from round to round, and 10,000 streams take a minute and a
            # half: once, after the first round's throughput runs.
            if IDLE in chosen and round_no == 1:
                counts = [int(n) for n in args.streams.split(",") if n]
                idle(bench, round_no, counts, args.opening)
    if PROGRESS in chosen:
        progress(bench)
    minutes = round((time.monotonic() - began) / 60, 1)
    meta = {
        "scenario": RUN,
        "started": started,
        "minutes": minutes,
        "rounds": args.rounds,
        "seconds": args.seconds,
        "info": machine(sdk_python),
    }
    bench.record(meta)
    publish(bench.results, out, args.write_docs)


def publish(results: list[dict[str, Any]], out: Path, write_docs: bool) -> None:
    """Print the report of ``results``, keep it next to the raw file, and maybe in the docs."""
    table, figures = summarize(results)
    meta = next((r for r in reversed(results) if r["scenario"] == RUN), None)
    if meta is None:  # a run that stopped early: what can be told from the rows
        rounds = max((r.get("round", 1) for r in results), default=1)
        meta = {
            "started": results[0]["at"] if results else "?",
            "minutes": float("nan"),
            "rounds": rounds,
            "seconds": float("nan"),
            "info": machine(ensure_sdk_venv()),
        }
    document = render(table, budgets(figures), meta)
    report = out.with_suffix(".md")
    report.write_text(document)
    print(document)
    log(f"raw results: {out}; table: {report}; {meta['minutes']} minutes")
    if write_docs:
        # The hand-written reading of the figures stays when the table is measured anew.
        notes = DOCS.read_text().partition(NOTES_HEADING)[2] if DOCS.exists() else ""
        if notes:
            document = f"{document.rstrip()}\n\n{NOTES_HEADING}{notes}"
        DOCS.write_text(document)
        log(f"wrote {DOCS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
