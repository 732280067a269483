"""Drive the project's ASGI application in-process for one HTTP request, as a server would.

Not Channels' HttpCommunicator: it turns ``close_old_connections`` into a no-op, which would
leave the pool threads' connections open. Headers go in as raw byte pairs, so a test can send
what a hostile client sends: a header twice, a NUL in a value, any byte in the body.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mcpsite.asgi import application

RESPONSE_TIMEOUT_SECONDS = 10.0


@dataclass
class Answer:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.decode("latin-1").lower() == name:
                return value.decode("latin-1")
        return None

    def json(self) -> Any:
        """The JSON body, or the data of the first SSE event carrying a response."""
        if self.body.startswith((b"{", b"[")):
            return json.loads(self.body)
        for line in self.body.decode().splitlines():
            if line.startswith("data:") and line[5:].strip():
                message = json.loads(line[5:])
                if "result" in message or "error" in message:
                    return message
        raise AssertionError(f"no JSON-RPC response in {self.body[:500]!r}")


def http_scope(
    path: str,
    headers: Sequence[tuple[bytes, bytes]] = (),
    *,
    method: str = "POST",
    query_string: bytes = b"",
) -> dict[str, Any]:
    """The ASGI scope of one HTTP request from 127.0.0.1, as an ASGI server builds it."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query_string,
        "root_path": "",
        "headers": list(headers),
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
    }


async def acall(
    path: str,
    body: bytes = b"",
    headers: Sequence[tuple[bytes, bytes]] = (),
    *,
    method: str = "POST",
    query_string: bytes = b"",
) -> Answer:
    """Send one request to the application and return its complete answer (bounded wait)."""
    incoming = [{"type": "http.request", "body": body, "more_body": False}]
    done = asyncio.Event()
    answer = Answer(status=0, headers=[], body=b"")

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop()
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = list(message.get("headers", ()))
        else:
            answer.body += message.get("body", b"")
            if not message.get("more_body"):
                done.set()

    async with asyncio.timeout(RESPONSE_TIMEOUT_SECONDS):
        await application(
            http_scope(path, headers, method=method, query_string=query_string), receive, send
        )
        # Legacy requests may finish after the application returns (a detached task).
        await done.wait()
    return answer


def encode_headers(
    headers: dict[str, str] | Sequence[tuple[str, str]],
) -> list[tuple[bytes, bytes]]:
    """Headers as an ASGI server passes them: lower-case names, latin-1 bytes."""
    pairs = headers.items() if isinstance(headers, dict) else headers
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in pairs]
