"""Smoke test of the README's run command: the embedded default (SQLite, in-memory layer).

This is the one place SQLite is used on purpose: it is what a first-time user runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mcp import Client

from tests.support.live import ROOT, free_port, listening, wait_for_port
from tests.support.waiting import wait_until

# Marked so pytest-django sets up the test database (the live server fixture needs it).
pytestmark = pytest.mark.django_db

DROPPED = ("DATABASE_URL", "REDIS_URL", "PUBLIC_BASE_URL", "SECRET_KEY", "CELERY_BROKER_URL")


async def test_run_command_serves_the_demo_endpoint(tmp_path: Path) -> None:
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in DROPPED}
    env["MCPHOST_VAR_DIR"] = str(tmp_path)
    log_path = tmp_path / "run.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "dev.py", "run", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            await asyncio.to_thread(wait_for_port, port, process, 180.0)
            url = f"http://127.0.0.1:{port}/mcp/demo"
            async with asyncio.timeout(40):
                async with Client(url, mode="legacy") as client:
                    tools = {tool.name for tool in (await client.list_tools()).tools}
                    result = await client.call_tool("echo", {"message": "hello"})
                async with Client(url, mode="2026-07-28") as client:
                    modern = await client.call_tool("add", {"a": 1, "b": 2})
                    # A background tool runs on the embedded worker (no broker installed).
                    background = await client.call_tool(
                        "countdown", {"seconds": 2}, progress_callback=on_progress
                    )
                # The OAuth demo endpoint sends a client without a token to its metadata.
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
                    challenge = await http.post(
                        "/mcp/demo-oauth",
                        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                        headers={"accept": "application/json, text/event-stream"},
                    )
                    metadata = await http.get(
                        "/.well-known/oauth-protected-resource/mcp/demo-oauth"
                    )
        finally:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)
    output = log_path.read_text()
    assert {"echo", "add"} <= tools, output
    assert result.content[0].text == "hello"
    assert modern.structured_content == {"sum": 3}
    assert background.structured_content == {"counted": 2}, background
    assert progress == [1, 2]
    assert challenge.status_code == 401
    assert "resource_metadata=" in challenge.headers["www-authenticate"]
    assert metadata.json()["resource"] == f"http://127.0.0.1:{port}/mcp/demo-oauth"
    assert f"http://127.0.0.1:{port}/mcp/demo-oauth" in output
    assert f"http://127.0.0.1:{port}/mcp/demo" in output
    assert "admin" in output and (tmp_path / "admin-credentials").exists()
    # The system checks run once per start, so their warnings print once.
    assert output.count("MCP_SECRET_KEYS is not set") == 1, output
    # A background call that succeeds leaves no traceback behind.
    assert "Traceback" not in output and "No hostname was supplied" not in output, output


async def test_run_command_runs_the_stdio_bridge_beside_the_web_process(tmp_path: Path) -> None:
    """With stdio servers allowed, ``dev.py run`` starts the bridge too, and it ends with
    the web process (which takes over dev.py's process) without being told."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in DROPPED}
    env["MCPHOST_VAR_DIR"] = str(tmp_path)
    env["MCP_STDIO_SERVERS"] = json.dumps({"sdk": {"command": [sys.executable, "-c", "pass"]}})
    for name in ("MCP_STDIO_BRIDGE_URL", "MCP_STDIO_BRIDGE_SECRET"):
        env.pop(name, None)
    log_path = tmp_path / "run.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "dev.py", "run", "--port", str(port)],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            await asyncio.to_thread(wait_for_port, port, process, 180.0)
            # dev.py picked a free port for it and printed where, before Daphne started.
            bridge = re.search(r"stdio bridge:  (http://127\.0\.0\.1:(\d+))", log_path.read_text())
            assert bridge, log_path.read_text()
            bridge_port = int(bridge[2])
            await asyncio.to_thread(wait_for_port, bridge_port, process, 60.0)
            async with httpx.AsyncClient(base_url=bridge[1]) as http:
                health = await http.get("/healthz")
                refused = await http.post("/sdk/mcp", json={})
            # Only the web process (dev.py's own pid) is stopped; the bridge follows it.
            process.send_signal(signal.SIGINT)
            await asyncio.to_thread(process.wait, 20)
            await asyncio.to_thread(wait_for_free_port, bridge_port, 20.0)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
    output = log_path.read_text()
    assert health.text == "ok" and refused.status_code == 401
    # The checks ran with the bridge's URL already chosen: no warning that it is missing.
    assert "MCP_STDIO_BRIDGE_URL is not set" not in output, output


def wait_for_free_port(port: int, timeout: float) -> None:
    wait_until(
        lambda: not listening(port), f"127.0.0.1:{port} closed", timeout=timeout, interval=0.1
    )
