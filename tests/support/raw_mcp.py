"""Raw MCP over HTTP for tests that check the wire itself (headers, SSE frames, ids)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

JSON_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


async def open_session(
    client: httpx.AsyncClient,
    url: str,
    *,
    version: str = "2025-11-25",
    capabilities: Mapping[str, Any] | None = None,
) -> str:
    """Initialize a legacy session; return its Mcp-Session-Id."""
    response = await client.post(
        url,
        headers=JSON_HEADERS,
        json={
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": version,
                "capabilities": dict(capabilities or {}),
                "clientInfo": {"name": "raw-test", "version": "1"},
            },
        },
    )
    assert response.status_code == 200, response.text
    return response.headers["mcp-session-id"]


async def sse_events(response: httpx.Response) -> AsyncIterator[dict[str, str]]:
    """Yield each SSE event of ``response`` as its fields ({"id", "retry", "data", ...})."""
    event: dict[str, str] = {}
    async for line in response.aiter_lines():
        if not line:
            if event:
                yield event
            event = {}
        elif not line.startswith(":"):
            field, _, value = line.partition(":")
            event[field] = value.removeprefix(" ")


async def sse_messages(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """Yield the JSON-RPC messages of ``response``'s SSE events (priming events skipped)."""
    async for event in sse_events(response):
        if event.get("data"):
            yield json.loads(event["data"])
