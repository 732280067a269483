#!/usr/bin/env python3
"""The server CPU of one warm ``tools/call``, in process: per request, and where it goes.

Usage (from the project root):

    .venv/bin/python bench/profile_call.py [--requests 4000] [--concurrency 32]
        [--scenarios call-2026,call-2026-oauth,call-legacy,call-legacy-oauth,call-2026-limits]
        [--profile call-2026-oauth] [--top 40] [--repeat 1]

It starts a throwaway PostgreSQL and Redis, fills them as bench/compare.py does (its
``prepare_database``: the echo endpoints, the OAuth token, the three rate limits) and drives
the ASGI application directly, ``--concurrency`` requests at a time on uvloop, with no server
and no socket. For each scenario it prints the process's CPU (every thread: the call-log
writer's included) per request, and with ``--profile`` a cProfile of that scenario (the event
loop thread only: cProfile sees no other thread). What uvicorn and the socket cost comes on
top (the raw ASGI row of compare.py). With ``--repeat N`` each scenario is measured N times in
a row in the same process and the least and the median are printed as well: on a loaded host
other work only adds to a figure, so the least of several is the steadier one. Nothing is
asserted.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import cProfile  # noqa: E402
import json  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from bench import compare  # noqa: E402
from scripts import services  # noqa: E402

SCENARIOS = ["call-2026", "call-2026-oauth", "call-legacy", "call-legacy-oauth", "call-2026-limits"]
WARMUP_REQUESTS = 300


class Driver:
    """Sends requests to the ASGI application as a server would, and checks each answer."""

    def __init__(self, application: Any, port: int) -> None:
        self.application = application
        self.host = f"127.0.0.1:{port}".encode()

    async def post(
        self, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", self.host),
                (b"content-length", str(len(body)).encode()),
                *((k.lower().encode(), v.encode()) for k, v in headers.items()),
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 80),
        }
        incoming = [{"type": "http.request", "body": body, "more_body": False}]
        done = asyncio.Event()
        status = 0
        answer_headers: dict[str, str] = {}
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            if incoming:
                return incoming.pop()
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                answer_headers.update(
                    (k.decode(), v.decode()) for k, v in message.get("headers", ())
                )
            else:
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    done.set()

        await self.application(scope, receive, send)
        await asyncio.wait_for(done.wait(), 10)
        return status, answer_headers, b"".join(chunks)


async def request_of(
    driver: Driver, scenario: str, token: str
) -> tuple[str, dict[str, str], bytes]:
    """The path, headers and body of ``scenario``'s call (a legacy session opened now)."""
    target = "ours-uvicorn"
    url, request = compare.request_for(scenario, target, "")
    auth = {k: v.format(token=token) for k, v in request.extra.get("legacy", {}).items()}
    headers = {k: v.format(token=token) for k, v in request.headers.items()}
    if "legacy" not in request.extra:
        return url, headers, json.dumps(request.body).encode()
    headers = {**compare.ACCEPT, "content-type": "application/json", **auth}
    status, got, _ = await driver.post(url, headers, json.dumps(compare.initialize_body()).encode())
    assert status == 200, status
    headers |= {"mcp-session-id": got["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await driver.post(url, headers, json.dumps(initialized).encode())
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": compare._echo_params()}
    return url, headers, json.dumps(body).encode()


async def load(
    driver: Driver, call: tuple[str, dict[str, str], bytes], requests: int, concurrency: int
) -> None:
    path, headers, body = call
    headers = {"content-type": "application/json", **headers}
    left = requests

    async def one_connection() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            status, _, answer = await driver.post(path, headers, body)
            if status != 200 or compare.MESSAGE.encode() not in answer:
                raise RuntimeError(f"{path} answered {status}: {answer[:300]!r}")

    await asyncio.gather(*(one_connection() for _ in range(concurrency)))


async def measure(args: argparse.Namespace, port: int, token: str) -> None:
    from mcpsite.asgi import application

    driver = Driver(application, port)
    for scenario in args.scenarios.split(","):
        call = await request_of(driver, scenario, token)
        await load(driver, call, WARMUP_REQUESTS, args.concurrency)
        # Let the call-log writer drain the warm-up before the clock starts.
        await asyncio.sleep(0.5)
        # The event loop thread's CPU, not the wall clock: the host is shared, and the time
        # this thread waits for the GIL or the CPU is not its cost.
        profiled = scenario in args.profile.split(",")
        profiler = cProfile.Profile(time.thread_time) if profiled else None
        figures: list[tuple[float, float]] = []
        for _ in range(args.repeat):
            began_cpu, began = time.process_time(), time.perf_counter()
            began_loop = time.thread_time()
            if profiler is not None:
                profiler.enable()
            await load(driver, call, args.requests, args.concurrency)
            if profiler is not None:
                profiler.disable()
            loop_cpu = time.thread_time() - began_loop
            await asyncio.sleep(0.5)  # the writer's share of these requests
            cpu = time.process_time() - began_cpu
            wall = time.perf_counter() - began - 0.5
            figures.append((cpu / args.requests * 1e6, loop_cpu / args.requests * 1e6))
            print(
                f"{scenario:>18}: {figures[-1][0]:7.1f} µs CPU/request (all threads),"
                f" {figures[-1][1]:7.1f} on the event loop's thread,"
                f" {args.requests / wall:7.0f} req/s{' (profiled)' if profiler else ''}",
                flush=True,
            )
        if args.repeat > 1:
            every, loop = [f[0] for f in figures], [f[1] for f in figures]
            print(
                f"{scenario:>18}: least {min(every):7.1f} / median {statistics.median(every):7.1f}"
                f" µs CPU/request (all threads), least {min(loop):7.1f} / median"
                f" {statistics.median(loop):7.1f} on the event loop's thread"
                f" ({args.repeat} runs of {args.requests})",
                flush=True,
            )
        if profiler is not None:
            stats = pstats.Stats(profiler)
            if args.dump:
                stats.dump_stats(f"{args.dump}-{scenario}.prof")
            stats.sort_stats("tottime").print_stats(args.top)
            stats.sort_stats("cumulative").print_stats(args.top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--profile", default="", help="the scenarios to profile (comma-separated)")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument(
        "--repeat", type=int, default=1, help="measure each scenario this many times in a row"
    )
    parser.add_argument(
        "--dump", default="", help="also write each profile to DUMP-<scenario>.prof"
    )
    args = parser.parse_args()
    with (
        services.postgres(database="mcphost_profile") as database_url,
        services.redis() as redis_url,
    ):
        compare.tune_postgres(database_url)
        port = compare.free_port()
        os.environ.update(
            {
                "DATABASE_URL": database_url,
                "REDIS_URL": redis_url,
                "DEBUG": "0",
                "SECRET_KEY": compare.SECRET_KEY,
                "PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
                "DJANGO_SETTINGS_MODULE": "mcpsite.settings",
            }
        )
        token = compare.prepare_database(port)
        import uvloop

        uvloop.run(measure(args, port, token))


if __name__ == "__main__":
    main()
