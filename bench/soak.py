#!/usr/bin/env python3
"""The soak (issue #13): a long mixed load on real processes through Redis and PostgreSQL restarts.

Usage (from the project root; it makes .venv first if needed, like dev.py):

    python3 bench/soak.py [--minutes 10] [--clients 200] [--web 2] [--write-docs]
    python3 bench/soak.py --from-result .cache/soak/result-<time>.json [--write-docs]

Loopback only, bounded: every wait has a limit and everything it starts ends with it. It starts
a private PostgreSQL and Redis (the fault tests' classes, tests/faults/conftest.py), migrates
and seeds them (endpoint "faults": `echo` inline, `countdown` on a worker), one Celery worker
and ``--web`` web processes (uvicorn and Daphne alternately). Then ``--clients`` asyncio
clients (bench/soak_fleet.py) run for ``--minutes``, each looping over a weighted mix of 2026-07-28
requests, 2025-11-25 sessions with GET streams dropped and DELETEs, and 1-3 s background
calls, some cancelled, mixed with management traffic (issue #25) against the same web
processes: management API reads and conditional writes, admin pages with a signed-in staff
session and catalog imports (dry runs mostly), by staff superusers with API tokens (one per
``CLIENTS_PER_USER`` clients, so the API's per-user throttle is not what is measured). At a
third of the run Redis is SIGKILLed and started again on its port; at two thirds PostgreSQL is
stopped (``pg_ctl -m fast``), left down a few seconds and started. Web RSS and open
descriptors and the database's connections are sampled every 5 s; each process names its
connections (``DATABASE_APPLICATION_NAME``), counted every second to check the web processes'
pool bound.

After the fleet stops it waits (bounded) for the call log to stop growing and for background
calls to settle, then prints a Markdown report (figures and a verdict per criterion of the
issue) and keeps raw figures and the processes' logs in .cache/soak/. ``--write-docs`` also
writes the report to docs/soak.md; ``--from-result`` reports a saved run again without running
anything. The criteria are fixed here, before the run, and the report states them; a failed
criterion is reported as failed, with its numbers.
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
import re  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(ROOT))

from bench.soak_fleet import OPERATION_LIMIT_SECONDS, Fleet, Management  # noqa: E402
from scripts import services  # noqa: E402
from tests.faults.conftest import FAULT_ENV, SEED, SLUG, Postgres, Redis  # noqa: E402
from tests.support.live import SERVERS, free_port, wait_for_port  # noqa: E402

CACHE = ROOT / ".cache" / "soak"
DOCS = ROOT / "docs" / "soak.md"
SECRET_KEY = "soak-secret-key-not-secret"

SAMPLE_SECONDS = 5.0
# Database connections by process, counted this often for their peaks.
CONNECTION_SAMPLE_SECONDS = 1.0
# The production default of DATABASE_POOL_MAX_SIZE, set explicitly for the web processes.
POOL_MAX_SIZE = 10
# After each outage, this long still counts as inside its window: clients retry, pools refill.
GRACE_SECONDS = 5.0
POSTGRES_DOWN_SECONDS = 5.0
WORKER_CONCURRENCY = 8
WORKER_READY_SECONDS = 60.0
# A job lost with Redis's memory fails "No worker started" after this long (settled by its
# follower); the production default (60 s) would only lengthen the drain.
START_TIMEOUT_SECONDS = 20
# How long after the fleet stops background calls may take to reach a final status: the
# start timeout, plus the longest call, plus slack for a loaded machine.
SETTLE_SECONDS = START_TIMEOUT_SECONDS + 20
FLEET_STOP_SECONDS = 160.0
LOG_STABLE_SECONDS = 5.0
LOG_FLUSH_LIMIT_SECONDS = 90.0

# The criteria, fixed before the run.
RSS_GROWTH_LIMIT = 0.10  # last post-warm-up sample at most 10 % above the first
# Descriptors follow open connections, which vary with the mix from one sample to the next:
# the median of the last third of the samples after warm-up against that of the first third.
FDS_GROWTH_LIMIT = 0.25

# Management: one staff superuser (API token, admin session) per this many clients, and the
# tools the API writes and catalog imports edit (published on the endpoint, like the others).
CLIENTS_PER_USER = 10
MANAGED_TOOLS = 4
ADMIN_PASSWORD = "soak-admin-password-not-secret"
MANAGEMENT_SEED = """
import json
from django.contrib.auth import get_user_model
from mcp_app.models import Endpoint
from mcp_app.services.api_tokens import api_token_create
from mcp_app.services.catalog_writes import tool_create
endpoint = Endpoint.objects.get(slug={slug!r})
tools = [
    tool_create(name=f"managed{{i}}", kind="python", config={{"function": "echo"}},
                endpoints=[endpoint]).pk
    for i in range({tools})
]
users = []
for i in range({users}):
    user = get_user_model().objects.create_superuser(f"soak-admin-{{i}}", None, {password!r})
    users.append((user.username, {password!r}, api_token_create(user=user, name="soak")[1]))
print("SOAK-SETUP " + json.dumps({{"tools": tools, "users": users}}))
"""


def log(message: str) -> None:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%H:%M:%S")
    print(f"[soak {stamp}] {message}", file=sys.stderr, flush=True)


@dataclass
class Proc:
    """A process the soak started, with its log file."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)


def spawn(name: str, args: list[str], env: dict[str, str], logs: Path) -> Proc:
    log_path = logs / f"{name}.log"
    with open(log_path, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, *args],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Proc(name, process, log_path)


@dataclass
class Web:
    proc: Proc
    server: str
    url: str


@dataclass
class Stack:
    workdir: Path
    logs: Path
    postgres: Postgres
    redis: Redis
    env: dict[str, str] = field(default_factory=dict)
    worker: Proc | None = None
    # Workers past the first (bench/capacity.py's fleet runs two); the soak runs one.
    more_workers: list[Proc] = field(default_factory=list)
    webs: list[Web] = field(default_factory=list)
    management: Management | None = None

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        return self.postgres.query(sql, *params)

    def start(
        self,
        web_count: int,
        users: int,
        *,
        workers: int = 1,
        servers: tuple[str, ...] = ("uvicorn", "daphne"),
    ) -> None:
        """Migrate and seed, then start ``workers`` Celery workers and ``web_count`` web
        processes (``servers`` in turn)."""
        self.postgres.init()
        self.redis.start()
        self.env = {
            **FAULT_ENV,
            # Production bounds for the heartbeat and lost-worker detection: the soak must not
            # pass only thanks to the fault tests' short ones.
            "MCP_BACKGROUND_HEARTBEAT_SECONDS": "1",
            "MCP_BACKGROUND_LOST_AFTER_SECONDS": "10",
            "MCP_BACKGROUND_START_TIMEOUT_SECONDS": str(START_TIMEOUT_SECONDS),
            "MCP_SSE_KEEPALIVE_SECONDS": "15",
            "DATABASE_URL": self.postgres.url,
            "REDIS_URL": self.redis.url,
            "CELERY_BROKER_URL": self.redis.url,
            "SECRET_KEY": SECRET_KEY,
            "PYTHONUNBUFFERED": "1",
            "DATABASE_POOL_MAX_SIZE": str(POOL_MAX_SIZE),
            "DATABASE_APPLICATION_NAME": "soak-setup",
        }
        management_seed = MANAGEMENT_SEED.format(
            slug=SLUG, tools=MANAGED_TOOLS, users=users, password=ADMIN_PASSWORD
        )
        for args in (
            ["migrate", "--verbosity", "0"],
            ["shell", "-c", SEED],
            ["shell", "-c", management_seed],
        ):
            done = subprocess.run(
                [sys.executable, "manage.py", *args],
                cwd=ROOT,
                env={**os.environ, **self.env},
                check=True,
                capture_output=True,
                text=True,
            )
        setup = json.loads(done.stdout.split("SOAK-SETUP ", 1)[1])
        for n in range(workers):
            name = "worker" if n == 0 else f"worker{n}"
            worker = spawn(
                name,
                [
                    "-m", "celery", "-A", "mcpsite", "worker", "--pool", "prefork",
                    "--concurrency", str(WORKER_CONCURRENCY),
                    "--hostname", f"soak-{os.getpid()}-{n}@localhost", "--loglevel", "WARNING",
                    "--without-gossip", "--without-mingle", "--without-heartbeat",
                ],
                {**self.env, "DATABASE_APPLICATION_NAME": f"soak-{name}"},
                self.logs,
            )  # fmt: skip
            if n == 0:
                self.worker = worker
            else:
                self.more_workers.append(worker)
        for n in range(web_count):
            server = servers[n % len(servers)]
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            args = [arg.format(port=port) for arg in SERVERS[server]]
            name = f"web{n}-{server}"
            env = {**self.env, "PUBLIC_BASE_URL": base, "DATABASE_APPLICATION_NAME": f"soak-{name}"}
            proc = spawn(name, args, env, self.logs)
            self.webs.append(Web(proc, server, f"{base}/mcp/{SLUG}"))
            wait_for_port(port, proc.process)
        self.management = Management(
            bases=[web.url.rsplit("/mcp/", 1)[0] for web in self.webs],
            users=[(name, password, key) for name, password, key in setup["users"]],
            tool_ids=setup["tools"],
        )
        self._wait_worker_ready()

    def _wait_worker_ready(self) -> None:
        assert self.worker is not None
        # --loglevel WARNING hides " ready."; ask the worker itself instead.
        deadline = time.monotonic() + WORKER_READY_SECONDS
        while time.monotonic() < deadline:
            if self.worker.process.poll() is not None:
                raise RuntimeError(f"celery worker exited early:\n{self.worker.log()[-3000:]}")
            ping = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "mcpsite",
                    "inspect",
                    "ping",
                    "--timeout",
                    "2",
                ],
                cwd=ROOT,
                env={**os.environ, **self.env},
                capture_output=True,
                text=True,
                timeout=30,
            )
            if ping.returncode == 0 and "pong" in ping.stdout:
                return
            time.sleep(0.5)
        raise TimeoutError(f"celery worker not ready in {WORKER_READY_SECONDS} s")

    def stop(self) -> None:
        for web in self.webs:
            web.proc.stop()
        for worker in [*([self.worker] if self.worker else []), *self.more_workers]:
            worker.stop()
        self.redis.stop()
        if self.postgres.running():
            with contextlib.suppress(RuntimeError):
                self.postgres.stop("fast")


# Sampling /proc and pg_stat_activity.


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def open_fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def db_connections(stack: Stack) -> int | None:
    try:
        rows = stack.query(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = %s AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
            stack.postgres.url.rsplit("/", 1)[1],
        )
    except Exception:  # noqa: BLE001 - down during the outage: no sample
        return None
    return int(rows[0][0])


def db_connections_by_process(stack: Stack) -> dict[str, int] | None:
    """Client connections to the soak's database by ``application_name`` (the process)."""
    try:
        rows = stack.query(
            "SELECT application_name, count(*) FROM pg_stat_activity"
            " WHERE datname = %s AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
            " GROUP BY 1",
            stack.postgres.url.rsplit("/", 1)[1],
        )
    except Exception:  # noqa: BLE001 - down during the outage: no sample
        return None
    return {str(name): int(count) for name, count in rows}


async def connection_peaks(stack: Stack, peaks: dict[str, int], stop: asyncio.Event) -> None:
    """The most connections seen per process, and of all web processes together."""
    webs = [f"soak-{web.proc.name}" for web in stack.webs]
    while not stop.is_set():
        counts = await asyncio.to_thread(db_connections_by_process, stack)
        if counts is not None:
            counts["all web processes"] = sum(counts.get(name, 0) for name in webs)
            for name, count in counts.items():
                peaks[name] = max(peaks.get(name, 0), count)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), CONNECTION_SAMPLE_SECONDS)


def sample(stack: Stack, t: float) -> dict[str, Any]:
    row: dict[str, Any] = {"t": round(t, 1), "db_connections": db_connections(stack)}
    row["worker_alive"] = stack.worker is not None and stack.worker.process.poll() is None
    for web in stack.webs:
        row[f"{web.proc.name}_rss_kib"] = rss_kib(web.proc.process.pid)
        row[f"{web.proc.name}_fds"] = open_fds(web.proc.process.pid)
    return row


async def sampler(
    stack: Stack, t0: float, samples: list[dict[str, Any]], stop: asyncio.Event
) -> None:
    while not stop.is_set():
        samples.append(await asyncio.to_thread(sample, stack, time.time() - t0))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), SAMPLE_SECONDS)


# The outages.


async def outages(
    stack: Stack, t0: float, seconds: float, windows: list[dict[str, Any]], stop: asyncio.Event
) -> None:
    async def at(fraction: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), max(0.0, t0 + seconds * fraction - time.time()))
        return not stop.is_set()

    if await at(1 / 3):
        start = time.time()
        log("Redis: SIGKILL, then start on the same port")
        await asyncio.to_thread(stack.redis.kill)
        await asyncio.to_thread(stack.redis.start)
        windows.append(
            {"what": "Redis restart (SIGKILL + start)", "start": start, "end": time.time()}
        )
    if await at(2 / 3):
        start = time.time()
        log(f"PostgreSQL: pg_ctl stop -m fast, {POSTGRES_DOWN_SECONDS:g} s down, start")
        await asyncio.to_thread(stack.postgres.stop, "fast")
        await asyncio.sleep(POSTGRES_DOWN_SECONDS)  # the outage itself
        await asyncio.to_thread(stack.postgres.start)
        windows.append(
            {"what": "PostgreSQL restart (stop -m fast, start)", "start": start, "end": time.time()}
        )


# After the run.


ROWS_BY_STATUS = "SELECT http_status, count(*) FROM mcp_app_calllog GROUP BY 1 ORDER BY 1"


def call_log_rows(stack: Stack) -> int:
    return int(stack.query("SELECT count(*) FROM mcp_app_calllog")[0][0])


async def wait_call_log_stable(stack: Stack) -> tuple[int, float]:
    """The call log's row count once it has not changed for LOG_STABLE_SECONDS (bounded)."""
    started = time.monotonic()
    last, since = -1, time.monotonic()
    while time.monotonic() - started < LOG_FLUSH_LIMIT_SECONDS:
        count = await asyncio.to_thread(call_log_rows, stack)
        if count != last:
            last, since = count, time.monotonic()
        elif time.monotonic() - since >= LOG_STABLE_SECONDS:
            break
        await asyncio.sleep(0.5)
    return last, time.monotonic() - started


def active_calls(stack: Stack) -> list[tuple[Any, ...]]:
    return stack.query(
        "SELECT id, status, created_at FROM mcp_app_backgroundcall"
        " WHERE status IN ('queued', 'working', 'input_required')"
    )


async def wait_calls_settled(stack: Stack) -> tuple[list[tuple[Any, ...]], float]:
    started = time.monotonic()
    while True:
        active = await asyncio.to_thread(active_calls, stack)
        if not active or time.monotonic() - started >= SETTLE_SECONDS:
            return active, time.monotonic() - started
        await asyncio.sleep(1.0)


def log_problems(text: str) -> Counter[str]:
    """ERROR/CRITICAL lines and exceptions raised in a process log, by text (numbers blanked)."""
    found: Counter[str] = Counter()
    for line in text.splitlines():
        if (
            "ERROR" in line
            or "CRITICAL" in line
            or "Unrecoverable" in line
            or re.match(r"^[A-Za-z_][\w.]*(Error|Exception)\b", line)
        ):
            found[re.sub(r"[0-9a-f]{8,}|\d+", "N", line.strip())[:160]] += 1
    return found


# The report.


def _fmt_mib(kib: float | None) -> str:
    return "-" if kib is None else f"{kib / 1024:.1f}"


def series(samples: list[dict[str, Any]], key: str, after: float) -> list[float]:
    return [s[key] for s in samples if s["t"] >= after and s.get(key) is not None]


def git_commit() -> str:
    out = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")


def machine() -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = ""
    with contextlib.suppress(OSError):
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kib / 1024 / 1024:.0f} GiB RAM"
    system = f"{platform.system()} {platform.release()}"
    return f"{os.cpu_count()} × {cpu}{mem}, {system}, Python {platform.python_version()}"


def verdict(ok: bool) -> str:
    return "**pass**" if ok else "**FAIL**"


def render(result: dict[str, Any]) -> str:
    p, fleet, c = result["parameters"], result["fleet"], result["criteria"]
    lines: list[str] = []
    add = lines.append

    def row(*cells: object) -> None:
        add("| " + " | ".join(str(cell) for cell in cells) + " |")

    short = p["minutes"] < 10 or p["clients"] < 200
    command = "python3 bench/soak.py"
    if short:
        command += f" --minutes {p['minutes']:g} --clients {p['clients']}"
    if p["web"] != 2:
        command += f" --web {p['web']}"
    managed = "management" in fleet  # runs before issue #25 had none
    add("# Soak (issues #13 and #25)" if managed else "# Soak (issue #13)")
    add("")
    add(
        f"Produced by `{command} --write-docs`; the script's docstring says how it works. "
        "Figures of one run, not a median."
    )
    if short:
        add("")
        add(
            f"**This is a short run ({p['minutes']:g} min, {p['clients']} clients), not the "
            "issue's 10 minutes with 200 clients.**"
        )
    add("")
    add(f"- Date: {result['date']} UTC; commit {result['commit']}")
    add(f"- Machine: {result['machine']}; all processes and the client fleet on 127.0.0.1")
    add(
        f"- Processes: web {', '.join(result['web_servers'])}; one Celery prefork worker "
        f"(concurrency {WORKER_CONCURRENCY}); PostgreSQL {result['postgres_version']}; Redis "
        f"{result['redis_version']}. Settings as in production except background calls' start "
        f"timeout ({START_TIMEOUT_SECONDS} s) and the fault tests' logging."
    )
    add(
        f"- Load: {p['clients']} concurrent clients for {p['minutes']:g} min, each looping: "
        "pick an operation by weight, run it, think 0.5-1.5 s. Client timeouts: 30 s per "
        f"request, 90 s for background calls, {OPERATION_LIMIT_SECONDS:g} s per operation."
    )
    add("- Operations (weight): " + "; ".join(f"{k} ({v})" for k, v in fleet["weights"].items()))
    if managed:
        add(
            f"- Management: {result['management_users']} staff superusers, each with an API "
            "token (`Authorization: Bearer`) and an admin session signed in through the login "
            f"form, shared by the clients (client i is user i mod {result['management_users']}); "
            f"{MANAGED_TOOLS} python tools on the endpoint are the ones PATCHed and imported. "
            "Each prompt operation creates a prompt of its own name and deletes it. Try-it is "
            "not used (it writes call-log rows)."
        )
    add(
        "- Outages: Redis SIGKILLed and started again on its port at 1/3 of the run; "
        f"PostgreSQL stopped (`pg_ctl stop -m fast`), {POSTGRES_DOWN_SECONDS:g} s down, started "
        f"at 2/3. A window runs from the fault to the end of the restart plus {GRACE_SECONDS:g} s; "
        "an exchange is inside it when it overlaps it (from sending to the status line, or to "
        "the failure)."
    )
    for w in result["windows"]:
        add(f"  - {w['what']}: t = {w['start_rel']:.1f} s to {w['end_rel']:.1f} s")
    add("")
    add("## Criteria")
    add("")
    row(
        "criterion (issues #13, #25)" if managed else "criterion (issue #13)", "measured", "verdict"
    )
    row("---", "---", "---")
    row(
        "zero 5xx outside the outage windows" + (" (MCP, API and admin)" if managed else ""),
        f"{fleet['5xx_outside']} outside ({fleet['5xx_inside']} inside)",
        verdict(c["no_5xx"]),
    )
    if managed:
        sent = sum(m["sent"] for m in fleet["management"].values())
        row(
            "management exchanges answer an expected status (a 5xx aside: the row above)",
            f"{fleet['unexpected']} unexpected of {sent} management requests",
            verdict(c["management_expected"]),
        )
    failed = fleet.get("mcp_failed", fleet["errors_inside"] + fleet["errors_outside"])
    unanswered = failed + fleet["abandoned_exchanges"]
    row(
        "call-log rows equal to messages answered",
        f"{result['messages_answered']} MCP requests answered, {result['call_log_rows']} rows "
        f"({result['call_log_rows'] - result['messages_answered']:+d}); {unanswered} exchanges "
        "without a status line are in neither count",
        verdict(c["call_log"]),
    )
    row(
        "no call stuck",
        f"{len(result['stuck'])} background calls not final {result['stuck_checked_at']:.0f} s "
        f"after the load ended (waited up to {SETTLE_SECONDS} s for them)",
        verdict(c["no_stuck"]),
    )
    row("web RSS flat after warm-up", result["rss_text"], verdict(c["rss_flat"]))
    row("open file descriptors flat after warm-up", result["fds_text"], verdict(c["fds_flat"]))
    row("database connections bounded", result["db_text"], verdict(c["db_bounded"]))
    add("")
    worker = result["worker"]
    if worker["alive_at_end"]:
        add("The Celery worker was alive at the end of the run.")
    else:
        add(
            f"**The Celery worker died during the run** (last seen alive at t = "
            f"{worker['last_alive']:.0f} s, exit code {worker['exit_code']}); its log: "
            f'`{worker["fatal_line"]}`. Background calls sent after that failed "No worker '
            'started this call" once their start timeout passed, so from then on no call ran: '
            '"no call stuck" and the database connections after that time speak for the web '
            "processes only, and the PostgreSQL restart happened with no call running. The "
            "soak does not restart the worker (a production supervisor would)."
        )
    add("")
    add("How each figure is counted:")
    add("")
    add(
        "- *Messages answered*: HTTP requests to the endpoint whose status line reached the "
        "client, whatever the status (a 503 is recorded too). The call log keeps one row per "
        "JSON-RPC message and one per request without one (GET, DELETE), and the fleet sends "
        "no batches, so each is one row: a JSON-RPC response received, a notification accepted "
        "with 202, a GET stream opened (its row is written when it ends), a DELETE answered, a "
        "2026 call cancelled by the client after its status line (row `cancelled`). Clients "
        "cancel only after the status line, so every cancelled request is counted. An exchange "
        "that failed before its status line may or may not have reached the server: it is "
        "counted apart. Rows are counted once the table has not grown for "
        f"{LOG_STABLE_SECONDS:g} s, minus the rows of the priming requests made before the load."
    )
    add(
        "- *Stuck*: background-call rows still `queued`, `working` or `input_required` once "
        f"the load ended, waited for up to {SETTLE_SECONDS} s (a job lost with Redis's memory "
        f'settles as "not started" after the start timeout, {START_TIMEOUT_SECONDS} s here).'
    )
    add(
        f"- *Flat*: warm-up is the first {result['warmup_seconds']:.0f} s of the load. RSS: per "
        f"web process, the last sample of the load at most {RSS_GROWTH_LIMIT:.0%} above the "
        "first after warm-up. Descriptors follow open connections, which vary with the mix from "
        "one sample to the next: the median of the last third of the samples after warm-up at "
        f"most {FDS_GROWTH_LIMIT:.0%} above the median of the first third. Both use the samples "
        "of the nominal run only, not those of its last operations finishing afterwards."
    )
    add(
        "- *Bounded*: client connections to the database (`pg_stat_activity`, the sampler's own "
        f"excluded) stay below `max_connections` ({result['max_connections']}), and the most "
        "after the PostgreSQL restart is at most 10 % above the most before it."
        + (
            " The web processes use a connection pool: each process's connections (its "
            f"`DATABASE_APPLICATION_NAME`), counted every {CONNECTION_SAMPLE_SECONDS:g} s, stay "
            f"within `DATABASE_POOL_MAX_SIZE` ({result['pool_max_size']}), and all of theirs "
            "within web processes × pool size."
            if "connection_peaks" in result
            else ""
        )
    )
    if managed:
        add(
            "- *Expected status*: each management exchange names what it may answer (table "
            "below): a conditional PATCH may be 412 when another client's PATCH or import "
            "changed the tool since its GET; a row GET with `If-None-Match` 200 or 304. Any "
            "other status below 500 is a failure of its own; a 5xx is judged by the 5xx row. "
            "Management traffic writes no call-log rows, so *messages answered* counts the MCP "
            "requests only."
        )
    add("")
    add("## Traffic")
    add("")
    row("figure", "inside windows", "outside windows", "total")
    row("---", "---:", "---:", "---:")
    if managed:
        by_surface = fleet["sent_by_surface"]
        row(
            "HTTP requests sent: MCP / API / admin",
            "",
            "",
            f"{by_surface.get('mcp', 0)} / {by_surface.get('api', 0)} / "
            f"{by_surface.get('admin', 0)}",
        )
        row("answered (a status line arrived), all surfaces", "", "", fleet["answered_all"])
        row("MCP requests answered", "", "", fleet["answered"])
    else:
        row("HTTP requests sent", "", "", fleet["sent"])
        row("answered (a status line arrived)", "", "", fleet["answered"])
    row(
        "5xx", fleet["5xx_inside"], fleet["5xx_outside"], fleet["5xx_inside"] + fleet["5xx_outside"]
    )
    row(
        "no status line (connect or read error, timeout)",
        fleet["errors_inside"],
        fleet["errors_outside"],
        fleet["errors_inside"] + fleet["errors_outside"],
    )
    row(
        "body broken after the status line",
        fleet["broken_inside"],
        fleet["broken_outside"],
        fleet["broken_inside"] + fleet["broken_outside"],
    )
    row(
        "JSON-RPC error responses",
        fleet["rpc_errors_inside"],
        fleet["rpc_errors_outside"],
        fleet["rpc_errors_inside"] + fleet["rpc_errors_outside"],
    )
    row(
        "tool error results (`isError`)",
        fleet["tool_errors_inside"],
        fleet["tool_errors_outside"],
        fleet["tool_errors_inside"] + fleet["tool_errors_outside"],
    )
    row("background calls sent", "", "", fleet["background_sent"])
    row("&nbsp;&nbsp;cancelled by the client", "", "", fleet["background_cancelled"])
    row("&nbsp;&nbsp;answered with the counted result", "", "", fleet["background_counted"])
    row("GET streams opened, then dropped", "", "", fleet["get_streams"])
    row(f"operations past {OPERATION_LIMIT_SECONDS:g} s", "", "", fleet["operation_timeouts"])
    row("operations ended by an error of the fleet itself", "", "", fleet["harness_errors"])
    row(
        f"clients still busy {FLEET_STOP_SECONDS:g} s after the end, cancelled",
        "",
        "",
        fleet["abandoned"],
    )
    if managed:
        add("")
        add("Management exchanges, by kind:")
        add("")
        row("exchange", "expected", "sent", "by status", "5xx inside", "5xx outside",
            "no status line", "unexpected")  # fmt: skip
        row("---", "---", "---:", "---", "---:", "---:", "---:", "---:")
        for kind, m in fleet["management"].items():
            row(
                kind,
                ", ".join(map(str, m["expected"])),
                m["sent"],
                ", ".join(f"{k}: {v}" for k, v in m["by_status"].items()) or "-",
                m["5xx_inside"],
                m["5xx_outside"],
                m["no_status"],
                m["unexpected"],
            )
        if fleet["unexpected_samples"]:
            add("")
            add(
                "Unexpected statuses (first 8): "
                + "; ".join(f"`{t}`" for t in fleet["unexpected_samples"])
                + "."
            )
    add("")
    add(
        "MCP responses by HTTP status, as the clients saw them and as the call log recorded them:"
        if managed
        else "Responses by HTTP status, as the clients saw them and as the call log recorded them:"
    )
    add("")
    row("status", "clients", "call-log rows")
    row("---", "---:", "---:")
    statuses = sorted(
        {str(s) for s in fleet["by_status"]} | set(result["call_log_rows_by_status"]),
        key=str,
    )
    for status in statuses:
        client_count = {str(k): v for k, v in fleet["by_status"].items()}.get(status, 0)
        row(status, client_count, result["call_log_rows_by_status"].get(status, 0))
    add("")
    add(
        "Background calls at the end, by status and outcome: "
        + ", ".join(f"{s} / {o or '-'}: {n}" for s, o, n in result["background_calls"])
        + "."
    )
    if fleet["tool_error_samples"]:
        add("")
        add(
            "Tool error texts: "
            + "; ".join(f"`{t}` × {n}" for t, n in fleet["tool_error_samples"])
            + "."
        )
    if fleet["harness_error_samples"]:
        add("")
        add(
            "Errors of the fleet itself (a bug of bench/soak_fleet.py, not of the server): "
            + "; ".join(f"`{t}` × {n}" for t, n in fleet["harness_error_samples"])
            + "."
        )
    if fleet["error_samples"]:
        add("")
        add("Failed exchanges outside the windows (first 8; t in s from the start of the load):")
        add("")
        for text in fleet["error_samples"]:
            add(f"- `{text}`")
    add("")
    samples = result["samples"]
    step = max(1, len(samples) // 40)
    shown = samples[::step]
    which = f"; one in {step} shown, and the last" if step > 1 else ""
    add(f"## Samples (taken every {SAMPLE_SECONDS:g} s{which}; t in s from the start of the load)")
    add("")
    names = result["web_names"]
    row("t", "DB connections", *(f"{n} {what}" for n in names for what in ("RSS MiB", "fds")))
    row("---:", "---:", *("---:" for _ in range(2 * len(names))))
    if samples and shown[-1] is not samples[-1]:
        shown.append(samples[-1])

    def cell(value: Any) -> str:
        return "-" if value is None else str(value)

    for s in shown:
        cells = [f"{s['t']:.0f}", cell(s["db_connections"])]
        for n in names:
            cells += [_fmt_mib(s.get(f"{n}_rss_kib")), cell(s.get(f"{n}_fds"))]
        row(*cells)
    add("")
    if result["log_problems"]:
        add("## Errors in the processes' logs (by text, numbers blanked)")
        add("")
        for name, problems in result["log_problems"].items():
            for text, count in problems:
                add(f"- {name} × {count}: `{text}`")
        add("")
    return "\n".join(lines) + "\n"


def flatness(
    result: dict[str, Any], idle_before: dict[str, int], idle_after: dict[str, int]
) -> None:
    samples, warm = result["samples"], result["warmup_seconds"]
    loaded = [s for s in samples if s["t"] <= result["parameters"]["minutes"] * 60]
    rss_ok, fds_ok, rss_parts, fds_parts = True, True, [], []
    for name in result["web_names"]:
        rss = series(loaded, f"{name}_rss_kib", warm)
        fds = series(loaded, f"{name}_fds", warm)
        if len(rss) >= 2:
            growth = rss[-1] / rss[0] - 1
            rss_ok &= growth <= RSS_GROWTH_LIMIT
            rss_parts.append(
                f"{name}: first {_fmt_mib(rss[0])}, last {_fmt_mib(rss[-1])} ({growth:+.1%}), "
                f"max {_fmt_mib(max(rss))} MiB"
            )
        else:
            rss_ok = False
            rss_parts.append(f"{name}: too few samples after warm-up")
        if len(fds) >= 3:
            third = len(fds) // 3
            early, late = statistics.median(fds[:third]), statistics.median(fds[-third:])
            growth = late / early - 1
            fds_ok &= growth <= FDS_GROWTH_LIMIT
            fds_parts.append(
                f"{name}: first {fds[0]:.0f}, last {fds[-1]:.0f}, max {max(fds):.0f}; median of "
                f"the first third {early:.0f}, of the last third {late:.0f} ({growth:+.0%}); idle "
                f"before the load {idle_before[name]}, 5 s after it {idle_after[name]}"
            )
        else:
            fds_ok = False
            fds_parts.append(f"{name}: too few samples after warm-up")
    result["rss_text"] = "; ".join(rss_parts)
    result["fds_text"] = "; ".join(fds_parts)
    result["criteria"]["rss_flat"] = rss_ok
    result["criteria"]["fds_flat"] = fds_ok
    conns = [(s["t"], s["db_connections"]) for s in samples if s["db_connections"] is not None]
    top = max((n for _, n in conns), default=0)
    restart = next((w for w in result["windows"] if w["what"].startswith("PostgreSQL")), None)
    text = f"max {top} (`max_connections` {result['max_connections']})"
    grow_ok = True
    if restart is not None:
        before = max((n for t, n in conns if t < restart["start_rel"]), default=0)
        after = max((n for t, n in conns if t > restart["end_rel"]), default=0)
        grow_ok = after <= before * 1.10
        text += f"; max before the PostgreSQL restart {before}, after it {after}"
    if conns:
        text += f"; median {statistics.median(n for _, n in conns):.0f}"
    pool_ok = True
    peaks = result.get("connection_peaks")
    if peaks is not None:
        pool = result["pool_max_size"]
        names = [f"soak-{name}" for name in result["web_names"]]
        bound = len(names) * pool
        web_peak = peaks.get("all web processes", 0)
        pool_ok = web_peak <= bound and all(peaks.get(n, 0) <= pool for n in names)
        text += (
            f"; web processes (counted every {CONNECTION_SAMPLE_SECONDS:g} s by "
            f"`application_name`) at most {web_peak} together, bound {len(names)} × pool "
            f"{pool} = {bound}; per process "
            + ", ".join(f"{n.removeprefix('soak-')} {peaks.get(n, 0)}" for n in names)
            + f"; the worker {peaks.get('soak-worker', 0)}"
        )
    result["db_text"] = text
    result["criteria"]["db_bounded"] = top < result["max_connections"] and grow_ok and pool_ok


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    CACHE.mkdir(parents=True, exist_ok=True)
    run_id = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
    logs = CACHE / f"logs-{run_id}"
    logs.mkdir()
    workdir = Path(tempfile.mkdtemp(prefix="mcphost-soak-"))
    workdir.chmod(0o755)  # the cluster owner (not root) must reach its folder inside
    (workdir / "pg").mkdir()
    (workdir / "redis").mkdir()
    stack = Stack(
        workdir,
        logs,
        Postgres(workdir / "pg", services.free_port()),
        Redis(workdir / "redis", services.free_port()),
    )
    try:
        log("starting PostgreSQL, Redis, the worker and the web processes")
        users = max(1, -(-args.clients // CLIENTS_PER_USER))
        await asyncio.to_thread(stack.start, args.web, users)
        fleet = Fleet(
            [web.url for web in stack.webs], clients=args.clients, management=stack.management
        )
        await fleet.prime()
        # The priming requests have rows too: the load's rows are those added after them.
        baseline_rows, _ = await wait_call_log_stable(stack)
        baseline_by_status = dict(await asyncio.to_thread(stack.query, ROWS_BY_STATUS))
        idle_before = {w.proc.name: open_fds(w.proc.process.pid) or 0 for w in stack.webs}
        seconds = args.minutes * 60
        log(f"load: {args.clients} clients for {seconds:.0f} s")
        t0 = time.time()
        samples: list[dict[str, Any]] = []
        windows: list[dict[str, Any]] = []
        peaks: dict[str, int] = {}
        stop_sampling, stop_outages = asyncio.Event(), asyncio.Event()
        sampling = asyncio.create_task(sampler(stack, t0, samples, stop_sampling))
        counting = asyncio.create_task(connection_peaks(stack, peaks, stop_sampling))
        faults = asyncio.create_task(outages(stack, t0, seconds, windows, stop_outages))
        await fleet.run(seconds, stop_seconds=FLEET_STOP_SECONDS)
        load_seconds = time.time() - t0
        stop_outages.set()
        await faults
        log("fleet stopped; waiting for the call log and background calls to settle")
        await asyncio.sleep(5)  # idle: streams closed, connections released
        idle_after = {w.proc.name: open_fds(w.proc.process.pid) or 0 for w in stack.webs}
        rows, flush_seconds = await wait_call_log_stable(stack)
        rows -= baseline_rows
        stuck, settle_waited = await wait_calls_settled(stack)
        stuck_checked_at = time.time() - t0 - load_seconds
        assert stack.worker is not None
        worker_exit_code = stack.worker.process.poll()
        worker_alive_at_end = worker_exit_code is None
        stop_sampling.set()
        await sampling
        await counting
        rows_by_status = {
            status: count - baseline_by_status.get(status, 0)
            for status, count in await asyncio.to_thread(stack.query, ROWS_BY_STATUS)
        }
        calls_by_status = await asyncio.to_thread(
            stack.query,
            "SELECT status, outcome, count(*) FROM mcp_app_backgroundcall"
            " GROUP BY 1, 2 ORDER BY 1, 2",
        )
        max_connections = int((await asyncio.to_thread(stack.query, "SHOW max_connections"))[0][0])
        postgres_version = (await asyncio.to_thread(stack.query, "SHOW server_version"))[0][0]
        stack_versions = subprocess.run(
            [str(services.find_redis_server()), "--version"], capture_output=True, text=True
        ).stdout
        redis_version = re.search(r"v=(\S+)", stack_versions)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.to_thread(stack.stop)
    for w in windows:
        w["start_rel"] = w["start"] - t0
        w["end_rel"] = w["end"] - t0
    fleet_figures = fleet.figures([(w["start"], w["end"] + GRACE_SECONDS) for w in windows], t0)
    for web in stack.webs:  # name the web process a failed exchange went to
        netloc = web.url.split("/")[2]
        fleet_figures["error_samples"] = [
            text.replace(f"({netloc})", f"({web.proc.name})")
            for text in fleet_figures["error_samples"]
        ]
    result: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M"),
        "commit": git_commit(),
        "machine": machine(),
        "parameters": {"minutes": args.minutes, "clients": args.clients, "web": args.web},
        "web_servers": [w.server for w in stack.webs],
        "web_names": [w.proc.name for w in stack.webs],
        "postgres_version": postgres_version,
        "redis_version": redis_version.group(1) if redis_version else "?",
        "windows": windows,
        "samples": samples,
        "load_seconds": load_seconds,
        "warmup_seconds": max(60.0, seconds / 5),
        "fleet": fleet_figures,
        "messages_answered": fleet_figures["answered"],
        "call_log_rows": rows,
        "call_log_flush_seconds": flush_seconds,
        "call_log_rows_by_status": {str(k): v for k, v in rows_by_status.items()},
        "background_calls": [list(map(str, r)) for r in calls_by_status],
        "stuck": [list(map(str, r)) for r in stuck],
        "settle_seconds": settle_waited,
        "stuck_checked_at": stuck_checked_at,
        "max_connections": max_connections,
        "connection_peaks": dict(sorted(peaks.items())),
        "pool_max_size": POOL_MAX_SIZE,
        "management_users": len(stack.management.users) if stack.management else 0,
        "idle_fds_before": idle_before,
        "idle_fds_after": idle_after,
        "criteria": {
            "no_5xx": fleet_figures["5xx_outside"] == 0,
            "call_log": rows == fleet_figures["answered"],
            "no_stuck": not stuck,
            "management_expected": fleet_figures["unexpected"] == 0,
        },
        "log_problems": {
            proc.name: log_problems(proc.log()).most_common(8)
            for proc in [*(w.proc for w in stack.webs), *([stack.worker] if stack.worker else [])]
            if log_problems(proc.log())
        },
    }
    alive = [s["t"] for s in samples if s["worker_alive"]]
    fatal = [
        line
        for line in (stack.worker.log() if stack.worker else "").splitlines()
        if "Unrecoverable" in line or "CRITICAL" in line
    ]
    result["worker"] = {
        "alive_at_end": worker_alive_at_end,
        "last_alive": max(alive) if alive else 0.0,
        "exit_code": worker_exit_code,
        "fatal_line": fatal[0][:200] if fatal else "(none)",
    }
    flatness(result, idle_before, idle_after)
    (CACHE / f"result-{run_id}.json").write_text(json.dumps(result, indent=1, default=str))
    log(f"raw figures: {CACHE / f'result-{run_id}.json'}; logs: {logs}")
    shutil.rmtree(workdir, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument(
        "--web", type=int, default=2, help="web processes (uvicorn, daphne, uvicorn, ...)"
    )
    parser.add_argument(
        "--write-docs", action="store_true", help=f"also write {DOCS.relative_to(ROOT)}"
    )
    parser.add_argument(
        "--from-result",
        type=Path,
        help="run nothing: report the raw figures a run saved (.cache/soak/result-*.json)",
    )
    args = parser.parse_args()
    if args.from_result:
        result = json.loads(args.from_result.read_text())
    else:
        result = asyncio.run(soak(args))
    report = render(result)
    print(report)
    if args.write_docs:
        DOCS.write_text(report)
        log(f"wrote {DOCS.relative_to(ROOT)}")
    log(
        "client-side status counts vs call-log rows by status: "
        f"{result['fleet']['by_status']} / {result['call_log_rows_by_status']}"
    )


if __name__ == "__main__":
    main()
