"""The official ``mcp`` SDK server serving the same echo tool, for bench/compare.py.

Runs in its own virtual environment (``.cache/bench/venv-sdk``) under uvicorn:

    BENCH_SDK_MODE=stateful  uvicorn bench.peers.sdk_server:app ...   # sessions, SSE answers
    BENCH_SDK_MODE=stateless uvicorn bench.peers.sdk_server:app ...   # no session, JSON answers

The stateless process also answers 2026-07-28 requests (the SDK handles the per-request
envelope in the ASGI task whatever the mode), so the "SDK 2026" figures come from it.
``max_sessions`` is lifted: the session-open scenario opens tens of thousands, and a cap
would turn the figure into a count of 503s.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

# WARNING: its default (INFO) logs a line per session, which ours does not.
mcp = MCPServer("echo-server", log_level="WARNING")


@mcp.tool()
async def echo(message: str) -> str:
    """Return the given message unchanged."""
    # async: the SDK runs a sync tool through a worker-thread hop, which ours does not pay.
    return message


_stateless = os.environ.get("BENCH_SDK_MODE", "stateful") == "stateless"
app = mcp.streamable_http_app(
    json_response=_stateless, stateless_http=_stateless, max_sessions=None
)
