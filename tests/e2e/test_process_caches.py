"""Each web process serves endpoints from memory: pushed changes, and the bound without Redis.

Our choice, not the spec's: a catalog edit made in one process reaches another process's
requests through a Redis push, and when the push cannot arrive (Redis unreachable for the
server) within MCP_CACHE_RECHECK_SECONDS.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mcp_app.models import Tool
from tests.support.catalog import echo_schema, make_endpoint, make_python_tool
from tests.support.live import asgi_server, free_port

pytestmark = pytest.mark.django_db(transaction=True)

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
# How long a test waits for a change to show; far above either bound under test.
WAIT_SECONDS = 15.0


def description_of(client: httpx.Client, url: str) -> str:
    response = client.post(
        url,
        headers={
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/list",
        },
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN_META}},
    )
    assert response.status_code == 200, response.text
    tools: list[dict[str, Any]] = response.json()["result"]["tools"]
    return next(tool["description"] for tool in tools if tool["name"] == "echo")


def edit_until_seen(client: httpx.Client, url: str, tool: Tool) -> None:
    """Edit the tool's description here and wait (bounded) until the server serves it."""
    tool.description = f"Edited at {time.monotonic()}"
    tool.save()
    edited_at = time.monotonic()
    deadline = edited_at + WAIT_SECONDS
    while description_of(client, url) != tool.description:
        assert time.monotonic() < deadline, "the edit never reached the server"
        time.sleep(0.05)


@pytest.fixture
def echo_tool() -> Iterator[Tool]:
    endpoint = make_endpoint("cached")
    tool = make_python_tool("echo", "echo", input_schema=echo_schema())
    endpoint.tools.add(tool)
    yield tool


def test_an_edit_is_pushed_to_another_process_without_waiting_for_the_recheck(echo_tool):
    # A re-check interval far beyond the test's wait: only the push can deliver the edit.
    env = {"MCP_CACHE_RECHECK_SECONDS": "3600"}
    with asgi_server("uvicorn", env) as base, httpx.Client(timeout=10) as client:
        url = f"{base}/mcp/cached"
        before = description_of(client, url)
        for _ in range(3):
            edit_until_seen(client, url, echo_tool)
        assert description_of(client, url) != before


def test_without_redis_an_edit_reaches_another_process_within_the_recheck_interval(echo_tool):
    # The server's Redis is a port nobody listens on: every push to it is lost.
    env = {"MCP_CACHE_RECHECK_SECONDS": "1", "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    with asgi_server("uvicorn", env) as base, httpx.Client(timeout=10) as client:
        url = f"{base}/mcp/cached"
        description_of(client, url)

        # A process that never re-checked would serve the old description forever.
        edit_until_seen(client, url, echo_tool)
