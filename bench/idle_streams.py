"""Memory per idle SSE stream: open N legacy sessions and their GET streams, read the RSS.

Plain asyncio sockets (a few bytes of state per connection on our side, so 10,000 streams fit
in the client): sessions are opened over a pool of keep-alive connections, then one GET
stream per session, each on its own connection. After the streams settle, the server's RSS is
read, and one ``tools/call`` must still be answered while all of them are open. Everything is
bounded by ``timeout`` seconds; the caller raises RLIMIT_NOFILE beforehand.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from typing import Any

from bench.load import rss_kib

SESSION_WORKERS = 32
SETTLE_SECONDS = 3.0

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench-idle", "version": "0"},
    },
}


def _post(path: str, host: str, headers: dict[str, str], body: dict[str, Any]) -> bytes:
    data = json.dumps(body).encode()
    lines = [f"POST {path} HTTP/1.1", f"host: {host}", f"content-length: {len(data)}"]
    lines += ["content-type: application/json", "accept: application/json, text/event-stream"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response with a Content-Length or chunked body."""
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding") == "chunked":
        parts = []
        while (size := int((await reader.readuntil(b"\r\n")).strip(), 16)) > 0:
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        await reader.readexactly(2)
        body = b"".join(parts)
    else:
        body = b""
    return int(status_line.split()[1]), headers, body


class _Stream(asyncio.Protocol):
    """An SSE GET stream we only hold open: status seen, then every byte dropped."""

    def __init__(self, request: bytes, opened: asyncio.Future[int]) -> None:
        self.request = request
        self.opened = opened
        self.head = b""
        self.streaming = False  # answered 200 with text/event-stream
        self.closed = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        if self.opened.done():
            return
        self.head += data
        if b"\r\n\r\n" in self.head:
            status = int(self.head.split(b" ", 2)[1])
            sse = b"text/event-stream" in self.head.split(b"\r\n\r\n")[0].lower()
            self.streaming = status == 200 and sse
            self.opened.set_result(status if sse else -status)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.opened.done():
            self.opened.set_result(0)


async def _open_sessions(
    port: int, path: str, host: str, count: int, auth: dict[str, str]
) -> list[str]:
    ids: list[str] = []
    request = _post(path, host, auth, INITIALIZE)
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}

    async def worker(quota: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for _ in range(quota):
                writer.write(request)
                status, headers, _ = await _read_response(reader)
                if status != 200 or "mcp-session-id" not in headers:
                    raise RuntimeError(f"initialize answered {status}")
                session = headers["mcp-session-id"]
                version = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
                writer.write(_post(path, host, {**auth, **version}, initialized))
                await _read_response(reader)
                ids.append(session)
        finally:
            writer.close()

    share, rest = divmod(count, SESSION_WORKERS)
    await asyncio.gather(*(worker(share + (i < rest)) for i in range(SESSION_WORKERS)))
    return ids


async def _call_echo(port: int, path: str, host: str, auth: dict[str, str]) -> float:
    """One 2026-07-28 echo call on a fresh connection; its latency in ms."""
    headers = {**auth, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call"}
    headers["mcp-name"] = "echo"
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            "name": "echo",
            "arguments": {"message": "hello world"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    began = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(_post(path, host, headers, body))
        status, _, answer = await _read_response(reader)
    finally:
        writer.close()
    if status != 200 or b"hello world" not in answer:
        raise RuntimeError(f"tools/call answered {status}: {answer[:200]!r}")
    return (time.perf_counter() - began) * 1000


async def measure(
    *,
    port: int,
    path: str,
    server_pid: int,
    count: int,
    auth: dict[str, str],
    timeout: float,
    opening: int = 50,
) -> dict[str, Any]:
    """Open ``count`` sessions + idle GET streams; RSS before and after, and a call meanwhile."""
    host = f"127.0.0.1:{port}"
    loop = asyncio.get_running_loop()
    streams: list[_Stream] = []
    async with asyncio.timeout(timeout):
        for _ in range(20):  # warm-up: imports, connections, caches
            await _call_echo(port, path, host, auth)
        rss_start = rss_kib(server_pid)
        began = time.monotonic()
        sessions = await _open_sessions(port, path, host, count, auth)
        sessions_seconds = time.monotonic() - began
        rss_sessions = rss_kib(server_pid)
        gate = asyncio.Semaphore(opening)

        async def open_stream(session: str) -> int:
            headers = [f"GET {path} HTTP/1.1", f"host: {host}", "accept: text/event-stream"]
            headers += [f"mcp-session-id: {session}", "mcp-protocol-version: 2025-11-25"]
            headers += [f"{k}: {v}" for k, v in auth.items()]
            request = ("\r\n".join(headers) + "\r\n\r\n").encode()
            async with gate:
                opened: asyncio.Future[int] = loop.create_future()
                _, protocol = await loop.create_connection(
                    lambda: _Stream(request, opened), "127.0.0.1", port
                )
                streams.append(protocol)
                return await opened

        began = time.monotonic()
        statuses = await asyncio.gather(*(open_stream(s) for s in sessions))
        streams_seconds = time.monotonic() - began
        opened = sum(1 for status in statuses if status == 200)
        # 0: the connection closed first; negative: an answer that is not an SSE stream.
        refused = dict(Counter(status for status in statuses if status != 200))
        await asyncio.sleep(SETTLE_SECONDS)
        rss_streams = rss_kib(server_pid)
        call_ms = await _call_echo(port, path, host, auth)
        still_open = sum(1 for stream in streams if stream.streaming and not stream.closed)
    for stream in streams:
        if stream.transport is not None:
            stream.transport.close()
    return {
        "streams": count,
        "opening_at_once": opening,
        "opened": opened,
        "still_open": still_open,
        "rss_start_kib": rss_start,
        "rss_sessions_kib": rss_sessions,
        "rss_streams_kib": rss_streams,
        "refused": {str(status): n for status, n in refused.items()},
        "kib_per_stream": round((rss_streams - rss_start) / max(opened, 1), 2),
        "kib_per_session": round((rss_sessions - rss_start) / count, 2),
        "sessions_seconds": round(sessions_seconds, 1),
        "streams_seconds": round(streams_seconds, 1),
        "call_ms_while_open": round(call_ms, 1),
    }
