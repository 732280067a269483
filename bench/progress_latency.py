"""How long a progress notification takes from a Celery worker to the client.

Usage (from the project root, after ``python3 dev.py test`` or ``run`` made .venv):

    .venv/bin/python bench/progress_latency.py [--calls 10] [--events 20]

Starts a throwaway PostgreSQL and Redis (scripts/services.py), one Daphne process and one
``celery -A mcpsite worker`` process on them, and calls a background tool (bench/bench_tools.py)
that reports progress ``--events`` times per call, stamping each event with the worker's wall
clock. The client (this process, on the same machine) times each event from that stamp to its
arrival on the call's SSE stream: worker -> Redis channel layer -> web process -> client.
Prints the distribution as one JSON line. The issue's target is a median under 250 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import JSON, distribution, open_session  # noqa: E402
from scripts import services  # noqa: E402
from tests.support.live import SERVERS, free_port, wait_for_port  # noqa: E402

MODULES = "mcp_app.builtin_tools,bench.bench_tools"


def start(stack: ExitStack, command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    stack.callback(process.wait, 15)
    stack.callback(process.terminate)
    return process


def call(url: str, session_id: str, request_id: int, events: int) -> list[float]:
    """One background call; the latency of each of its progress events, in milliseconds."""
    headers = {**JSON, "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {
            "name": "bench_progress",
            "arguments": {"count": events, "interval": 0.05},
            "_meta": {"progressToken": request_id},
        },
    }
    latencies = []
    with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as response:
        for line in response.iter_lines():
            if not line.startswith("data:") or len(line) <= 6:
                continue
            message = json.loads(line[5:])
            if message.get("method") == "notifications/progress":
                sent = float(message["params"]["message"])
                latencies.append((time.time() - sent) * 1000)
            elif "id" in message:
                break
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--events", type=int, default=20)
    args = parser.parse_args()
    with ExitStack() as stack:
        database_url = stack.enter_context(services.postgres())
        redis_url = stack.enter_context(services.redis())
        os.environ.update(
            DATABASE_URL=database_url, REDIS_URL=redis_url, MCP_PYTHON_TOOL_MODULES=MODULES
        )
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")
        import django

        django.setup()
        from django.core.management import call_command

        from mcp_app.models import Tool
        from mcp_app.services.catalog_writes import endpoint_create, tool_create

        call_command("migrate", verbosity=0)
        endpoint = endpoint_create(slug="bench", auth_mode="public")
        tool_create(
            name="bench_progress", kind="python", config={"function": "bench_progress"},
            execution_mode=Tool.Execution.BACKGROUND, endpoints=[endpoint],
        )  # fmt: skip
        port = free_port()
        env = {**os.environ, "PUBLIC_BASE_URL": f"http://127.0.0.1:{port}"}
        server = start(
            stack, [sys.executable, *(a.format(port=port) for a in SERVERS["daphne"])], env
        )
        start(
            stack,
            [sys.executable, "-m", "celery", "-A", "mcpsite", "worker", "--concurrency", "1",
             "--without-gossip", "--without-mingle", "--without-heartbeat"],
            env,
        )  # fmt: skip
        wait_for_port(port, server)
        url = f"http://127.0.0.1:{port}/mcp/bench"
        session_id = open_session(url)
        call(url, session_id, 1, 2)  # warm-up: the worker's first call imports and connects
        latencies = []
        for n in range(args.calls):
            latencies += call(url, session_id, n + 2, args.events)
        print(
            json.dumps(
                {
                    "scenario": "progress: Celery worker -> Redis -> Daphne -> client (SSE)",
                    "events": len(latencies),
                    **distribution(latencies),
                }
            )
        )


if __name__ == "__main__":
    main()
