"""``/healthz``, ``/readyz`` and ``/metrics`` as a plain ASGI app, mounted by mcpsite/asgi.py
before Django.

Outside Django's handler on purpose: probes come from load balancers and kubelets that send
the pod's address as Host (``ALLOWED_HOSTS`` would refuse it) over plain HTTP
(``SECURE_SSL_REDIRECT`` would redirect it), carry no credentials, and should cost no
middleware. The probes disclose only which dependency failed; ``/metrics`` answers only the
networks or the bearer token its settings allow (``ops/metrics.py``).
"""

from __future__ import annotations

from typing import Any

import orjson

from mcp_app.ops import metrics
from mcp_app.ops.health import areadiness

HEADERS = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]


async def _respond(send: Any, status: int, body: dict[str, Any], *, head: bool) -> None:
    payload = orjson.dumps(body)
    headers = [*HEADERS, (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else payload})


async def probe_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answer GET/HEAD ``/healthz`` (200), ``/readyz`` (200 or 503) and ``/metrics``."""
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
    path = scope["path"].rstrip("/")
    if path.endswith("metrics"):
        if not metrics.allowed(scope, dict(scope.get("headers", ()))):
            await _respond(send, 403, {"error": "forbidden"}, head=head)
            return
        status, headers, body = await metrics.metrics_response()
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if head else body})
    elif path.endswith("readyz"):
        readiness = await areadiness()
        await _respond(send, 200 if readiness.ok else 503, readiness.as_json(), head=head)
    else:
        await _respond(send, 200, {"status": "alive"}, head=head)
