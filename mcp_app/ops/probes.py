"""``/healthz`` and ``/readyz`` as a plain ASGI app, mounted by mcpsite/asgi.py before Django.

Outside Django's handler on purpose: probes come from load balancers and kubelets that send
the pod's address as Host (``ALLOWED_HOSTS`` would refuse it) over plain HTTP
(``SECURE_SSL_REDIRECT`` would redirect it), carry no credentials, and should cost no
middleware. They disclose only which dependency failed.
"""

from __future__ import annotations

from typing import Any

import orjson

from mcp_app.ops.health import areadiness

HEADERS = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]


async def _respond(send: Any, status: int, body: dict[str, Any], *, head: bool) -> None:
    payload = orjson.dumps(body)
    headers = [*HEADERS, (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else payload})


async def probe_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answer GET/HEAD ``/healthz`` (always 200) and ``/readyz`` (200 or 503)."""
    method = scope.get("method", "GET")
    if method not in ("GET", "HEAD"):
        await send(
            {
                "type": "http.response.start",
                "status": 405,
                "headers": [(b"allow", b"GET, HEAD"), (b"content-length", b"0")],
            }
        )
        await send({"type": "http.response.body", "body": b""})
        return
    head = method == "HEAD"
    if scope["path"].rstrip("/").endswith("readyz"):
        readiness = await areadiness()
        await _respond(send, 200 if readiness.ok else 503, readiness.as_json(), head=head)
    else:
        await _respond(send, 200, {"status": "alive"}, head=head)
