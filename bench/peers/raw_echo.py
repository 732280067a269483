"""The practical ceiling of Python here: a bare ASGI app answering the echo tools/call.

Run by bench/compare.py under uvicorn in the SDK's virtual environment (stdlib only, so it
runs anywhere). It does what any MCP server must do at the least (read the body, decode the
JSON-RPC request, build a result shaped like the SDK's, encode it) and nothing else: no
checks, no session, no database. ``GET`` opens an idle SSE stream.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    if scope["method"] == "GET":
        await send(
            {"type": "http.response.start", "status": 200,
             "headers": [(b"content-type", b"text/event-stream")]}
        )  # fmt: skip
        await send({"type": "http.response.body", "body": b": open\n\n", "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            await asyncio.sleep(0)
        return
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    request = json.loads(b"".join(chunks))
    text = request["params"]["arguments"]["message"]
    result = {
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"result": text},
        "isError": False,
    }
    body = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()
    await send(
        {"type": "http.response.start", "status": 200,
         "headers": [(b"content-type", b"application/json"),
                     (b"content-length", str(len(body)).encode())]}
    )  # fmt: skip
    await send({"type": "http.response.body", "body": body})
