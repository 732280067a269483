"""``/readyz`` fails while PostgreSQL or Redis is gone, is degraded while every worker is gone
(fails with ``MCP_READY_REQUIRES_WORKER``), and recovers by itself.

Issue #16: real processes are stopped and started (the fault stack's private PostgreSQL and
Redis, a Celery worker of this module); the probe must say which dependency failed and answer
within its time bound even then. Issue #25: a missing worker must not make every web process
unready while inline calls, lists and reads still work. The web process and this module's
worker use Redis database 1, so the fault stack's own worker (database 0) never counts as
this web process's worker.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.faults.conftest import FaultStack, WebProcess
from tests.faults.wire import MODERN_META, modern_headers, tool_call
from tests.support.worker import WorkerProcess, celery_worker

HEARTBEAT_ENV = {
    "WORKER_HEARTBEAT_SECONDS": "0.25",
    "WORKER_HEARTBEAT_STALE_SECONDS": "2",
    "READINESS_TIMEOUT_SECONDS": "2",
}
# Long enough for a restarted Redis or PostgreSQL to be reconnected to and a beat to land.
RECOVERY_SECONDS = 20.0


def _env(fault_stack: FaultStack) -> dict[str, str]:
    redis_db1 = fault_stack.redis.url.rsplit("/", 1)[0] + "/1"
    return {**HEARTBEAT_ENV, "REDIS_URL": redis_db1, "CELERY_BROKER_URL": redis_db1}


@contextlib.contextmanager
def _worker(fault_stack: FaultStack) -> Iterator[WorkerProcess]:
    with celery_worker(concurrency=1, extra_env={**fault_stack.env, **_env(fault_stack)}) as w:
        yield w


def _readyz(web: WebProcess) -> tuple[int, dict[str, Any], float]:
    started = time.monotonic()
    response = httpx.get(f"{web.base_url}/readyz", timeout=10)
    return response.status_code, response.json(), time.monotonic() - started


def _wait_for(web: WebProcess, status: int, failed: list[str]) -> dict[str, Any]:
    """Probe until it answers ``status`` naming exactly ``failed``; each answer in bound."""
    deadline = time.monotonic() + RECOVERY_SECONDS
    seen: tuple[int, dict[str, Any]] | None = None
    while time.monotonic() < deadline:
        code, body, took = _readyz(web)
        # The readiness bound plus one for process scheduling on a busy 2-core machine.
        assert took < float(HEARTBEAT_ENV["READINESS_TIMEOUT_SECONDS"]) + 1, (took, body)
        if code == status and body["failed"] == failed:
            return body
        seen = (code, body)
        time.sleep(0.2)
    raise AssertionError(f"readiness never became {status} {failed}; last: {seen}")


@pytest.fixture
def web(fault_stack: FaultStack, web_process: Callable[..., WebProcess]) -> WebProcess:
    return web_process("uvicorn", env=_env(fault_stack))


def test_readiness_is_degraded_without_a_worker_heartbeat_and_the_api_serves(
    fault_stack: FaultStack, web: WebProcess
) -> None:
    """The stack has a background tool and no worker of this module: reported, still ready."""
    body = _wait_for(web, 200, ["workers"])
    assert body["status"] == "degraded"
    assert body["checks"]["workers"]["required"] is False
    assert body["checks"]["database"]["ok"] and body["checks"]["redis"]["ok"]
    metrics = httpx.get(f"{web.base_url}/metrics", timeout=10).text
    assert 'mcphost_readiness_check{check="workers"} 0.0' in metrics
    # What still works without workers: inline calls.
    echo = httpx.post(
        web.url,
        headers=modern_headers("tools/call", "echo"),
        json=tool_call(1, "echo", {"message": "hi"}, **MODERN_META),
        timeout=10,
    )
    assert echo.status_code == 200, echo.text


def test_readiness_fails_without_a_worker_heartbeat_when_required_and_recovers(
    fault_stack: FaultStack, web_process: Callable[..., WebProcess]
) -> None:
    """``MCP_READY_REQUIRES_WORKER``: readiness needs a worker with a recent beat."""
    env = {**_env(fault_stack), "MCP_READY_REQUIRES_WORKER": "true"}
    web = web_process("uvicorn", env=env)
    body = _wait_for(web, 503, ["workers"])
    assert body["checks"]["database"]["ok"] and body["checks"]["redis"]["ok"]
    with _worker(fault_stack) as worker:
        _wait_for(web, 200, [])
        # SIGKILL: no clean leave, so only the heartbeat going stale can tell.
        os.killpg(worker.process.pid, signal.SIGKILL)
        worker.process.wait(5)
        body = _wait_for(web, 503, ["workers"])
    assert body["status"] == "unavailable"
    with _worker(fault_stack):
        _wait_for(web, 200, [])


def test_readiness_fails_while_postgres_is_down_and_recovers(
    fault_stack: FaultStack, web: WebProcess
) -> None:
    with _worker(fault_stack):
        _wait_for(web, 200, [])
        fault_stack.postgres.stop("fast")
        try:
            body = _wait_for(web, 503, ["database"])
            assert body["checks"]["redis"]["ok"]
        finally:
            fault_stack.postgres.start()
        _wait_for(web, 200, [])


def test_readiness_fails_while_redis_is_down_and_recovers(
    fault_stack: FaultStack, web: WebProcess
) -> None:
    with _worker(fault_stack):
        _wait_for(web, 200, [])
        fault_stack.redis.kill()
        try:
            body = _wait_for(web, 503, ["redis", "workers"])
            assert body["checks"]["database"]["ok"]
        finally:
            fault_stack.redis.start()
        # The worker's heartbeat thread writes again once Redis is back.
        _wait_for(web, 200, [])
