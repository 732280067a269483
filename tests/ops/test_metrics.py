"""``/metrics`` (issue #16): exact counts after known traffic, added up across the processes
of a multi-worker uvicorn (``PROMETHEUS_MULTIPROC_DIR``), gauges that follow streams and
sessions, and access limited to the configured networks or bearer token.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from mcp_app.auth.bearer import clear_token_cache, token_info
from mcp_app.ops.probes import probe_app
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.live import (
    ROOT,
    SECRET_KEY,
    database_url,
    flush_database,
    free_port,
    wait_for_port,
)
from tests.support.oauth import issue_token
from tests.support.raw_mcp import open_session
from tests.support.waiting import wait_until

SLUG = "metered"
JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
WAIT_SECONDS = 15.0


@contextlib.contextmanager
def uvicorn_workers(count: int) -> Iterator[str]:
    """uvicorn with ``count`` worker processes sharing one PROMETHEUS_MULTIPROC_DIR."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    metrics_dir = Path(tempfile.mkdtemp(prefix="mcphost-prometheus-"))
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "PUBLIC_BASE_URL": base_url,
        "SECRET_KEY": SECRET_KEY,
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
    }
    command = [
        sys.executable, "-m", "uvicorn", "mcpsite.asgi:application", "--host", "127.0.0.1",
        "--port", str(port), "--workers", str(count), "--lifespan", "on", "--no-access-log",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for_port(port, process)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        shutil.rmtree(metrics_dir, ignore_errors=True)


def scrape(base_url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(f"{base_url}/metrics", timeout=10).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def modern(url: str, method: str, params: dict[str, Any], name: str = "") -> httpx.Response:
    headers = {**JSON, "mcp-protocol-version": "2026-07-28", "mcp-method": method}
    if name:
        headers["mcp-name"] = name
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": MODERN_META}}
    # A new connection per request, so the workers share the traffic.
    with httpx.Client(timeout=10) as client:
        return client.post(url, headers=headers, json=body)


@pytest.fixture(scope="module")
def server(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    with django_db_blocker.unblock():
        endpoint = make_endpoint(SLUG)
        endpoint.tools.add(make_python_tool("echo", "echo"))
    with uvicorn_workers(2) as base_url:
        yield base_url
    flush_database(django_db_blocker)


@pytest.mark.django_db
def test_counts_are_exact_and_added_up_across_worker_processes(server: str) -> None:
    url = f"{server}/mcp/{SLUG}"
    before = scrape(server)
    for _ in range(5):
        response = modern(
            url, "tools/call", {"name": "echo", "arguments": {"message": "hi"}}, "echo"
        )
        assert response.status_code == 200
    for _ in range(2):
        assert modern(url, "tools/list", {}).status_code == 200
    # Unknown tool: counted, but never as a tool label of its own.
    modern(url, "tools/call", {"name": "nope", "arguments": {}}, "nope")

    def delta(name: str, **labels: str) -> float:
        return value(scrape(server), name, **labels) - value(before, name, **labels)

    calls = {"endpoint": SLUG, "method": "tools/call", "era": "modern"}
    wait_until(
        lambda: delta("mcphost_mcp_messages_total", **calls, status="ok") == 5
        and delta("mcphost_mcp_messages_total", endpoint=SLUG, method="tools/list",
                  era="modern", status="ok") == 2
        and delta("mcphost_mcp_messages_total", **calls, status="protocol_error") == 1,
        "exact message counts",
    )  # fmt: skip
    # Every scrape, whichever worker answers it, shows the same totals.
    after = [scrape(server) for _ in range(4)]
    for samples in after:
        assert (
            value(samples, "mcphost_mcp_messages_total", **calls, status="ok")
            - value(before, "mcphost_mcp_messages_total", **calls, status="ok")
            == 5
        )
        for name in ("mcphost_tool_call_duration_seconds_count", "mcphost_tool_calls_total"):
            labels = (
                {"endpoint": SLUG}
                if name.endswith("_count")
                else {"endpoint": SLUG, "tool": "echo"}
            )
            assert value(samples, name, **labels) - value(before, name, **labels) == 5, name
        assert value(samples, "mcphost_tool_calls_total", endpoint=SLUG, tool="nope") == 0
        assert not [labels for (name, labels) in samples if ("tool", "nope") in labels]


@pytest.mark.django_db
def test_stream_and_session_gauges_follow_the_traffic(server: str) -> None:
    url = f"{server}/mcp/{SLUG}"
    sessions_before = value(scrape(server), "mcphost_sessions_live")

    async def scenario() -> None:
        async with httpx.AsyncClient(timeout=10) as client:
            session_id = await open_session(client, url)
            headers = {"accept": "text/event-stream", "mcp-session-id": session_id,
                       "mcp-protocol-version": "2025-11-25"}  # fmt: skip
            async with client.stream("GET", url, headers=headers) as stream:
                assert stream.status_code == 200
                samples = await asyncio.to_thread(scrape, server)
                assert value(samples, "mcphost_sse_streams_open") == 1
                assert value(samples, "mcphost_sessions_live") == sessions_before + 1

    asyncio.run(scenario())
    wait_until(
        lambda: value(scrape(server), "mcphost_sse_streams_open") == 0, "the stream gauge back at 0"
    )


@pytest.mark.django_db(transaction=True)
async def test_token_cache_counts_hits_and_misses() -> None:
    clear_token_cache()

    @sync_to_async
    def make_token() -> str:
        user = get_user_model().objects.create_user("metered-user", password="x")
        return issue_token(user, resource=["http://x/mcp/a"])

    raw = await make_token()

    def count(result: str) -> float:
        return (
            REGISTRY.get_sample_value("mcphost_token_cache_lookups_total", {"result": result}) or 0
        )

    hits, misses = count("hit"), count("miss")
    for _ in range(3):
        assert await token_info(raw) is not None
    assert (count("hit") - hits, count("miss") - misses) == (2, 1)
    clear_token_cache()


async def _get_metrics(client_ip: str, headers: list[tuple[bytes, bytes]] = []) -> int:  # noqa: B006
    scope = {"type": "http", "method": "GET", "path": "/metrics", "headers": headers,
             "client": (client_ip, 40000)}  # fmt: skip
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async with asyncio.timeout(10):
        await probe_app(scope, receive, send)
    return sent[0]["status"]


@pytest.mark.django_db(transaction=True)
async def test_metrics_answer_only_allowed_networks_or_the_token(settings: Any) -> None:
    assert await _get_metrics("127.0.0.1") == 200
    assert await _get_metrics("10.0.0.7") == 403
    settings.METRICS_ALLOWED_NETWORKS = "10.0.0.0/8"
    assert await _get_metrics("10.0.0.7") == 200
    assert await _get_metrics("127.0.0.1") == 403
    settings.METRICS_BEARER_TOKEN = "scrape-secret"
    assert await _get_metrics("192.0.2.1", [(b"authorization", b"Bearer scrape-secret")]) == 200
    assert await _get_metrics("192.0.2.1", [(b"authorization", b"Bearer wrong")]) == 403
