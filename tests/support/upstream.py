"""A local upstream HTTP server for HTTP-tool tests, on a loopback port in a thread.

Endpoints (GET unless said otherwise; every method is accepted):

* ``/json``: a JSON document; ``/json-list``: a JSON list; ``/text``: text/plain;
  ``/image``: a tiny PNG; ``/binary``: application/octet-stream; ``/empty``: 204;
  ``/bad-json``: invalid JSON labelled application/json
* ``/echo...``: JSON of what was received: method, path, query, headers, body
* ``/status/<code>``: that status with a short text body, echoing the Authorization header
* ``/large?bytes=N``: N bytes of JSON-ish text (with Content-Length);
  ``/large-chunked?bytes=N``: the same without Content-Length
* ``/slow``: answers only once the test releases it (``Upstream.release``) or after 10 s
* ``/redirect?to=URL&status=302``: a redirect; ``/redirect-loop``: redirects to itself
* ``/flaky/<key>?fail=N&status=503``: fails N times per key, then answers 200
* ``/token`` (POST): an OAuth token endpoint for client ``client-1`` / ``client-secret-1``

``Upstream.hits`` counts requests per path (without query), so tests can assert how often a
path was called (retries).
"""

from __future__ import annotations

import base64
import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

# 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
OAUTH_CLIENT_ID = "client-1"
OAUTH_CLIENT_SECRET = "client-secret-1"
SLOW_LIMIT_SECONDS = 10.0


@dataclass
class Upstream:
    """The running server: its base URL, request counts, and the release of ``/slow``."""

    base_url: str
    hits: Counter[str] = field(default_factory=Counter)
    release: threading.Event = field(default_factory=threading.Event)
    tokens_issued: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002  (stdlib name)
        pass  # keep test output clean

    def _handle(self) -> None:
        parts = urlsplit(self.path)
        query = parse_qs(parts.query, keep_blank_values=True)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        upstream = self.server.upstream
        with upstream.lock:
            upstream.hits[parts.path] += 1
            hits = upstream.hits[parts.path]
        path = parts.path
        if path == "/json":
            self._json(200, {"data": {"items": [{"id": 1, "name": "one"}, {"id": 2}]}})
        elif path == "/json-list":
            self._json(200, [1, 2, 3])
        elif path.startswith("/echo"):
            self._json(
                200,
                {
                    "method": self.command,
                    "path": path,
                    "raw_path": self.path,
                    "query": query,
                    "headers": {name.lower(): value for name, value in self.headers.items()},
                    "body": body.decode("utf-8", "replace"),
                },
            )
        elif path.startswith("/status/"):
            code = int(path.rsplit("/", 1)[1])
            auth = self.headers.get("Authorization", "")
            self._send(code, f"upstream failed; you sent {auth!r}".encode(), "text/plain")
        elif path == "/text":
            self._send(200, b"plain words\n", "text/plain; charset=utf-8")
        elif path == "/image":
            self._send(200, PNG, "image/png")
        elif path == "/binary":
            self._send(200, bytes(range(16)), "application/octet-stream")
        elif path == "/empty":
            self._send(204, b"", "")
        elif path == "/bad-json":
            self._send(200, b"{not json", "application/json")
        elif path == "/large":
            size = int(query["bytes"][0])
            self._send(200, b"x" * size, "text/plain")
        elif path == "/large-chunked":
            self._chunked(int(query["bytes"][0]))
        elif path == "/slow":
            upstream.release.wait(SLOW_LIMIT_SECONDS)
            self._json(200, {"slow": True})
        elif path == "/redirect":
            status = int(query.get("status", ["302"])[0])
            self._redirect(status, query["to"][0])
        elif path == "/redirect-loop":
            self._redirect(302, "/redirect-loop")
        elif path.startswith("/flaky/"):
            fail = int(query.get("fail", ["1"])[0])
            status = int(query.get("status", ["503"])[0])
            if hits <= fail:
                self._send(status, b"try again", "text/plain")
            else:
                self._json(200, {"attempt": hits})
        elif path == "/token":
            self._token(body)
        else:
            self._send(404, b"no such path", "text/plain")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _handle

    def do_HEAD(self) -> None:
        self._send(200, b"", "text/plain", head=True)

    def _token(self, body: bytes) -> None:
        expected = base64.b64encode(f"{OAUTH_CLIENT_ID}:{OAUTH_CLIENT_SECRET}".encode()).decode()
        form = parse_qs(body.decode())
        if self.headers.get("Authorization") != f"Basic {expected}":
            self._json(401, {"error": "invalid_client"})
            return
        if form.get("grant_type") != ["client_credentials"]:
            self._json(400, {"error": "unsupported_grant_type"})
            return
        upstream = self.server.upstream
        with upstream.lock:
            upstream.tokens_issued += 1
            number = upstream.tokens_issued
        scope = form.get("scope", [""])[0]
        self._json(
            200,
            {
                "access_token": f"access-{number}-{scope.replace(' ', '+')}",
                "token_type": "Bearer",
                "expires_in": 3600,
            },
        )

    def _json(self, status: int, value: object) -> None:
        self._send(status, json.dumps(value).encode(), "application/json")

    def _send(self, status: int, body: bytes, content_type: str, head: bool = False) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _chunked(self, size: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk = b"y" * 4096
        sent = 0
        while sent < size:
            part = chunk[: size - sent]
            self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            sent += len(part)
        self.wfile.write(b"0\r\n\r\n")

    def _redirect(self, status: int, location: str) -> None:
        self.send_response(status)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    upstream: Upstream


@contextmanager
def run_upstream() -> Iterator[Upstream]:
    """Serve the endpoints on 127.0.0.1 (a free port) until the block ends."""
    server = _Server(("127.0.0.1", 0), _Handler)
    upstream = Upstream(base_url=f"http://127.0.0.1:{server.server_address[1]}")
    server.upstream = upstream
    thread = threading.Thread(target=server.serve_forever, name="upstream", daemon=True)
    thread.start()
    try:
        yield upstream
    finally:
        upstream.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
