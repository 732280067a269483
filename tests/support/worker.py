"""Real Celery worker processes (``celery -A mcpsite worker``) on the test database and Redis.

Background calls in tests run exactly as in production: a prefork worker on the Redis broker,
never eager mode. ``BACKGROUND_ENV`` shortens the heartbeat and the lost-worker bound so the
crash tests finish quickly; give the same values to the web server that follows the calls.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.live import ROOT, SECRET_KEY, database_url
from tests.support.waiting import wait_until

BACKGROUND_ENV = {
    "MCP_BACKGROUND_HEARTBEAT_SECONDS": "0.25",
    "MCP_BACKGROUND_LOST_AFTER_SECONDS": "3",
    "MCP_BACKGROUND_START_TIMEOUT_SECONDS": "20",
}
READY_TIMEOUT_SECONDS = 60.0


@dataclass
class WorkerProcess:
    process: subprocess.Popen[bytes]
    log_path: Path
    hostname: str

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _wait_ready(worker: WorkerProcess) -> None:
    def ready() -> bool:
        if worker.process.poll() is not None:
            raise RuntimeError(f"celery worker exited early:\n{worker.log()[-3000:]}")
        return " ready." in worker.log()

    wait_until(
        ready,
        "the celery worker ready",
        timeout=READY_TIMEOUT_SECONDS,
        interval=0.1,
        detail=lambda: str(worker.log_path),
    )


@contextlib.contextmanager
def celery_worker(
    *, concurrency: int = 2, extra_env: dict[str, str] | None = None
) -> Iterator[WorkerProcess]:
    """Run a prefork worker on the test database and the broker at REDIS_URL."""
    broker = os.environ.get("CELERY_BROKER_URL") or os.environ.get("REDIS_URL")
    if not broker:
        raise RuntimeError("worker tests need Redis (set REDIS_URL)")
    hostname = f"test-{os.getpid()}-{time.monotonic_ns()}@localhost"
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "SECRET_KEY": SECRET_KEY,
        "CELERY_BROKER_URL": broker,
        "PYTHONUNBUFFERED": "1",
        **BACKGROUND_ENV,
        **(extra_env or {}),
    }
    log_path = Path(tempfile.gettempdir()) / f"mcphost-worker-{os.getpid()}-{time.time_ns()}.log"
    log = open(log_path, "wb")  # noqa: SIM115
    command = [
        sys.executable, "-m", "celery", "-A", "mcpsite", "worker", "--pool", "prefork",
        "--concurrency", str(concurrency), "--hostname", hostname, "--loglevel", "INFO",
        "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    worker = WorkerProcess(process, log_path, hostname)
    try:
        _wait_ready(worker)
        yield worker
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)
        log.close()


@pytest.fixture(scope="session")
def worker_process(django_db_setup: None) -> Iterator[WorkerProcess]:
    """One worker for the session's background calls (tests that kill it start their own)."""
    with celery_worker() as worker:
        yield worker
