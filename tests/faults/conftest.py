"""A private PostgreSQL and Redis that the fault tests stop, kill and restart, with real servers.

The session's own PostgreSQL and Redis (started by ``dev.py test``) are shared by every other
test module, so the fault tests never touch them: ``fault_stack`` runs a second throwaway
cluster and Redis on fixed loopback ports (a restart must come back on the same port), migrates
and seeds it, and runs one Celery worker on it. Web processes are started per test
(``web_process``), so a test may SIGKILL one by its PID.

Rows are read with plain SQL on the private database: the test process's Django is bound to
the session's test database.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from redis import Redis as RedisClient

from scripts import services
from tests.support.live import ROOT, SECRET_KEY, SERVERS, STOP_SECONDS, free_port, wait_for_port
from tests.support.sockets import connections  # noqa: F401  (fixture: test_redis_sentinel)
from tests.support.worker import BACKGROUND_ENV, WorkerProcess, celery_worker

SLUG = "faults"
DATABASE = "faults"
# Short bounds so the tests see keep-alives, lost workers and retries within seconds.
FAULT_ENV = {
    **BACKGROUND_ENV,
    "MCP_SSE_KEEPALIVE_SECONDS": "1",
    "MCP_PYTHON_TOOL_MODULES": "mcp_app.builtin_tools",
    "LOG_LEVEL": "WARNING",
}
SEED = f"""
from mcp_app.models import Tool
from mcp_app.services.catalog_writes import endpoint_create, tool_create
endpoint = endpoint_create(slug={SLUG!r}, auth_mode="public")
tool_create(name="countdown", kind="python", config={{"function": "countdown"}},
            execution_mode=Tool.Execution.BACKGROUND, endpoints=[endpoint])
tool_create(name="echo", kind="python", config={{"function": "echo"}}, endpoints=[endpoint])
"""


@dataclass
class Postgres:
    """A throwaway cluster that can be stopped and started again on the same port."""

    workdir: Path
    port: int
    bindir: Path = field(default_factory=lambda: services._pg_bindir_or_install())

    @property
    def datadir(self) -> Path:
        return self.workdir / "data"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{DATABASE}"

    def _ctl(self, *args: str) -> None:
        command = [str(self.bindir / "pg_ctl"), "--pgdata", str(self.datadir), *args]
        code, output = services._run_to_completion(services._as_cluster_owner(command))
        if code != 0:
            raise RuntimeError(f"pg_ctl {args[-1]} failed: {output}")

    def init(self) -> None:
        if services.is_root():
            shutil.chown(self.workdir, user=services.PG_SYSTEM_USER, group=None)
        initdb = [
            str(self.bindir / "initdb"), "--pgdata", str(self.datadir), "--username", "postgres",
            "--auth", "trust", "--encoding", "UTF8", "--no-locale", "--no-sync",
        ]  # fmt: skip
        code, output = services._run_to_completion(services._as_cluster_owner(initdb))
        if code != 0:
            raise RuntimeError(f"initdb failed: {output}")
        with (self.datadir / "postgresql.conf").open("a") as conf:
            conf.write(services._pg_conf(self.workdir))
        self.start()
        createdb = [
            str(self.bindir / "createdb"), "--host", "127.0.0.1", "--port", str(self.port),
            "--username", "postgres", DATABASE,
        ]  # fmt: skip
        code, output = services._run_to_completion(services._as_cluster_owner(createdb))
        if code != 0:
            raise RuntimeError(f"createdb failed: {output}")

    def start(self) -> None:
        log = str(self.workdir / "server.log")
        self._ctl("--log", log, "--options", f"-p {self.port}", "--wait", "start")

    def stop(self, mode: str = "fast") -> None:
        self._ctl("--mode", mode, "--wait", "stop")

    def running(self) -> bool:
        return (self.datadir / "postmaster.pid").exists()

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            return conn.execute(sql, params).fetchall()


@dataclass
class Redis:
    """A Redis server that can be SIGKILLed and started again on the same port.

    By default a plain server on ``port`` keeping nothing on disk; ``args`` replace its
    command line (a replica's ``--replicaof``, a sentinel's configuration file).
    """

    workdir: Path
    port: int
    process: subprocess.Popen[bytes] | None = None
    args: list[str] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = services.find_redis_server()
        assert binary is not None, "redis-server is missing"
        args = self.args or plain_redis_args(self.workdir, self.port)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [str(binary), *args],
            cwd=self.workdir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        if not services._wait_redis_ready(self.port, self.process):
            raise RuntimeError(f"redis-server {args} did not start on port {self.port}")

    def kill(self) -> None:
        """SIGKILL the server by its PID, as an OOM kill or a crash would end it."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(5)
        self.process = None

    def stop(self) -> None:
        if self.process is not None:
            services._stop_process(self.process)
            self.process = None

    def client(self) -> RedisClient:
        """A client of this server (not of the master a sentinel names)."""
        return RedisClient(port=self.port, socket_timeout=2, socket_connect_timeout=2)


def plain_redis_args(workdir: Path, port: int) -> list[str]:
    """A redis-server's arguments: loopback ``port``, nothing kept on disk, in the foreground."""
    return [
        "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
        "--dir", str(workdir), "--daemonize", "no",
    ]  # fmt: skip


@dataclass
class FaultStack:
    postgres: Postgres
    redis: Redis
    worker: WorkerProcess

    @property
    def env(self) -> dict[str, str]:
        """What every process of the stack (web, worker) is given."""
        return {
            **FAULT_ENV,
            "DATABASE_URL": self.postgres.url,
            "REDIS_URL": self.redis.url,
            "CELERY_BROKER_URL": self.redis.url,
            "SECRET_KEY": SECRET_KEY,
            "PYTHONUNBUFFERED": "1",
        }

    def restart_postgres(self, down_seconds: float) -> None:
        self.postgres.stop("fast")
        time.sleep(down_seconds)  # the outage itself, not a wait for a condition
        self.postgres.start()

    def restart_redis(self) -> None:
        self.redis.kill()
        self.redis.start()

    def call_rows(self, tool: str = "countdown") -> list[tuple[str, str, str]]:
        """(id, status, outcome) of the tool's background calls, newest first."""
        return [
            tuple(row)  # type: ignore[misc]
            for row in self.postgres.query(
                "SELECT id, status, outcome FROM mcp_app_backgroundcall"
                " WHERE tool_name = %s ORDER BY created_at DESC",
                tool,
            )
        ]


def run_manage(env: dict[str, str], *args: str) -> str:
    """Run a management command on the stack's database; return what it printed."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture(scope="session")
def fault_stack() -> Iterator[FaultStack]:
    """PostgreSQL + Redis of the fault tests only, migrated and seeded, with a Celery worker."""
    workdir = Path(tempfile.mkdtemp(prefix="mcphost-faults-"))
    workdir.chmod(0o755)  # the cluster owner (not root) must reach its folder inside
    postgres = Postgres(workdir / "pg", services.free_port())
    postgres.workdir.mkdir()
    redis = Redis(workdir / "redis", services.free_port())
    redis.workdir.mkdir()
    try:
        postgres.init()
        redis.start()
        env = FaultStack(postgres, redis, worker=None).env  # type: ignore[arg-type]
        run_manage(env, "migrate", "--verbosity", "0")
        run_manage(env, "shell", "-c", SEED)
        with celery_worker(extra_env=env) as worker:
            yield FaultStack(postgres, redis, worker)
    finally:
        redis.stop()
        if postgres.running():
            with contextlib.suppress(RuntimeError):
                postgres.stop("immediate")
        shutil.rmtree(workdir, ignore_errors=True)


@dataclass
class WebProcess:
    process: subprocess.Popen[bytes]
    base_url: str
    log_path: Path

    @property
    def url(self) -> str:
        return f"{self.base_url}/mcp/{SLUG}"

    def kill(self) -> None:
        """SIGKILL the process by its PID: no shutdown code runs."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(5)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def web_process(fault_stack: FaultStack) -> Iterator[Callable[..., WebProcess]]:
    """Start web processes (``"daphne"`` or ``"uvicorn"``) on the stack; all end with the test."""
    started: list[WebProcess] = []

    def start(server: str = "daphne", env: dict[str, str] | None = None) -> WebProcess:
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        log_path = Path(tempfile.gettempdir()) / f"mcphost-faults-{server}-{port}.log"
        log = open(log_path, "wb")  # noqa: SIM115
        process = subprocess.Popen(
            [sys.executable, *(arg.format(port=port) for arg in SERVERS[server])],
            cwd=ROOT,
            env={**os.environ, **fault_stack.env, "PUBLIC_BASE_URL": base_url, **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        web = WebProcess(process, base_url, log_path)
        started.append(web)
        wait_for_port(port, process)
        return web

    yield start
    for web in started:
        if web.process.poll() is None:
            web.process.terminate()
            try:
                web.process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                web.process.kill()
                web.process.wait(5)
        if not os.environ.get("MCPHOST_KEEP_SERVER_LOGS"):
            web.log_path.unlink(missing_ok=True)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[Redis]:
    """A Redis of the test's own (broker and channel layer), for a worker the test may break.

    The session's worker consumes from the stack's Redis; a job sent here reaches only the
    workers the test starts on this one.
    """
    redis = Redis(tmp_path, services.free_port())
    redis.start()
    try:
        yield redis
    finally:
        if redis.process is not None:
            redis.kill()
