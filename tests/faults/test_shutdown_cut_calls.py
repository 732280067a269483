"""A request the server's shutdown cuts still gets its call-log row, saying so.

Issue #25: uvicorn's graceful shutdown (``--timeout-graceful-shutdown``, 10 s in production)
cancels the requests still running when it runs out; a background call waiting on its worker
was cut that way, ran to completion on the worker, and left no call-log row, because the
rows still queued in a uvicorn worker process were never written (a ``multiprocessing`` child
leaves with ``os._exit``, which skips ``atexit``). Production runs uvicorn with several worker
processes (docker-compose.yml), so the test does too.

Daphne sends no ASGI lifespan events: it cancels the running requests in a Twisted "before
shutdown" trigger and exits normally. The records were left to ``atexit``, where the writer
thread had already been told to stop: the record of a request cut short was lost, and the
process spent two exit-flush waits (10 s) on a queue nothing would write, outliving the kill
timeout of the live-server helpers.
"""

from __future__ import annotations

import asyncio
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

from tests.faults.conftest import SLUG, FaultStack, WebProcess
from tests.faults.wire import MODERN_META, modern_headers, session_headers, tool_call
from tests.support.live import ROOT, STOP_SECONDS, free_port, listening, wait_for_port
from tests.support.raw_mcp import open_session
from tests.support.waiting import wait_until

INTERRUPTED = "The server shut down before the call ended."


@contextlib.contextmanager
def uvicorn_workers(fault_stack: FaultStack) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """uvicorn with two worker processes and a one-second graceful shutdown."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    log = tempfile.NamedTemporaryFile(  # noqa: SIM115 (the server writes it until it stops)
        prefix="mcphost-shutdown-", suffix=".log", delete=False
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "mcpsite.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "2",
            "--lifespan",
            "on",
            "--no-access-log",
            "--timeout-graceful-shutdown",
            "1",
        ],  # fmt: skip
        cwd=ROOT,
        env={**os.environ, **fault_stack.env, "PUBLIC_BASE_URL": base_url},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    try:
        wait_for_port(port, process)
        yield process, base_url
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        if not os.environ.get("MCPHOST_KEEP_SERVER_LOGS"):
            Path(log.name).unlink(missing_ok=True)


async def on_worker(fault_stack: FaultStack, rpc_id: str) -> None:
    """Wait until the background call of request ``rpc_id`` runs on a worker."""
    async with asyncio.timeout(20):
        while not fault_stack.postgres.query(
            "SELECT 1 FROM mcp_app_backgroundcall WHERE request_id = %s::jsonb"
            " AND status = 'working'",
            f'"{rpc_id}"',
        ):
            await asyncio.sleep(0.1)


def call_rows(fault_stack: FaultStack, rpc_id: str) -> list[tuple[str, str]]:
    return [
        (str(status), str(message))
        for status, message in fault_stack.postgres.query(
            "SELECT status, error_message FROM mcp_app_calllog"
            " WHERE rpc_method = 'tools/call' AND rpc_id = %s",
            f'"{rpc_id}"',
        )
    ]


async def test_a_background_call_cut_by_shutdown_is_recorded_as_interrupted(
    fault_stack: FaultStack,
) -> None:
    rpc_id = f"cut-{time.monotonic_ns()}"
    with uvicorn_workers(fault_stack) as (server, base_url):
        url = f"{base_url}/mcp/{SLUG}"
        async with httpx.AsyncClient(timeout=30) as client:
            request = asyncio.ensure_future(
                client.post(
                    url,
                    headers=modern_headers("tools/call", "countdown"),
                    json=tool_call(rpc_id, "countdown", {"seconds": 20}, **MODERN_META),
                )
            )
            await on_worker(fault_stack, rpc_id)
            server.send_signal(signal.SIGTERM)
            with contextlib.suppress(httpx.HTTPError):
                await request
        server.wait(30)
    # Written by the web process before it left: no waiting on anything else.
    assert call_rows(fault_stack, rpc_id) == [("cancelled", INTERRUPTED)], (
        fault_stack.postgres.query(
            "SELECT rpc_method, rpc_id, status, error_message FROM mcp_app_calllog"
            " ORDER BY id DESC LIMIT 5"
        )
    )


def stream_rows(fault_stack: FaultStack, session_id: str) -> list[tuple[str, str]]:
    return [
        (str(status), str(message))
        for status, message in fault_stack.postgres.query(
            "SELECT status, error_message FROM mcp_app_calllog"
            " WHERE http_method = 'GET' AND session_id = %s",
            session_id,
        )
    ]


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_daphne_records_the_requests_its_shutdown_cuts_and_exits_by_itself(
    fault_stack: FaultStack, web_process: Callable[[str], WebProcess], stop: signal.Signals
) -> None:
    web = web_process("daphne")
    rpc_id = f"cut-{time.monotonic_ns()}"
    async with httpx.AsyncClient(timeout=30) as client:
        session_id = await open_session(client, web.url)
        # A 2025-11-25 session's standalone stream: open until the server ends it.
        get_headers = {**session_headers(session_id), "accept": "text/event-stream"}
        async with client.stream("GET", web.url, headers=get_headers) as stream:
            assert stream.status_code == 200
            request = asyncio.ensure_future(
                client.post(
                    web.url,
                    headers=modern_headers("tools/call", "countdown"),
                    json=tool_call(rpc_id, "countdown", {"seconds": 20}, **MODERN_META),
                )
            )
            await on_worker(fault_stack, rpc_id)
            web.process.send_signal(stop)
            # Daphne closes its port once its "before shutdown" triggers are done; by then the
            # rows of the requests it cut short are written, not left to the exit.
            port = int(web.base_url.rpartition(":")[2])
            await asyncio.to_thread(wait_until, lambda: not listening(port), "a closed port")
            rows = call_rows(fault_stack, rpc_id), stream_rows(fault_stack, session_id)
            with contextlib.suppress(httpx.HTTPError):
                await request
    try:
        # Within the time the live-server helpers give a server before they kill it.
        code = await asyncio.to_thread(web.process.wait, STOP_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail(f"Daphne still running {STOP_SECONDS} s after {stop.name}:\n{web.log()}")
    assert code == 0, web.log()
    assert rows == ([("cancelled", INTERRUPTED)], [("cancelled", INTERRUPTED)]), web.log()


# A process whose writer thread runs (it has served a request) exits, normally, while a
# request is running: no server hook ran, only atexit.
EXIT_SCRIPT = """
import django
django.setup()
from mcp_app.services.calllog.recorder import CallRecorder
from mcp_app.services.calllog.writer import call_log_flush
assert call_log_flush(timeout=10)
scope = {{"method": "POST", "url_route": {{"kwargs": {{"slug": {slug!r}}}}}}}
CallRecorder(scope, {{}}, {request_id!r}).request_body({body!r})
"""


def test_a_request_running_at_exit_is_recorded_by_the_atexit_handlers(
    fault_stack: FaultStack,
) -> None:
    request_id = f"exit-{time.monotonic_ns()}"
    body = json.dumps(tool_call("at-exit", "echo", {"text": "hi"})).encode()
    script = EXIT_SCRIPT.format(slug=SLUG, request_id=request_id, body=body)
    env = {**os.environ, **fault_stack.env, "DJANGO_SETTINGS_MODULE": "mcpsite.settings"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    # The recorder's handler queues the row; the writer's, run after it, writes it.
    assert fault_stack.postgres.query(
        "SELECT rpc_method, status, error_message FROM mcp_app_calllog WHERE request_id = %s",
        request_id,
    ) == [("tools/call", "cancelled", INTERRUPTED)], done.stderr.decode(errors="replace")
