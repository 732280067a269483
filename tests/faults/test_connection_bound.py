"""A web process never holds more PostgreSQL connections than its pool, whatever it is sent.

Issue #25: a flood of management API requests with made-up tokens left a connection behind
per request thread until PostgreSQL refused everyone ("too many clients"). Each process now
draws from one pool of ``DATABASE_POOL_MAX_SIZE`` connections (docs/operations.md, "Database
connections"): these tests flood a real uvicorn process on a real PostgreSQL with unknown API
tokens, unknown OAuth tokens, valid tokens and admin page loads, far more at once than the
pool holds, and count the process's connections in ``pg_stat_activity`` throughout.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.faults.conftest import DATABASE, FaultStack, WebProcess, run_manage
from tests.support.raw_mcp import JSON_HEADERS, open_session

POOL_SIZE = 3
APP_NAME = "mcphost-flood-test"
POOL_ENV = {
    "DATABASE_POOL_MAX_SIZE": str(POOL_SIZE),
    "DATABASE_POOL_TIMEOUT": "2",
    "DATABASE_POOL_MAX_WAITING": "6",
    "DATABASE_APPLICATION_NAME": APP_NAME,
    "DATABASE_WAIT_SECONDS": "3",
    # The flood comes from one address: no rate may end it early. (The failed-authentication
    # limit would cut the made-up tokens off before the database: tests/api/test_throttling.py.
    # Here they must reach it, to show the pool holds whatever does.)
    "API_THROTTLE_ANON": "100000/minute",
    "API_THROTTLE_USER": "100000/minute",
    "API_THROTTLE_AUTH_FAILURES": "",
}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "frozen-test", "version": "1"},
    },
}
TOKEN_SCRIPT = """
from django.contrib.auth import get_user_model
from mcp_app.services.api_tokens import api_token_create
user, _ = get_user_model().objects.get_or_create(
    username="flood-admin", defaults={"is_staff": True, "is_superuser": True}
)
print(api_token_create(user=user, name="flood %s")[1])
"""


def web_connections(fault_stack: FaultStack) -> int:
    rows = fault_stack.postgres.query(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = %s",
        DATABASE,
        APP_NAME,
    )
    return int(rows[0][0])


@contextlib.contextmanager
def sampled(fault_stack: FaultStack) -> Iterator[list[int]]:
    """Count the web process's connections every 50 ms while the block runs."""
    samples: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append(web_connections(fault_stack))
            stop.wait(0.05)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        stop.set()
        thread.join(10)


async def flood(requests: list[tuple[str, dict[str, str]]], concurrency: int) -> Counter[int]:
    """Send every (url, headers) GET, ``concurrency`` at a time; count the status codes."""
    statuses: Counter[int] = Counter()
    queue: asyncio.Queue[tuple[str, dict[str, str]]] = asyncio.Queue()
    for request in requests:
        queue.put_nowait(request)

    async def sender(client: httpx.AsyncClient) -> None:
        while not queue.empty():
            url, headers = queue.get_nowait()
            response = await client.get(url, headers=headers)
            statuses[response.status_code] += 1

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client, asyncio.timeout(120):
        await asyncio.gather(*(sender(client) for _ in range(concurrency)))
    return statuses


@pytest.fixture
def flooded_web(
    fault_stack: FaultStack, web_process: Callable[..., WebProcess]
) -> Iterator[tuple[WebProcess, str]]:
    output = run_manage(fault_stack.env, "shell", "-c", TOKEN_SCRIPT % time.monotonic_ns())
    key = output.strip().splitlines()[-1]  # the shell prints its auto-imports first
    yield web_process("uvicorn", POOL_ENV), key


async def test_a_flood_of_api_and_admin_requests_stays_within_the_pool(
    fault_stack: FaultStack, flooded_web: tuple[WebProcess, str]
) -> None:
    web, key = flooded_web
    api = f"{web.base_url}/api/v1/tools/"
    requests = [
        *((api, {"Authorization": f"Bearer mcpk_bogus{n}"}) for n in range(120)),
        *((api, {"Authorization": f"Bearer not-a-token-{n}"}) for n in range(120)),
        *((api, {"Authorization": f"Bearer {key}"}) for _ in range(120)),
        *((f"{web.base_url}/admin/login/", {}) for _ in range(60)),
    ]
    with sampled(fault_stack) as samples:
        statuses = await flood(requests, concurrency=24)
    assert samples, "pg_stat_activity was never read"
    assert max(samples) <= POOL_SIZE, f"connections seen: {sorted(set(samples))}"
    # Refused, answered or "busy, retry": never a server error, never a dropped request.
    assert sum(statuses.values()) == len(requests)
    assert set(statuses) <= {200, 401, 429, 503}, statuses
    assert statuses[200] >= 60, statuses  # the valid tokens and the sign-in page got through
    assert web_connections(fault_stack) <= POOL_SIZE
    # The process still serves, and PostgreSQL still has room for everyone else.
    async with httpx.AsyncClient(timeout=10) as client:
        tools = await client.get(api, headers={"Authorization": f"Bearer {key}"})
        ready = await client.get(f"{web.base_url}/readyz")
    assert tools.status_code == 200, tools.text
    assert ready.status_code == 200, ready.text


async def test_a_frozen_database_answers_503_within_the_pool_timeout(
    fault_stack: FaultStack, flooded_web: tuple[WebProcess, str]
) -> None:
    """SIGSTOP the whole cluster: requests beyond the pool are refused, not queued for ever.

    A query already sent to a stopped server waits for it (the kernel still acknowledges
    loopback traffic, so no client-side TCP limit fires): at most the pool's connections are
    held that way; every further request gets 503 once ``DATABASE_POOL_TIMEOUT`` passes.
    """
    web, key = flooded_web
    api = f"{web.base_url}/api/v1/tools/"
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(timeout=10) as client:
        assert (await client.get(api, headers=headers)).status_code == 200
        await open_session(client, web.url)  # the endpoint is now held in memory
    pids = cluster_pids(fault_stack)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        async with httpx.AsyncClient(timeout=30) as client:
            # First, while the pool still holds an idle connection, whose check would hang:
            # the probes answer in their bound, not ready, and the metrics without the
            # database's counts.
            scraped = await client.get(f"{web.base_url}/metrics")
            ready = await client.get(f"{web.base_url}/readyz")
        limits = httpx.Limits(max_connections=2 * POOL_SIZE + 2)
        async with httpx.AsyncClient(timeout=30, limits=limits) as client:
            pending = [
                asyncio.ensure_future(client.get(api, headers=headers))
                for _ in range(2 * POOL_SIZE + 2)
            ]
            # A new MCP session needs a row: refused after DATABASE_WAIT_SECONDS.
            initialize = await client.post(web.url, headers=JSON_HEADERS, json=INITIALIZE)
            done, stuck = await asyncio.wait(pending, timeout=15)
            answered = [task.result() for task in done]
            for task in stuck:
                task.cancel()
            await asyncio.gather(*stuck, return_exceptions=True)
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    assert ready.status_code == 503 and "database" in ready.json()["failed"], ready.text
    assert scraped.status_code == 200
    assert "mcphost_sessions_live" not in scraped.text
    assert initialize.status_code == 503, initialize.text
    assert initialize.headers.get("retry-after")
    assert len(stuck) <= POOL_SIZE, f"{len(stuck)} requests hung"
    assert answered and {r.status_code for r in answered} == {503}, [r.text for r in answered]
    assert all(r.headers.get("retry-after") for r in answered)
    assert answered[0].json()["type"] == "unavailable"
    # Once PostgreSQL runs again, so does the API.
    async with httpx.AsyncClient(timeout=30) as client, asyncio.timeout(60):
        while (await client.get(api, headers=headers)).status_code != 200:
            await asyncio.sleep(0.2)


def cluster_pids(fault_stack: FaultStack) -> list[int]:
    """The postmaster and every process it started."""
    postmaster = int((fault_stack.postgres.datadir / "postmaster.pid").read_text().split()[0])
    children = [
        int(pid)
        for pid in os.listdir("/proc")
        if pid.isdigit() and _parent_of(int(pid)) == postmaster
    ]
    return [postmaster, *children]


def _parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])
