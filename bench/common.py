"""What the benchmark scripts share: opening a legacy session, summarising latencies."""

from __future__ import annotations

import statistics
from typing import Any

import httpx

JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def initialize_body() -> dict[str, Any]:
    """The body of a 2025-11-25 ``initialize`` from a client that declares nothing."""
    return {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        },
    }


def open_session(url: str) -> str:
    """Initialize a 2025-11-25 session at ``url``; return its Mcp-Session-Id."""
    response = httpx.post(
        url,
        headers=JSON,
        json=initialize_body(),
    )
    response.raise_for_status()
    return response.headers["mcp-session-id"]


def distribution(latencies_ms: list[float]) -> dict[str, float]:
    """p50, p95 and max of ``latencies_ms``, rounded to 0.1 ms."""
    ordered = sorted(latencies_ms)
    return {
        "p50_ms": round(statistics.median(ordered), 1),
        "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1], 1),
        "max_ms": round(ordered[-1], 1),
    }
