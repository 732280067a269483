"""The MCP endpoint's entry: Streamable HTTP on ``/mcp/<slug>`` for every protocol revision.

Thin by design (style.md §3). It reads the body while racing the disconnect, checks the HTTP
envelope (Host, Origin, size), finds the endpoint, authenticates, and hands the request to
``routes`` by HTTP method. Any part may decline with ``exchange.Rejected``; this is the one
place a refusal, an outage (503) or a bug (500) becomes a response, and where the call log
learns of it.

It is a plain ASGI application rather than a Channels ``AsyncConsumer``: the request body is
read first, then the handler runs as a task while ``receive()`` is watched for the disconnect
(a blocking ``handle()`` cannot see ``http.disconnect``, django/channels#1249), and no
per-message thread hop is paid (performance-anchors.md, "Channels' per-message thread hop").
"""

from __future__ import annotations

import asyncio
import logging
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from mcp_app.auth import access, bearer
from mcp_app.conf import get_conf, get_site
from mcp_app.protocol import jsonrpc
from mcp_app.protocol.errors import InternalError, McpError
from mcp_app.protocol.jsonrpc import Request
from mcp_app.protocol.results import CallCancelled
from mcp_app.services.calllog.recorder import CallRecorder
from mcp_app.services.deadlines import Deadline, Later
from mcp_app.services.endpoint_directory import aget_endpoint_state
from mcp_app.services.request_ids import bind_request_id
from mcp_app.transport import http, routes
from mcp_app.transport.exchange import Exchange, Rejected
from mcp_app.transport.streams import OUTAGE_RETRY_AFTER_SECONDS, HttpResponder, is_outage

logger = logging.getLogger(__name__)

ALLOW = "GET, POST, DELETE, OPTIONS"
_PREFLIGHT_HEADERS = (
    ("allow", ALLOW),
    ("access-control-allow-methods", ALLOW),
    (
        "access-control-allow-headers",
        "Content-Type, Accept, Authorization, Mcp-Session-Id, "
        "Mcp-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID",
    ),
    ("access-control-max-age", "600"),
)
_EXPOSED_HEADERS = "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate, X-Request-Id"

# Legacy requests keep running after their client disconnects (a disconnect is not a cancel
# before 2026-07-28); hold references so the tasks are not garbage-collected mid-run.
_detached: set[asyncio.Task[None]] = set()


def _public_origin() -> str:
    return _origin_of(get_site().PUBLIC_BASE_URL)


@lru_cache(maxsize=8)
def _origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _allowed_hosts() -> tuple[str, ...]:
    return _hosts(get_site().ALLOWED_HOSTS, get_conf().MCP_ALLOWED_HOSTS)


@lru_cache(maxsize=8)
def _hosts(django_hosts: tuple[str, ...], extra: str) -> tuple[str, ...]:
    return (*django_hosts, *(h.strip() for h in extra.split(",") if h.strip()))


def _request_id_of(body: bytes) -> Any:
    """The id of a request body that decoded, for an error answer after the fact; else None."""
    try:
        message = jsonrpc.decode(body)
    except McpError:
        return None
    return message.id if isinstance(message, Request) else None


_ROUTES = {"POST": routes.serve_post, "GET": routes.serve_get, "DELETE": routes.serve_delete}


class StreamableHttpConsumer:
    """One instance per HTTP request to ``/mcp/<slug>``."""

    @classmethod
    def as_asgi(cls) -> Any:
        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            await cls()(scope, receive, send)

        return app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        # Why the headers are unusable is told in the same pass, and answered in _route.
        headers, self.header_problem = http.read_headers(scope.get("headers", ()))
        # In log lines, the call-log rows and the X-Request-Id response header.
        request_id = bind_request_id(headers)
        responder = HttpResponder(send, [("x-request-id", request_id)])
        # The call log: told what this request does, queued once its work ends (one row per
        # JSON-RPC message, or one for the request when it carried none).
        recorder = CallRecorder(scope, headers, request_id)
        ex = self.ex = Exchange(scope, headers, responder, recorder)
        body = await self._read_body(receive)
        if body is None:
            recorder.submit(responder.status)
            return
        ex.body = body
        # Rows of requests refused before decoding (an outage) still name method and id.
        recorder.request_body(body)
        loop = asyncio.get_running_loop()
        task = ex.task = loop.create_task(self._handle())
        # Ends when the handler does, or when the client disconnects first.
        ended = self.ended = loop.create_future()
        task.add_done_callback(self._end)
        # Most requests are answered before a disconnect watcher would start: one is started
        # only for those still running a tick later (streams, slow tools).
        self.watcher: asyncio.Task[None] | None = None
        watch = Later(0, lambda: self._watch(receive))
        try:
            await ended
        finally:
            watch.cancel()
            if self.watcher is not None:
                self.watcher.cancel()
            if not task.done():
                responder.client_gone = True
                # The response is over even when the work goes on (a legacy call).
                if ex.current_stream is not None:
                    ex.current_stream.close()
                if ex.cancel_on_disconnect:
                    task.cancel()
                else:
                    _detached.add(task)
                    task.add_done_callback(_detached.discard)
            if task.done():
                self._submit(task)
            else:
                task.add_done_callback(self._submit)

    def _submit(self, task: asyncio.Task[None]) -> None:
        # A cancelled task's dispatched calls are recorded as cancelled.
        self.ex.recorder.submit(self.ex.responder.status, cancelled=task.cancelled())

    async def _read_body(self, receive: Any) -> bytes | None:
        """Read the whole request body, or answer 413/408 and return None.

        The size limit holds before a byte is buffered when Content-Length is declared, and
        chunk by chunk otherwise; a client that stops sending mid-body gets 408 instead of
        holding the connection forever.
        """
        conf = get_conf()
        max_body = conf.MCP_MAX_BODY_BYTES
        declared = self.ex.header("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_body:
            await self._refuse(Rejected(413, f"Request body exceeds {max_body} bytes"))
            return None
        try:
            async with Deadline(conf.MCP_BODY_TIMEOUT_SECONDS):
                return await self._body(receive, max_body)
        except TimeoutError:
            await self._refuse(Rejected(408, "The request body did not arrive in time"))
            return None

    async def _body(self, receive: Any, max_body: int) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            if message["type"] != "http.request":
                continue
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > max_body:
                await self._refuse(Rejected(413, f"Request body exceeds {max_body} bytes"))
                return None
            if not message.get("more_body", False):
                return b"".join((*chunks, chunk)) if chunks else chunk
            chunks.append(chunk)

    def _end(self, _done: object = None) -> None:
        if not self.ended.done():
            self.ended.set_result(None)

    def _watch(self, receive: Any) -> None:
        if not self.ended.done():
            self.watcher = asyncio.get_running_loop().create_task(self._wait_disconnect(receive))
            self.watcher.add_done_callback(self._end)

    @staticmethod
    async def _wait_disconnect(receive: Any) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    async def _refuse(self, refused: Rejected) -> None:
        """The one place a refusal becomes a response, and the call log learns of it."""
        self.ex.recorder.refused(refused.error)
        await self.ex.responder.respond_json(refused.status, refused.body(), refused.headers)

    async def _abandon(self) -> None:
        """End a cancelled request's response without answering it."""
        if self.ex.current_stream is not None:
            await self.ex.current_stream.abandon()
        else:
            await self.ex.responder.respond(202)

    async def _handle(self) -> None:
        ex = self.ex
        try:
            await self._route()
        except Rejected as refused:
            await self._refuse(refused)
        except asyncio.CancelledError:
            if ex.cancelled_by_client:
                await self._abandon()
            raise
        except CallCancelled:
            # Cancelled through another process (its background call's row says so).
            ex.recorder.submit(ex.responder.status, cancelled=True)
            await self._abandon()
        except Exception as exc:
            await self._fail(exc)
        finally:
            # A cancelled or failed stream never reaches reply() or finish(): its timers stop
            # and it stops counting as open here, not when the process ends or the garbage
            # collector gets to it.
            if ex.current_stream is not None:
                ex.current_stream.close()
            ex.responder.closed()

    async def _fail(self, exc: Exception) -> None:
        """The top-level boundary: a bug or an unavailable database or Redis, never bad input."""
        if self.ex.responder.started:
            # A stream cannot change its status any more: end it well-formed (a complete
            # chunked body), so the client reconnects instead of waiting on a dead stream.
            logger.warning("MCP stream ended by a failure", exc_info=True)
            await self.ex.responder.finish()
            return
        request_id = _request_id_of(self.ex.body)
        if is_outage(exc):
            logger.warning("MCP request failed: a service is unavailable", exc_info=True)
            refused = Rejected(
                503,
                error=InternalError("Service temporarily unavailable"),
                request_id=request_id,
                headers=[("retry-after", str(OUTAGE_RETRY_AFTER_SECONDS))],
            )
        else:
            logger.exception("MCP request failed", extra={"path": self.ex.scope.get("path")})
            refused = Rejected(500, error=InternalError("Internal error"), request_id=request_id)
        await self._refuse(refused)

    async def _route(self) -> None:
        """Check the envelope, find the endpoint, authenticate, and serve the HTTP method.

        Raises:
            Rejected: bad headers, a Host or Origin not allowed, no such endpoint, no valid
                token, or an HTTP method the endpoint does not serve.
        """
        ex = self.ex
        method = ex.scope["method"]
        problem = self.header_problem
        if problem is not None:
            raise Rejected(400, problem)
        if not http.host_allowed(ex.header("host"), _allowed_hosts()):
            raise Rejected(403, "Host not allowed")
        slug = ex.scope["url_route"]["kwargs"]["slug"]
        state = await aget_endpoint_state(slug)
        ex.recorder.endpoint(state)
        if state is None or not state.enabled:
            raise Rejected(404, f"No MCP endpoint at /mcp/{slug}")
        origin = ex.header("origin")
        if not http.origin_allowed(origin, _public_origin(), state.allowed_origins):
            raise Rejected(403, "Origin not allowed")
        if origin is not None:
            ex.responder.extra_headers += [
                ("access-control-allow-origin", origin),
                ("access-control-expose-headers", _EXPOSED_HEADERS),
                ("vary", "Origin"),
            ]
        if state.auth_mode == "oauth" and method != "OPTIONS":
            # Browsers preflight without credentials; everything else needs the token.
            found = await bearer.authenticate(state, ex.headers, ex.scope["query_string"])
            if isinstance(found, bearer.Challenge):
                raise routes.challenge_refusal(state, found)
            ex.principal = found
            ex.recorder.principal(found.user_id, found.client_id)
            state = access.state_for(state, found)
        if method == "OPTIONS":
            await ex.responder.respond(204, headers=_PREFLIGHT_HEADERS)
            return
        serve = _ROUTES.get(method)
        if serve is None:
            raise Rejected(405, f"Method {method} not allowed", headers=[("allow", ALLOW)])
        await serve(ex, state)
