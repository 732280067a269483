"""How long a catalog edit takes to reach a client connected to another web process.

Usage (from the project root, after ``python3 dev.py test`` or ``run`` made .venv):

    .venv/bin/python bench/notify_latency.py [--edits 50]

Starts a throwaway PostgreSQL and Redis (scripts/services.py) and two Daphne processes on
them, opens a legacy session on the first and its GET stream on the second, then commits
``--edits`` tool edits from this process (as the admin would) and times each one from just
before the commit to the arrival of ``notifications/tools/list_changed`` on the stream.
Prints the distribution as one JSON line. The issue's target is under one second.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import distribution, open_session  # noqa: E402
from scripts import services  # noqa: E402
from tests.support.live import SERVERS, free_port, wait_for_port  # noqa: E402


def start_daphne(stack: ExitStack, env: dict[str, str]) -> str:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, *(arg.format(port=port) for arg in SERVERS["daphne"])],
        cwd=ROOT,
        env={**env, "PUBLIC_BASE_URL": f"http://127.0.0.1:{port}"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    stack.callback(process.wait, 10)
    stack.callback(process.terminate)
    wait_for_port(port, process)
    return f"http://127.0.0.1:{port}/mcp/demo"


def read_stream(
    url: str, session_id: str, arrivals: queue.Queue[float], ready: threading.Event
) -> None:
    headers = {"accept": "text/event-stream", "mcp-session-id": session_id}
    try:
        with httpx.stream("GET", url, headers=headers, timeout=None) as response:
            ready.set()
            for line in response.iter_lines():
                if line.startswith("data:") and "tools/list_changed" in line:
                    arrivals.put(time.perf_counter())
    except httpx.HTTPError:
        return  # the servers stop at the end of the run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=50)
    args = parser.parse_args()
    with ExitStack() as stack:
        database_url = stack.enter_context(services.postgres())
        redis_url = stack.enter_context(services.redis())
        os.environ.update(DATABASE_URL=database_url, REDIS_URL=redis_url)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")
        import django

        django.setup()
        from django.core.management import call_command

        from mcp_app.conf import get_conf
        from mcp_app.models import Tool

        call_command("migrate", verbosity=0)
        call_command("seed_demo", stdout=open(os.devnull, "w"))  # noqa: SIM115
        env = {**os.environ}
        first, second = start_daphne(stack, env), start_daphne(stack, env)
        session_id = open_session(first)
        arrivals: queue.Queue[float] = queue.Queue()
        ready = threading.Event()
        threading.Thread(
            target=read_stream, args=(second, session_id, arrivals, ready), daemon=True
        ).start()
        ready.wait(10)
        tool = Tool.objects.get(name="echo")
        latencies = []
        for n in range(args.edits):
            tool.description = f"Return the given message unchanged (edit {n})."
            started = time.perf_counter()
            tool.save()  # autocommit: the change is published as soon as it is committed
            latencies.append((arrivals.get(timeout=10) - started) * 1000)
            # Past the stream's coalescing window: an edit within it is held, by design, until
            # the window closes, and this measures how fast an edit travels, not the window.
            time.sleep(get_conf().MCP_LIST_CHANGED_COALESCE_SECONDS + 0.02)
        print(
            json.dumps(
                {
                    "scenario": "tool edit -> list_changed on another Daphne process",
                    "edits": len(latencies),
                    **distribution(latencies),
                }
            )
        )


if __name__ == "__main__":
    main()
