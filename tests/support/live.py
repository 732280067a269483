"""Real ASGI servers (Daphne, uvicorn) on loopback ports, serving the test database.

Import the fixtures into a directory's conftest.py. Data the server must see has to be
committed: create it with ``django_db_blocker.unblock()`` in a module-scoped fixture (not
inside a test's rolled-back transaction), and remove it with ``flush_database`` when the
module is done.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings

from mcp_app.services import invalidation
from scripts.services import free_port
from tests.support.emptying import empty_database
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
SECRET_KEY = "live-server-test-key-not-secret"
# How long a server is given to exit after SIGTERM before it is killed. Both servers exit
# within a second with streams open (docs/operations.md, "Stopping a web process"); a kill
# would lose the call-log records of the requests it cut short.
STOP_SECONDS = 10.0


def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
        return True
    return False


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    def up() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before listening")
        return listening(port)

    wait_until(up, f"a server listening on 127.0.0.1:{port}", timeout=timeout)


def database_url() -> str:
    db = settings.DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.postgresql":
        raise RuntimeError("live-server tests need PostgreSQL (set DATABASE_URL)")
    user = db.get("USER") or ""
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


SERVERS = {
    "daphne": ["-m", "daphne", "-b", "127.0.0.1", "-p", "{port}", "mcpsite.asgi:application"],
    "uvicorn": [
        "-m", "uvicorn", "mcpsite.asgi:application", "--host", "127.0.0.1", "--port", "{port}",
        "--loop", "uvloop", "--http", "httptools", "--lifespan", "on", "--no-access-log",
    ],
}  # fmt: skip


@contextlib.contextmanager
def asgi_server(server: str = "daphne", extra_env: dict[str, str] | None = None) -> Iterator[str]:
    """Run ``mcpsite.asgi:application`` under ``server`` on a free port; yield its base URL."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "PUBLIC_BASE_URL": base_url,
        "SECRET_KEY": SECRET_KEY,
        "PYTHONUNBUFFERED": "1",
        **(extra_env or {}),
    }
    # The server's output, kept only if it failed to start (for the post-mortem) or when
    # MCPHOST_KEEP_SERVER_LOGS is set.
    log_path = Path(tempfile.gettempdir()) / f"mcphost-{server}-{port}.log"
    log = open(log_path, "wb")  # noqa: SIM115
    args = [arg.format(port=port) for arg in SERVERS[server]]
    process = subprocess.Popen(
        [sys.executable, *args], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        try:
            wait_for_port(port, process)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"{exc}; server output in {log_path}") from exc
        _running.add(base_url)
        try:
            yield base_url
        finally:
            _running.discard(base_url)
        if not os.environ.get("MCPHOST_KEEP_SERVER_LOGS"):
            log_path.unlink(missing_ok=True)
    finally:
        process.terminate()
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        log.close()


@pytest.fixture(scope="session")
def live_server_url(django_db_setup: None) -> Iterator[str]:
    """Base URL of a Daphne process on the test database, shared by the whole session."""
    with asgi_server("daphne") as url:
        yield url


@pytest.fixture(scope="session")
def uvicorn_server_url(django_db_setup: None) -> Iterator[str]:
    """The same application under uvicorn (uvloop + httptools), as production may run it."""
    with asgi_server("uvicorn") as url:
        yield url


# Base URLs of the servers asgi_server() is running now.
_running: set[str] = set()


def _metric_sums(base_url: str) -> dict[str, float]:
    text = httpx.get(f"{base_url}/metrics", timeout=5).raise_for_status().text
    sums: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            key = name.split("{", 1)[0]
            sums[key] = sums.get(key, 0.0) + float(value)
    return sums


# A client's closed stream ends on the server within milliseconds; a count of open streams
# unchanged this long is made of streams the server keeps itself (an upstream session's
# listening stream to one of its own endpoints), which end with the process.
STREAMS_SETTLED_SECONDS = 2.0
# Per server: the count of open streams its last wait_until_idle found settled. The same count
# again is settled at once, so a server keeping streams of its own costs a wait only once.
_settled_streams: dict[str, float] = {}


def wait_until_idle(base_url: str, timeout: float = 15.0) -> None:
    """Wait until the server's streams have settled and its call-log writer has written or
    dropped every record it was handed (its /metrics say so).

    A stream's call-log record is handed over when the server sees the client leave, and
    written a moment later: without this wait, a record of one module can land after the
    next module's cleanup.
    """
    deadline = time.monotonic() + timeout
    streams_seen, seen_since = -1.0, time.monotonic()
    while True:
        sums = _metric_sums(base_url)
        now = time.monotonic()
        streams = sums.get("mcphost_sse_streams_open", 0.0)
        if streams != streams_seen:
            streams_seen, seen_since = streams, now
        backlog = sums.get("mcphost_call_log_received_rows_total", 0.0) - sums.get(
            "mcphost_call_log_written_rows_total", 0.0
        ) - sums.get("mcphost_call_log_dropped_rows_total", 0.0)  # fmt: skip
        settled = (
            not streams
            or streams == _settled_streams.get(base_url)
            or now - seen_since >= STREAMS_SETTLED_SECONDS
        )
        if settled and backlog <= 0:
            _settled_streams[base_url] = streams
            return
        if now > deadline:
            raise TimeoutError(f"{base_url} still busy after {timeout} s: {sums}")
        time.sleep(0.05)


def wait_until_servers_idle() -> None:
    """wait_until_idle for every server asgi_server() runs now.

    Before a cleanup: a record a server writes after it would be a row of this test (or
    module) in the next one's empty database. tests/conftest.py waits so after every
    transactional test too.
    """
    for base_url in list(_running):
        wait_until_idle(base_url)


def flush_database(django_db_blocker: Any) -> None:
    """Delete every row a module committed for its live server, as TransactionTestCase does
    (with ``empty_database``, as tests/conftest.py makes it do).

    Committed rows would otherwise leak into later tests that expect an empty database. The
    running servers are waited for first, so that no record of this module arrives later.
    """
    wait_until_servers_idle()
    with django_db_blocker.unblock():
        empty_database()
        # A flush fires no signal: tell the live servers to forget what they keep in memory.
        invalidation.invalidate(everything=True)
