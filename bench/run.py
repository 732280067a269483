"""Throughput and latency of the MCP hot path, measured against a real server.

Usage (from the project root, after ``python3 dev.py test`` or ``run`` made .venv):

    .venv/bin/python bench/run.py [--seconds 10] [--concurrency 32] [--url URL]

Without ``--url`` it starts what production runs: a throwaway PostgreSQL (scripts/services.py),
``migrate`` + ``seed_demo``, and one Daphne process pinned to CPU 0, with the load generator
pinned to CPU 1 when ``taskset`` exists. Each scenario runs a closed loop of ``--concurrency``
clients for ``--seconds`` after a warm-up, and reports requests/s, p50/p99 latency and
errors. Results are printed, never asserted: speed is measured here, not in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts import services  # noqa: E402
from tests.support.live import free_port, wait_for_port  # noqa: E402

JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}

Scenario = Callable[[httpx.AsyncClient, int], Awaitable[httpx.Response]]


def modern_call(url: str) -> Scenario:
    headers = {
        **JSON,
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "echo",
    }

    async def send(client: httpx.AsyncClient, n: int) -> httpx.Response:
        body = {
            "jsonrpc": "2.0",
            "id": n,
            "method": "tools/call",
            "params": {
                "name": "echo",
                "arguments": {"message": "hello world"},
                "_meta": MODERN_META,
            },
        }
        return await client.post(url, json=body, headers=headers)

    return send


def modern_list(url: str) -> Scenario:
    headers = {**JSON, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}

    async def send(client: httpx.AsyncClient, n: int) -> httpx.Response:
        body = {"jsonrpc": "2.0", "id": n, "method": "tools/list", "params": {"_meta": MODERN_META}}
        return await client.post(url, json=body, headers=headers)

    return send


async def legacy_call(url: str) -> Scenario:
    async with httpx.AsyncClient() as client:
        init = await client.post(
            url,
            headers=JSON,
            json={
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "0"},
                },
            },
        )
    headers = {
        **JSON,
        "mcp-session-id": init.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-11-25",
    }

    async def send(client: httpx.AsyncClient, n: int) -> httpx.Response:
        body = {
            "jsonrpc": "2.0",
            "id": n,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": "hello world"}},
        }
        return await client.post(url, json=body, headers=headers)

    return send


async def load(send: Scenario, seconds: float, concurrency: int) -> dict[str, Any]:
    latencies: list[float] = []
    errors = 0
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async def worker(client: httpx.AsyncClient, start: int) -> None:
        nonlocal errors
        n = start
        while time.monotonic() < deadline:
            began = time.perf_counter()
            try:
                response = await send(client, n)
                ok = response.status_code == 200 and b"error" not in response.content[:64]
            except httpx.HTTPError:
                ok = False
            latencies.append(time.perf_counter() - began)
            errors += not ok
            n += concurrency

    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        started = time.monotonic()
        await asyncio.gather(*(worker(client, i) for i in range(concurrency)))
        elapsed = time.monotonic() - started
    latencies.sort()
    return {
        "requests": len(latencies),
        "rps": round(len(latencies) / elapsed, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 2),
        "p99_ms": round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 2),
        "errors": errors,
    }


@contextlib.contextmanager
def server() -> Iterator[str]:
    """Start PostgreSQL and one Daphne process with the demo endpoint; yield its MCP URL."""
    with services.postgres() as database_url:
        port = free_port()
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
        }
        env.pop("REDIS_URL", None)
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        subprocess.run(
            [*manage, "seed_demo"], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL
        )
        pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
        daphne = [sys.executable, "-m", "daphne", "-v", "0", "-b", "127.0.0.1", "-p", str(port)]
        process = subprocess.Popen([*pin, *daphne, "mcpsite.asgi:application"], cwd=ROOT, env=env)
        try:
            wait_for_port(port, process)
            yield f"http://127.0.0.1:{port}/mcp/demo"
        finally:
            process.terminate()
            process.wait(10)


async def bench(url: str, seconds: float, concurrency: int) -> list[dict[str, Any]]:
    scenarios = {
        "2026-07-28 tools/call echo (JSON)": modern_call(url),
        "2026-07-28 tools/list": modern_list(url),
        "2025-11-25 tools/call echo (session)": await legacy_call(url),
    }
    rows = []
    for name, send in scenarios.items():
        await load(send, min(3.0, seconds), concurrency)  # warm-up, discarded
        rows.append({"scenario": name, **await load(send, seconds, concurrency)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--url", help="benchmark a running server's endpoint instead")
    args = parser.parse_args()
    if shutil.which("taskset"):
        os.sched_setaffinity(0, {1 % (os.cpu_count() or 1)})
    with contextlib.nullcontext(args.url) if args.url else server() as url:
        rows = asyncio.run(bench(url, args.seconds, args.concurrency))
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
