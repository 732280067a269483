"""Client traffic for tests of what is done with recorded calls (replays): a ``tools/call``
sent to the project's ASGI application in-process, so the transport, the dispatcher and the
call-log recorder a server runs record it, and the writer thread writes it (tests using it
need committed data, ``transaction=True``, and ``flushed()`` before reading the log)."""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import async_to_sync

from mcp_app.services.calllog.writer import call_log_flush
from tests.support.inprocess import acall, encode_headers

FLUSH_SECONDS = 10.0
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def client_call(
    slug: str, tool: str, arguments: dict[str, Any], client: str = "agent-a"
) -> dict[str, Any]:
    """Call ``tool`` on endpoint ``slug`` as a 2026-07-28 client named ``client``; its result."""
    headers = {
        "host": "127.0.0.1",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": tool,
    }
    meta = {**META, "io.modelcontextprotocol/clientInfo": {"name": client, "version": "1"}}
    params = {"name": tool, "arguments": arguments, "_meta": meta}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    answer = async_to_sync(acall)(
        f"/mcp/{slug}", json.dumps(body).encode(), encode_headers(headers)
    )
    assert answer.status == 200, answer.body
    result: dict[str, Any] = answer.json()["result"]
    return result


def flushed() -> None:
    """Wait (bounded) until this process's call-log records are written."""
    assert call_log_flush(timeout=FLUSH_SECONDS)
