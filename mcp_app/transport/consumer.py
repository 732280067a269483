"""The MCP endpoint: Streamable HTTP on ``/mcp/<slug>`` for every protocol revision.

Thin by design (style.md §3): check the HTTP envelope (Host, Origin, media types, size), find
the endpoint, decode JSON-RPC, pick the era (``protocol.inbound``), load or open the legacy
session (``services.sessions``), and hand the message to ``protocol.dispatch``. The answer is
JSON unless the request emits a notification first, then SSE (``streams.RequestStream``).

It is a plain ASGI application rather than a Channels ``AsyncConsumer``: the request body is
read first, then the handler runs as a task while ``receive()`` is watched for the disconnect
(a blocking ``handle()`` cannot see ``http.disconnect``, django/channels#1249), and no
per-message thread hop is paid (performance-anchors.md, "Channels' per-message thread hop").
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from mcp_app.auth import access, bearer
from mcp_app.conf import get_conf
from mcp_app.protocol import dispatch, inbound, jsonrpc, sse
from mcp_app.protocol.context import LegacySession, RequestContext
from mcp_app.protocol.errors import (
    InternalError,
    InvalidRequest,
    McpError,
    modern_http_status,
)
from mcp_app.protocol.handlers import lifecycle, subscriptions
from mcp_app.protocol.jsonrpc import Notification, Request, Response
from mcp_app.protocol.results import CallCancelled, ServiceUnavailable
from mcp_app.protocol.versions import LEGACY_VERSIONS, MODERN_VERSIONS, Feature, supports
from mcp_app.services import audit, background, events, notify
from mcp_app.services.catalog import EndpointState, aget_endpoint_state
from mcp_app.services.deadlines import Deadline, Later
from mcp_app.services.request_ids import bind_request_id
from mcp_app.services.runner import CatalogResourceReader, CatalogToolRunner
from mcp_app.services.sessions import (
    DatabaseSessionStore,
    asession_close,
    asession_is_live,
    asession_load,
    asession_open,
    asession_subscriptions,
)
from mcp_app.services.tasks import CatalogTaskStore
from mcp_app.transport import http
from mcp_app.transport.http import first
from mcp_app.transport.streams import (
    OUTAGE_RETRY_AFTER_SECONDS,
    GroupListener,
    HttpResponder,
    RequestStream,
    Resumable,
    StreamClientRequester,
    is_outage,
    is_response,
)

logger = logging.getLogger(__name__)

SERVER_NAME = "mcphost"
SERVER_VERSION = "0.1.0"
ALLOW = "GET, POST, DELETE, OPTIONS"
SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
# How often a standalone GET stream re-checks that its session is still alive.
SESSION_RECHECK_SECONDS = 60.0

_tool_runner = CatalogToolRunner()
_resource_reader = CatalogResourceReader()
_session_store = DatabaseSessionStore()
# Legacy requests keep running after their client disconnects (a disconnect is not a cancel
# before 2026-07-28); hold references so the tasks are not garbage-collected mid-run.
_detached: set[asyncio.Task[None]] = set()
# Legacy requests running in this process, by (session id, JSON-encoded request id), so
# notifications/cancelled can stop them.
_in_flight: dict[tuple[str, bytes], StreamableHttpConsumer] = {}


@lru_cache(maxsize=8)
def _derived_key(secret_key: str, purpose: str) -> bytes:
    """A key for one purpose (cursors, request state), derived from SECRET_KEY."""
    return hmac.new(
        secret_key.encode(), f"mcphost.protocol.{purpose}".encode(), hashlib.sha256
    ).digest()


def _public_origin() -> str:
    return _origin_of(str(settings.PUBLIC_BASE_URL))


@lru_cache(maxsize=8)
def _origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _allowed_hosts() -> tuple[str, ...]:
    return _hosts(tuple(settings.ALLOWED_HOSTS), get_conf().MCP_ALLOWED_HOSTS)


@lru_cache(maxsize=8)
def _hosts(django_hosts: tuple[str, ...], extra: str) -> tuple[str, ...]:
    return (*django_hosts, *(h.strip() for h in extra.split(",") if h.strip()))


def _server_info(state: EndpointState) -> dict[str, str]:
    """The ``Implementation`` this endpoint presents; shaped per revision by the protocol."""
    endpoint = state.snapshot.endpoint
    return {
        "name": SERVER_NAME,
        "title": endpoint.title or endpoint.slug,
        "version": SERVER_VERSION,
    }


def _error_body(request_id: Any, error: McpError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_error_object()}


def _request_id_of(body: bytes) -> Any:
    """The id of a request body that decoded, for an error answer after the fact; else None."""
    try:
        message = jsonrpc.decode(body)
    except McpError:
        return None
    return message.id if isinstance(message, Request) else None


class StreamableHttpConsumer:
    """One instance per HTTP request to ``/mcp/<slug>``."""

    @classmethod
    def as_asgi(cls) -> Any:
        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            await cls()(scope, receive, send)

        return app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.scope = scope
        self.headers: dict[str, list[str]] = http.parse_headers(scope.get("headers", ()))
        # The call log: told what this request does, queued once its work ends (one row per
        # JSON-RPC message, or one for the request when it carried none).
        # In log lines, the call-log rows and the X-Request-Id response header.
        request_id = bind_request_id(self.headers)
        self.audit = audit.CallRecorder(scope, self.headers)
        self.responder = HttpResponder(self.audit.watch(send), [("x-request-id", request_id)])
        self.cancel_on_disconnect = False
        # Set when the client cancelled this request (notifications/cancelled).
        self.cancelled_by_client = False
        self.current_stream: RequestStream | None = None
        body = await self._read_body(receive)
        if body is None:
            self.audit.submit()
            return
        self.body = body
        # Rows of requests refused before decoding (an outage) still name method and id.
        self.audit.request_body(body)
        loop = asyncio.get_running_loop()
        task = self.task = loop.create_task(self._handle())
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
                self.responder.client_gone = True
                if self.cancel_on_disconnect:
                    task.cancel()
                else:
                    _detached.add(task)
                    task.add_done_callback(_detached.discard)
            if task.done():
                self.audit.submit(cancelled=task.cancelled())
            else:
                task.add_done_callback(self.audit.submit_after)

    async def _read_body(self, receive: Any) -> bytes | None:
        """Read the whole request body, or answer 413/408 and return None.

        The size limit holds before a byte is buffered when Content-Length is declared, and
        chunk by chunk otherwise; a client that stops sending mid-body gets 408 instead of
        holding the connection forever.
        """
        conf = get_conf()
        max_body = conf.MCP_MAX_BODY_BYTES
        declared = first(self.headers, "content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_body:
            await self._reject(413, f"Request body exceeds {max_body} bytes")
            return None
        chunks: list[bytes] = []
        size = 0
        try:
            async with Deadline(conf.MCP_BODY_TIMEOUT_SECONDS):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return None
                    if message["type"] != "http.request":
                        continue
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > max_body:
                        await self._reject(413, f"Request body exceeds {max_body} bytes")
                        return None
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            await self._reject(408, "The request body did not arrive in time")
            return None

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

    def cancel_by_client(self) -> None:
        """Stop this request's work; its stream ends without a response (legacy cancel)."""
        self.cancelled_by_client = True
        self.task.cancel()

    async def _abandon(self) -> None:
        """End a cancelled request's response without answering it."""
        if self.current_stream is not None:
            await self.current_stream.abandon()
        else:
            await self.responder.respond(202)

    async def _reject(
        self,
        status: int,
        message: str,
        *,
        request_id: Any = None,
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Answer an HTTP-level failure with a JSON-RPC error body (no id when unknown)."""
        await self.responder.respond_json(
            status, _error_body(request_id, InvalidRequest(message)), headers
        )

    async def _handle(self) -> None:
        try:
            await self._handle_route()
        finally:
            # A cancelled stream never reaches finish(): it stops counting as open here, not
            # whenever the garbage collector gets to it.
            self.responder.closed()

    async def _handle_route(self) -> None:
        try:
            await self._route()
        except asyncio.CancelledError:
            if self.cancelled_by_client:
                await self._abandon()
            raise
        except CallCancelled:
            # Cancelled through another process (its background call's row says so).
            self.audit.submit(cancelled=True)
            await self._abandon()
        except Exception as exc:
            # The top-level boundary: a bug or an unavailable database or Redis, never bad input.
            if self.responder.started:
                # A stream cannot change its status any more: end it well-formed (a complete
                # chunked body), so the client reconnects instead of waiting on a dead stream.
                logger.warning("MCP stream ended by a failure", exc_info=True)
                await self.responder.finish()
                return
            request_id = _request_id_of(self.body)
            if is_outage(exc):
                logger.warning("MCP request failed: a service is unavailable", exc_info=True)
                await self.responder.respond_json(
                    503,
                    _error_body(request_id, InternalError("Service temporarily unavailable")),
                    headers=[("retry-after", str(OUTAGE_RETRY_AFTER_SECONDS))],
                )
                return
            logger.exception("MCP request failed", extra={"path": self.scope.get("path")})
            await self.responder.respond_json(
                500, _error_body(request_id, InternalError("Internal error"))
            )

    async def _route(self) -> None:
        method = self.scope["method"]
        problem = http.header_problem(self.headers)
        if problem is not None:
            await self._reject(400, problem)
            return
        if not http.host_allowed(first(self.headers, "host"), _allowed_hosts()):
            await self._reject(403, "Host not allowed")
            return
        slug = self.scope["url_route"]["kwargs"]["slug"]
        state = await aget_endpoint_state(slug)
        self.audit.endpoint(state)
        if state is None or not state.enabled:
            await self._reject(404, f"No MCP endpoint at /mcp/{slug}")
            return
        origin = first(self.headers, "origin")
        if not http.origin_allowed(origin, _public_origin(), state.allowed_origins):
            await self._reject(403, "Origin not allowed")
            return
        if origin is not None:
            self.responder.extra_headers += [
                ("access-control-allow-origin", origin),
                (
                    "access-control-expose-headers",
                    "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate, X-Request-Id",
                ),
                ("vary", "Origin"),
            ]
        self.principal = bearer.ANONYMOUS
        if state.auth_mode == "oauth" and method != "OPTIONS":
            # Browsers preflight without credentials; everything else needs the token.
            found = await bearer.authenticate(state, self.headers, self.scope["query_string"])
            if isinstance(found, bearer.Challenge):
                await self._challenge(state, found)
                return
            self.principal = found
            self.audit.principal(found.user_id, found.client_id)
            state = access.state_for(state, found)
        if method == "POST":
            await self._post(state)
        elif method == "GET":
            await self._get(state)
        elif method == "DELETE":
            await self._delete(state)
        elif method == "OPTIONS":
            await self.responder.respond(
                204,
                headers=[
                    ("allow", ALLOW),
                    ("access-control-allow-methods", ALLOW),
                    (
                        "access-control-allow-headers",
                        "Content-Type, Accept, Authorization, Mcp-Session-Id, "
                        "Mcp-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID",
                    ),
                    ("access-control-max-age", "600"),
                ],
            )
        else:
            await self._reject(405, f"Method {method} not allowed", headers=[("allow", ALLOW)])

    async def _challenge(
        self, state: EndpointState, challenge: bearer.Challenge, request_id: Any = None
    ) -> None:
        """Refuse with the status and WWW-Authenticate header of an OAuth challenge."""
        await self._reject(
            challenge.status,
            challenge.description or "Authorization required",
            request_id=request_id,
            headers=[("www-authenticate", challenge.header(state.slug))],
        )

    async def _scope_refused(self, state: EndpointState, request: Request) -> bool:
        """Answer 403 ``insufficient_scope`` when the token lacks the scope the item needs.

        Sent before any body, so a client can step up and retry (2025-11-25
        basic/authorization, "Scope Challenge Handling").
        """
        needed = access.missing_scope(state, request.method, request.params, self.principal)
        if needed is None:
            return False
        challenge = bearer.Challenge(
            403,
            "insufficient_scope",
            f"This needs the {needed} scope",
            bearer.step_up_scope(state, self.principal.scopes, needed),
        )
        await self._challenge(state, challenge, request_id=request.id)
        return True

    # -- POST ---------------------------------------------------------------------------------

    async def _post(self, state: EndpointState) -> None:
        if not http.is_json_content(self.headers):
            await self._reject(415, "Content-Type must be application/json")
            return
        if not http.accepts(self.headers, "application/json"):
            await self._reject(406, "Accept must include application/json")
            return
        try:
            payload = jsonrpc.decode(self.body, max_batch=get_conf().MCP_MAX_BATCH_MESSAGES)
        except McpError as exc:
            await self.responder.respond_json(
                400, _error_body(getattr(exc, "request_id", None), exc)
            )
            return
        header_version = first(self.headers, VERSION_HEADER)
        if isinstance(payload, list):
            self.audit.received(payload, modern=False)
            await self._post_batch(state, payload)
            return
        route = inbound.classify(payload, header_version)
        self.audit.received([payload], modern=route is inbound.Route.MODERN)
        if route is inbound.Route.MODERN:
            await self._post_modern(state, payload)
        elif route is inbound.Route.INITIALIZE:
            await self._post_initialize(state, payload)
        else:
            await self._post_legacy(state, payload)

    def _stream(
        self, session: LegacySession | None = None, request_id: Any = None
    ) -> RequestStream:
        """The answer stream of one request; resumable for 2025-11-25 sessions."""
        conf = get_conf()
        resumable = None
        if session is not None and supports(session.protocol_version, Feature.SSE_PRIMING):
            resumable = Resumable(
                stream_id=events.new_stream_id(),
                session_id=session.id,
                store=events.get_event_store(),
                retry_ms=conf.MCP_SSE_RETRY_MS,
                poll_after=conf.MCP_SSE_POLL_AFTER_SECONDS,
                request_id=request_id,
            )
        return RequestStream(
            self.responder,
            can_stream=http.accepts(self.headers, "text/event-stream"),
            keepalive_seconds=conf.MCP_SSE_KEEPALIVE_SECONDS,
            resumable=resumable,
            prefer_stream=http.prefers(self.headers, "text/event-stream", over="application/json"),
        )

    def _context(
        self,
        state: EndpointState,
        *,
        version: str,
        request: Request | None,
        stream: RequestStream | None,
        client_capabilities: Mapping[str, Any],
        client_info: Mapping[str, Any] | None,
        log_level: str | None,
        session: LegacySession | None = None,
    ) -> RequestContext:
        return RequestContext(
            version=version,
            catalog=state.snapshot,
            tools=_tool_runner,
            resources=_resource_reader,
            server_info=_server_info(state),
            client_capabilities=client_capabilities,
            client_info=client_info,
            request_id=request.id if request is not None else None,
            progress_token=inbound.progress_token_of(request.params) if request else None,
            log_level=log_level,
            session=session,
            sessions=_session_store if session is not None else None,
            send=stream.notify if stream is not None and stream.can_stream else None,
            cursor_secret=_derived_key(settings.SECRET_KEY, "cursor"),
            page_size=get_conf().MCP_PAGE_SIZE,
            client_requests=(
                StreamClientRequester(
                    stream, session.id, get_conf().MCP_CLIENT_REQUEST_TIMEOUT_SECONDS
                )
                if session is not None and stream is not None
                else None
            ),
            state_secret=_derived_key(settings.SECRET_KEY, "request-state"),
            principal=self.principal.key,
            tasks=CatalogTaskStore(state.id),
        )

    async def _run(
        self, ctx: RequestContext, request: Request
    ) -> tuple[dict[str, Any], McpError | None]:
        """Dispatch one request; return the response body and the error, if any."""
        self.audit.dispatched(request, ctx.version)
        body, error = await self._dispatch(ctx, request)
        self.audit.answered(request, body, error, outcome=ctx.outcome, detail=ctx.call_detail)
        return body, error

    async def _dispatch(
        self, ctx: RequestContext, request: Request
    ) -> tuple[dict[str, Any], McpError | None]:
        try:
            result = await dispatch.handle_request(ctx, request.method, request.params)
        except McpError as exc:
            return _error_body(request.id, exc), exc
        except (CallCancelled, ServiceUnavailable):
            raise  # no answer, or the outage's 503 (_handle)
        except Exception:
            logger.exception("MCP handler failed", extra={"method": request.method})
            internal = InternalError("Internal error")
            return _error_body(request.id, internal), internal
        return {"jsonrpc": "2.0", "id": request.id, "result": result}, None

    async def _post_modern(self, state: EndpointState, message: Any) -> None:
        if isinstance(message, Response):
            await self._reject(400, "Clients must not send responses in protocol 2026-07-28")
            return
        if isinstance(message, Notification):
            try:
                inbound.check_modern_notification(message, self.headers)
            except McpError as exc:
                await self.responder.respond_json(
                    modern_http_status(exc.code), _error_body(None, exc)
                )
                return
            await self.responder.respond(202)
            return
        try:
            envelope = inbound.check_modern_request(message, self.headers, state.snapshot)
        except McpError as exc:
            await self.responder.respond_json(
                modern_http_status(exc.code), _error_body(message.id, exc)
            )
            return
        if await self._scope_refused(state, message):
            return
        if message.method == "subscriptions/listen":
            await self._listen(state, message)
            return
        # 2026-07-28: closing the response stream is how a client cancels the request.
        self.cancel_on_disconnect = True
        stream = self.current_stream = self._stream()
        ctx = self._context(
            state,
            version=envelope.version,
            request=message,
            stream=stream,
            client_capabilities=envelope.client_capabilities,
            client_info=envelope.client_info,
            log_level=envelope.log_level,
        )
        body, error = await self._run(ctx, message)
        await stream.reply(modern_http_status(error.code) if error else 200, body)

    async def _post_initialize(self, state: EndpointState, message: Any) -> None:
        if not isinstance(message, Request):
            await self._reject(400, "initialize must be a request with an id")
            return
        session_id = first(self.headers, SESSION_HEADER)
        if session_id is not None:
            if await asession_is_live(
                session_id=session_id, endpoint_id=state.id, **self._session_owner()
            ):
                await self._reject(400, "Session already initialized", request_id=message.id)
            else:
                await self._reject(404, "Session not found", request_id=message.id)
            return
        try:
            version, capabilities, client_info = lifecycle.parse_initialize(message.params)
        except McpError as exc:
            await self.responder.respond_json(400, _error_body(message.id, exc))
            return
        session = await asession_open(
            endpoint_id=state.id,
            protocol_version=version,
            client_capabilities=capabilities,
            client_info=client_info,
            **self._session_owner(),
        )
        self.audit.session(session)
        result = lifecycle.initialize_result(
            version,
            state.snapshot,
            _server_info(state),
        )
        await self.responder.respond_json(
            200,
            {"jsonrpc": "2.0", "id": message.id, "result": result},
            headers=[("mcp-session-id", session.id)],
        )

    def _session_owner(self) -> dict[str, Any]:
        """Who a legacy session belongs to: another user or client gets 404 for it."""
        return {"user_id": self.principal.user_id, "oauth_client_id": self.principal.client_id}

    async def _load_session(self, state: EndpointState, request_id: Any) -> LegacySession | None:
        """Load the request's legacy session, answering 400/404 when there is none."""
        session_id = first(self.headers, SESSION_HEADER)
        if not session_id:
            await self._reject(400, "Missing Mcp-Session-Id header", request_id=request_id)
            return None
        session = await asession_load(
            session_id=session_id, endpoint_id=state.id, **self._session_owner()
        )
        if session is None:
            await self._reject(404, "Session not found", request_id=request_id)
        else:
            self.audit.session(session)
        return session

    async def _post_legacy(self, state: EndpointState, message: Any) -> None:
        request_id = message.id if isinstance(message, Request) else None
        session = await self._load_session(state, request_id)
        if session is None:
            return
        if isinstance(message, Request) and await self._scope_refused(state, message):
            return
        if isinstance(message, Request):
            stream = self.current_stream = self._stream(session, message.id)
            stream.start_poll_timer()
            ctx = self._legacy_context(state, session, message, stream)
            key = (session.id, jsonrpc.encode(message.id))
            _in_flight[key] = self
            try:
                body, _error = await self._run(ctx, message)
            finally:
                if _in_flight.get(key) is self:
                    del _in_flight[key]
            await stream.reply(200, body)
        elif isinstance(message, Notification):
            if message.method == "notifications/cancelled":
                await self._cancel(session, message.params)
            ctx = self._legacy_context(state, session, None, None)
            await dispatch.handle_notification(ctx, message.method, message.params)
            await self.responder.respond(202)
        else:
            # A client's answer to a question a call of this session asked, possibly from
            # another process: route it to the waiting call by session and id.
            await notify.apublish_client_reply(
                session_id=session.id,
                request_id=message.id,
                result=message.result,
                error=message.error,
            )
            await self.responder.respond(202)

    @staticmethod
    async def _cancel(session: LegacySession, params: Mapping[str, Any] | None) -> None:
        """Cancel the session's request ``params.requestId``, wherever it runs.

        A request in this process is stopped here; a background call is cancelled through
        its row, which reaches its worker and the process following it. An inline call held
        by another process is not reached (documented in docs/architecture.md). Unknown or
        finished ids are ignored (2025-11-25 basic/utilities/cancellation).
        """
        if not isinstance(params, Mapping) or "requestId" not in params:
            return
        request_id = params["requestId"]
        if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
            return
        held = _in_flight.get((session.id, jsonrpc.encode(request_id)))
        if held is not None:
            held.cancel_by_client()
            return
        await background.acancel_request(session_id=session.id, request_id=request_id)

    def _legacy_context(
        self,
        state: EndpointState,
        session: LegacySession,
        request: Request | None,
        stream: RequestStream | None,
    ) -> RequestContext:
        return self._context(
            state,
            version=session.protocol_version,
            request=request,
            stream=stream,
            client_capabilities=session.client_capabilities,
            client_info=session.client_info,
            log_level=session.log_level,
            session=session,
        )

    async def _post_batch(self, state: EndpointState, messages: list[Any]) -> None:
        """JSON-RPC batches: only sessions that negotiated 2025-03-26 may send them.

        Their size is bounded when decoded (MCP_MAX_BATCH_MESSAGES). Calls of background tools
        past MCP_MAX_BATCH_BACKGROUND_CALLS are answered with an error and not run: a batch
        runs in order, and each such call holds a worker for as long as the tool takes, even
        after the client has gone.
        """
        session = await self._load_session(state, None)
        if session is None:
            return
        if not supports(session.protocol_version, Feature.BATCHES):
            await self._reject(400, f"Batches are not part of protocol {session.protocol_version}")
            return
        for message in messages:
            # One status for the whole batch: refused before any of it runs.
            if isinstance(message, Request) and await self._scope_refused(state, message):
                return
        replies: list[dict[str, Any]] = []
        background_left = get_conf().MCP_MAX_BATCH_BACKGROUND_CALLS
        for message in messages:
            if isinstance(message, Request):
                refusal = None
                name = (message.params or {}).get("name")
                tool = state.snapshot.tool(name) if isinstance(name, str) else None
                if inbound.classify(message, None) is not inbound.Route.LEGACY:
                    refusal = InvalidRequest("initialize cannot be batched")
                elif message.method == "tools/call" and tool and tool.execution == "background":
                    background_left -= 1
                    if background_left < 0:
                        refusal = InvalidRequest(
                            "A batch may start at most "
                            f"{get_conf().MCP_MAX_BATCH_BACKGROUND_CALLS} background tool "
                            "call(s); send this call in a request of its own"
                        )
                if refusal is not None:
                    body = _error_body(message.id, refusal)
                    self.audit.answered(message, body, refusal)
                    replies.append(body)
                    continue
                ctx = self._legacy_context(state, session, message, None)
                body, _error = await self._run(ctx, message)
                replies.append(body)
            elif isinstance(message, Notification):
                ctx = self._legacy_context(state, session, None, None)
                await dispatch.handle_notification(ctx, message.method, message.params)
        if replies:
            await self.responder.respond_json(200, replies)
        else:
            await self.responder.respond(202)

    # -- GET and DELETE -----------------------------------------------------------------------

    def _wait_seconds(self, keepalive: float) -> float:
        """How long a stream may wait for its next event: a keep-alive, or the token's end."""
        left = self.principal.seconds_left()
        return keepalive if left is None else max(0.0, min(keepalive, left))

    def _token_expired(self) -> bool:
        """Whether this stream's access token has expired: long-lived streams end then."""
        left = self.principal.seconds_left()
        return left is not None and left <= 0

    async def _reject_non_legacy_version(self, method: str) -> bool:
        """GET and DELETE exist only in the legacy era: 405 for 2026-07-28, 400 for nonsense."""
        version = first(self.headers, VERSION_HEADER)
        if version is None or version in LEGACY_VERSIONS:
            return False
        if version in MODERN_VERSIONS:
            await self._reject(
                405, f"{method} is not part of protocol {version}", headers=[("allow", "POST")]
            )
        else:
            await self._reject(400, f"Unsupported MCP-Protocol-Version: {version}")
        return True

    async def _get(self, state: EndpointState) -> None:
        if await self._reject_non_legacy_version("GET"):
            return
        if not http.accepts(self.headers, "text/event-stream"):
            await self._reject(406, "Accept must include text/event-stream")
            return
        session = await self._load_session(state, None)
        if session is None:
            return
        last_event_id = first(self.headers, "last-event-id")
        if last_event_id is not None:
            await self._resume(session, last_event_id)
            return
        # The standalone stream: server-initiated messages for this session travel here.
        # It ends when the client disconnects or the session is closed or expires.
        self.cancel_on_disconnect = True
        keepalive = get_conf().MCP_SSE_KEEPALIVE_SECONDS
        since_check = 0.0
        token = secrets.token_urlsafe(12)
        groups = (notify.endpoint_group(state.id), notify.session_group(session.id))
        async with GroupListener(*groups) as events:
            await notify.apublish_session_stream_opened(session_id=session.id, stream_token=token)
            # Joined before the headers go out: a client that sees the stream open misses
            # no change made after that.
            await self.responder.start_stream(200)
            while not self.responder.client_gone:
                try:
                    event = await events.next(self._wait_seconds(keepalive))
                except Exception:
                    logger.warning("Channel layer lost; ending the GET stream", exc_info=True)
                    break  # the client reconnects
                if self._token_expired():
                    break  # the client reconnects with a refreshed token
                if event is None:
                    since_check += keepalive
                    if since_check >= SESSION_RECHECK_SECONDS:
                        since_check = 0.0
                        if not await asession_is_live(
                            session_id=session.id, endpoint_id=state.id, **self._session_owner()
                        ):
                            break
                    await self.responder.write(sse.keepalive())
                    continue
                if event["type"] == notify.SESSION_CLOSED or (
                    event["type"] == notify.SESSION_STREAM_OPENED and event["token"] != token
                ):
                    break  # the session ended, or a newer GET stream took over
                if event["type"] == notify.SESSION_STREAM_OPENED:
                    continue
                if event["type"] == notify.RESOURCE_UPDATED:
                    # Subscriptions change during the stream's life: read the current ones.
                    subscribed = await asession_subscriptions(
                        session_id=session.id, endpoint_id=state.id
                    )
                    if subscribed is None:
                        break
                    frames = subscriptions.resource_updated_notifications(event["uri"], subscribed)
                else:
                    frames = subscriptions.list_changed_notifications(event["kinds"])
                for frame in frames:
                    await self.responder.write(sse.encode_event(jsonrpc.encode(frame)))
        await self.responder.finish()

    async def _resume(self, session: LegacySession, last_event_id: str) -> None:
        """Replay a request stream's events after ``last_event_id``, then follow it live.

        Only the session's own streams resume, and only the events of the stream the id
        belongs to (2025-11-25 basic/transports, "Resumability and Redelivery"); the stream
        ends with the request's response.
        """
        parsed = events.parse_event_id(last_event_id)
        if parsed is None:
            await self._reject(400, "Last-Event-ID is not an event id of this server")
            return
        stream_id, seq = parsed
        store = events.get_event_store()
        if await store.owner(stream_id) != session.id:
            await self._reject(404, "No stream of this session has that Last-Event-ID")
            return
        self.cancel_on_disconnect = True
        keepalive = get_conf().MCP_SSE_KEEPALIVE_SECONDS
        async with GroupListener(notify.stream_group(stream_id)) as live:
            # Following before reading the backlog: nothing falls between the two.
            await self.responder.start_stream(200)
            for event in await store.after(stream_id, seq):
                await self.responder.write(sse.encode_event(event.data, event_id=event.id))
                seq = event.seq
                if is_response(event.data):
                    await self.responder.finish()
                    return
            # The request may be a background call whose following process died: then its
            # row is the only place its outcome exists, and this stream must answer from it.
            known, request_id = await store.request_of(stream_id)
            while not self.responder.client_gone:
                try:
                    message = await live.next(self._wait_seconds(keepalive))
                except Exception:
                    logger.warning("Channel layer lost; ending the resumed stream", exc_info=True)
                    break  # the client resumes again
                if self._token_expired():
                    break
                if message is None:
                    orphan = (
                        await background.aorphan_answer(
                            session_id=session.id, request_id=request_id
                        )
                        if known
                        else None
                    )
                    if orphan is not None:
                        if orphan.body is not None:
                            data = jsonrpc.encode(orphan.body)
                            # Kept like any event, so a later resume replays it too;
                            # once, though another process resumed the stream meanwhile.
                            frame_id = await store.append_response(stream_id, data)
                            await self.responder.write(sse.encode_event(data, event_id=frame_id))
                        break
                    await self.responder.write(sse.keepalive())
                    continue
                number = events.parse_event_id(message["id"])
                if number is None or number[1] <= seq:
                    continue  # already replayed from the store
                seq = number[1]
                await self.responder.write(
                    sse.encode_event(message["data"], event_id=message["id"])
                )
                if is_response(message["data"]):
                    break
        await self.responder.finish()

    async def _listen(self, state: EndpointState, request: Request) -> None:
        """Serve ``subscriptions/listen`` (2026-07-28): acknowledge, then stream the changes.

        The stream lives until the client closes it; every frame carries the request's id as
        its subscription id, and only the kinds the acknowledgement named are ever sent.
        """
        if not http.accepts(self.headers, "text/event-stream", explicit=True):
            await self._reject(
                406, "subscriptions/listen needs Accept: text/event-stream", request_id=request.id
            )
            return
        try:
            honoured = subscriptions.listen_filter(request.params)
        except McpError as exc:
            await self.responder.respond_json(
                modern_http_status(exc.code), _error_body(request.id, exc)
            )
            return
        self.cancel_on_disconnect = True
        keepalive = get_conf().MCP_SSE_KEEPALIVE_SECONDS
        watched = honoured.get("resourceSubscriptions", ())
        async with GroupListener(notify.endpoint_group(state.id)) as events:
            # Joined before the acknowledgement: no change after it can be missed.
            await self.responder.start_stream(200)
            ack = subscriptions.acknowledgement(request.id, honoured)
            await self.responder.write(sse.encode_event(jsonrpc.encode(ack)))
            while not self.responder.client_gone:
                try:
                    event = await events.next(self._wait_seconds(keepalive))
                except Exception:
                    logger.warning("Channel layer lost; ending the listen stream", exc_info=True)
                    break  # the client listens again
                if self._token_expired():
                    break
                if event is None:
                    await self.responder.write(sse.keepalive())
                    continue
                if event["type"] == notify.RESOURCE_UPDATED:
                    frames = subscriptions.resource_updated_notifications(
                        event["uri"], watched, subscription_id=request.id
                    )
                else:
                    frames = subscriptions.list_changed_notifications(
                        event["kinds"], honoured=honoured, subscription_id=request.id
                    )
                for frame in frames:
                    await self.responder.write(sse.encode_event(jsonrpc.encode(frame)))
        await self.responder.finish()

    async def _delete(self, state: EndpointState) -> None:
        if await self._reject_non_legacy_version("DELETE"):
            return
        session_id = first(self.headers, SESSION_HEADER)
        if not session_id:
            await self._reject(400, "Missing Mcp-Session-Id header")
            return
        if await asession_close(
            session_id=session_id, endpoint_id=state.id, **self._session_owner()
        ):
            await notify.apublish_session_closed(session_id=session_id)
            await self.responder.respond(204)
        else:
            await self._reject(404, "Session not found")
