"""Throughput and latency of the MCP hot path, measured against a real server.

Usage (from the project root, after ``python3 dev.py test`` or ``run`` made .venv):

    .venv/bin/python bench/run.py [--seconds 10] [--concurrency 32] [--url URL]

Without ``--url`` it starts what production runs: a throwaway PostgreSQL
(scripts/services.py), ``migrate`` + ``seed_demo``, and one Daphne (or ``--server uvicorn``)
process pinned to CPU 0, with the load generator pinned to CPU 1. Each scenario runs a closed
loop of ``--concurrency`` connections for ``--seconds`` after a warm-up, with ``wrk`` when it
is installed (``apt-get install wrk``; a Python load generator saturates before the server
does), and prints requests/s, p50/p99 latency and errors as JSON lines. Nothing here is
asserted: speed is measured, not tested.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts import services  # noqa: E402
from tests.support.live import SERVERS, free_port, wait_for_port  # noqa: E402

JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
Request = tuple[dict[str, str], dict[str, Any]]


def modern_request(method: str, params: dict[str, Any], name: str | None = None) -> Request:
    """Headers and body of a 2026-07-28 request."""
    headers = {**JSON, "mcp-protocol-version": "2026-07-28", "mcp-method": method}
    if name:
        headers["mcp-name"] = name
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": MODERN_META}}
    return headers, body


def legacy_request(url: str) -> Request:
    """Headers and body of a 2025-11-25 tools/call on a freshly initialized session."""
    init = httpx.post(
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
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": "hello world"}},
    }
    return headers, body


def wrk_load(url: str, request: Request, seconds: float, concurrency: int) -> dict[str, Any]:
    """Replay one request with wrk, a C load generator that does not cap the figures."""
    headers, body = request
    lines = ['wrk.method = "POST"', f"wrk.body = {json.dumps(json.dumps(body))}"]
    lines += [f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in headers.items()]
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write("\n".join(lines) + "\n")
    try:
        command = ["wrk", "-t1", f"-c{concurrency}", f"-d{max(1, round(seconds))}s", "--latency"]
        out = subprocess.run(
            [*command, "-s", script.name, url], capture_output=True, text=True, check=True
        ).stdout
    finally:
        os.unlink(script.name)

    def number(pattern: str) -> str:
        found = re.search(pattern, out, re.M)
        if found is None:
            raise RuntimeError(f"unexpected wrk output:\n{out}")
        return found.group(1)

    def ms(label: str) -> float:
        found = re.search(rf"^\s+{label}\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if found is None:
            return float("nan")
        return round(
            float(found.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[found.group(2)], 2
        )

    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: (.*)", out)
    return {
        "requests": int(number(r"(\d+) requests in")),
        "rps": float(number(r"Requests/sec:\s+([\d.]+)")),
        "p50_ms": ms("50%"),
        "p99_ms": ms("99%"),
        "errors": int(non_2xx.group(1)) if non_2xx else 0,
        "socket_errors": socket_errors.group(1) if socket_errors else "",
        "generator": "wrk",
    }


async def httpx_load(
    url: str, request: Request, seconds: float, concurrency: int
) -> dict[str, Any]:
    """The same closed loop in Python, for machines without wrk (saturates near 300/s here)."""
    headers, body = request
    latencies: list[float] = []
    errors = 0
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async def worker(client: httpx.AsyncClient, n: int) -> None:
        nonlocal errors
        while time.monotonic() < deadline:
            began = time.perf_counter()
            try:
                response = await client.post(url, json={**body, "id": n}, headers=headers)
                ok = response.status_code == 200 and b'"error"' not in response.content
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
        "p99_ms": round(latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000, 2),
        "errors": errors,
        "generator": "httpx",
    }


def measure(url: str, request: Request, seconds: float, concurrency: int) -> dict[str, Any]:
    if shutil.which("wrk"):
        wrk_load(url, request, min(3.0, seconds), concurrency)  # warm-up, discarded
        return wrk_load(url, request, seconds, concurrency)
    asyncio.run(httpx_load(url, request, min(3.0, seconds), concurrency))
    return asyncio.run(httpx_load(url, request, seconds, concurrency))


@contextlib.contextmanager
def server(kind: str) -> Iterator[str]:
    """Start PostgreSQL and one ``kind`` server process with the demo endpoint; yield its URL."""
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
        process = subprocess.Popen(
            [sys.executable, *(arg.format(port=port) for arg in SERVERS[kind])],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=lambda: os.sched_setaffinity(0, {0}),
        )
        try:
            wait_for_port(port, process)
            yield f"http://127.0.0.1:{port}/mcp/demo"
        finally:
            process.terminate()
            process.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--server", choices=sorted(SERVERS), default="daphne")
    parser.add_argument("--url", help="benchmark this running endpoint instead")
    args = parser.parse_args()
    cpus = os.cpu_count() or 1
    os.sched_setaffinity(0, {1 % cpus})  # the load generator (and wrk, its child) off CPU 0
    with contextlib.nullcontext(args.url) if args.url else server(args.server) as url:
        scenarios = {
            "2026-07-28 tools/call echo (JSON)": modern_request(
                "tools/call", {"name": "echo", "arguments": {"message": "hello world"}}, "echo"
            ),
            "2026-07-28 tools/list": modern_request("tools/list", {}),
            "2025-11-25 tools/call echo (session)": legacy_request(url),
        }
        for name, request in scenarios.items():
            row = measure(url, request, args.seconds, args.concurrency)
            print(json.dumps({"scenario": name, **row}), flush=True)


if __name__ == "__main__":
    main()
