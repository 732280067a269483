"""``LOG_FORMAT=json`` holds for every line the processes write (issue #25): uvicorn's and
Daphne's own lines (start, access log, stop) and Django's, Celery's worker and beat lines
from their banner to their shutdown. Each process runs for real, its output read back."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.live import ROOT, SECRET_KEY, database_url, free_port, listening
from tests.support.waiting import wait_until

WAIT_SECONDS = 60.0


@contextlib.contextmanager
def logged_process(command: list[str], extra_env: dict[str, str]) -> Iterator[Path]:
    """Run ``python command`` with its stdout and stderr in one file; stop it (SIGTERM) when
    done, so that its shutdown lines are in the file too. Yields the file's path."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "SECRET_KEY": SECRET_KEY,
        "PYTHONUNBUFFERED": "1",
        **extra_env,
    }
    path = Path(tempfile.mkdtemp(prefix="mcphost-logs-")) / "output.log"
    with open(path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, *command],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield path
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)


def wait_for_text(path: Path, found: Callable[[str], bool], what: str) -> None:
    wait_until(
        lambda: found(path.read_text(errors="replace")),
        f"{what} logged",
        timeout=WAIT_SECONDS,
        detail=path.read_text,
    )


@contextlib.contextmanager
def web_server(server: str, extra_env: dict[str, str]) -> Iterator[tuple[str, Path]]:
    """uvicorn (access log on; alone, or two worker processes under a supervisor as the
    image runs them) or Daphne on a free port; yields its base URL and log file."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    if server.startswith("uvicorn"):
        command = [
            "-m", "uvicorn", "mcpsite.asgi:application", "--host", "127.0.0.1",
            "--port", str(port), "--lifespan", "off", "--log-level", "info",
        ]  # fmt: skip
        if server == "uvicorn-workers":
            command += ["--workers", "2"]
            # As the Dockerfile sets it: the supervisor never loads Django's settings.
            extra_env = {**extra_env, "UVICORN_LOG_CONFIG": "mcpsite/uvicorn_logging.json"}
    else:
        command = ["-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "mcpsite.asgi:application"]
    env = {"PUBLIC_BASE_URL": base_url, "LOG_LEVEL": "INFO", **extra_env}
    with logged_process(command, env) as path:
        wait_until(
            lambda: listening(port),
            f"{server} listening",
            timeout=WAIT_SECONDS,
            detail=path.read_text,
        )
        yield base_url, path


def assert_every_line_is_json(text: str) -> list[dict]:
    records = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            raise AssertionError(f"not a JSON line: {line!r}\nin:\n{text}") from None
        assert isinstance(record, dict) and {"time", "level", "logger", "message"} <= set(record)
        records.append(record)
    assert records
    return records


@pytest.mark.django_db
@pytest.mark.parametrize("server", ["uvicorn", "uvicorn-workers", "daphne"])
def test_every_line_of_a_web_server_is_json(server):
    with web_server(server, {"LOG_FORMAT": "json"}) as (base_url, path):
        httpx.get(f"{base_url}/livez", timeout=10)
        # A refused API request: Django's own warning line, and the access line.
        assert httpx.get(f"{base_url}/api/v1/endpoints/", timeout=10).status_code in (401, 403)
        wait_for_text(path, lambda text: "/api/v1/endpoints/" in text, "the refused request")
    records = assert_every_line_is_json(path.read_text())
    loggers = {record["logger"] for record in records}
    assert "django.request" in loggers
    if server.startswith("uvicorn"):
        assert {"uvicorn.error", "uvicorn.access"} <= loggers
    else:
        assert {"daphne.server", "daphne.access"} <= loggers
    # uvicorn's message again, with terminal colour codes, is left out.
    assert not any("color_message" in record for record in records)


def test_every_line_of_a_celery_worker_is_json(django_db_setup):
    broker = os.environ.get("CELERY_BROKER_URL") or os.environ.get("REDIS_URL") or ""
    hostname = f"json-{os.getpid()}-{time.monotonic_ns()}@localhost"
    command = [
        "-m", "celery", "-A", "mcpsite", "worker", "--pool", "prefork", "--concurrency", "1",
        "--hostname", hostname, "--loglevel", "INFO",
        "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]  # fmt: skip
    env = {"LOG_FORMAT": "json", "CELERY_BROKER_URL": broker}
    with logged_process(command, env) as path:
        wait_for_text(path, lambda text: f"{hostname} ready." in text, "the worker's ready line")
    records = assert_every_line_is_json(path.read_text())
    assert any(record["logger"].startswith("celery") for record in records)


def test_every_line_of_celery_beat_is_json(django_db_setup):
    broker = os.environ.get("CELERY_BROKER_URL") or os.environ.get("REDIS_URL") or ""
    schedule = Path(tempfile.mkdtemp(prefix="mcphost-beat-")) / "schedule"
    command = [
        "-m", "celery", "-A", "mcpsite", "beat", "--loglevel", "INFO", "--schedule", str(schedule)
    ]  # fmt: skip
    env = {"LOG_FORMAT": "json", "CELERY_BROKER_URL": broker}
    with logged_process(command, env) as path:
        wait_for_text(path, lambda text: "Starting" in text, "beat's start line")
        # Stop it only once it has opened its schedule file: a signal while it still imports
        # the file's module (slow in a fresh venv, with nothing compiled yet) makes beat's
        # handler open the schedule from inside that import, and fail.
        wait_until(
            lambda: any(schedule.parent.glob(f"{schedule.name}*")),
            "beat opened its schedule file",
            timeout=WAIT_SECONDS,
        )
    records = assert_every_line_is_json(path.read_text())
    assert any(record["logger"].startswith("celery") for record in records)
