"""Raw MCP requests the fault tests send (2025-11-25 sessions and the 2026-07-28 envelope)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.raw_mcp import JSON_HEADERS, sse_messages

MODERN = "2026-07-28"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def modern_headers(method: str, name: str | None = None) -> dict[str, str]:
    headers = {**JSON_HEADERS, "mcp-protocol-version": MODERN, "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = name
    return headers


def session_headers(session_id: str) -> dict[str, str]:
    return {**JSON_HEADERS, "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}


def tool_call(request_id: Any, name: str, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def final_message(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC response of a POST answered as JSON or as an SSE stream."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        async for message in sse_messages(response):
            if "id" in message and "method" not in message:
                return message
        raise AssertionError("the stream ended without a response")
    await response.aread()
    return response.json()
