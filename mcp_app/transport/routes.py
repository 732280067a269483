"""What each HTTP method does: POST serves JSON-RPC in its era, GET and DELETE legacy sessions.

A POST body is one message or (2025-03-26 sessions) a batch; ``protocol.inbound.classify`` says
which machinery serves a message: a 2026-07-28 request (no session, everything in the
request), ``initialize`` (opens a legacy session) or a message of a legacy session. Every
request that reaches a handler goes through ``run``, the one place that checks the endpoint's
rate limits (``services/limits.py``), dispatches and tells the call log the reply. GET and
DELETE exist only for legacy sessions (the version rule is
``protocol.inbound.stream_method_refusal``); GET's streams are ``follow.py``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_app.auth import access, addresses, bearer
from mcp_app.conf import get_conf
from mcp_app.protocol import dispatch, inbound, jsonrpc, uritemplate
from mcp_app.protocol.context import LegacySession, RequestContext
from mcp_app.protocol.dispatch import Reply
from mcp_app.protocol.errors import (
    RATE_LIMITED,
    InvalidRequest,
    McpError,
    RateLimited,
    modern_http_status,
)
from mcp_app.protocol.handlers import lifecycle
from mcp_app.protocol.jsonrpc import Notification, Request, Response
from mcp_app.protocol.results import Outcome
from mcp_app.protocol.shaping import finish_result
from mcp_app.protocol.versions import Era, Feature, supports
from mcp_app.services import events, limits, notify, tracing
from mcp_app.services.background import web as background
from mcp_app.services.context_factory import request_context
from mcp_app.services.endpoint_directory import EndpointState
from mcp_app.services.mcp_tasks import CatalogTaskStore
from mcp_app.services.runner import CatalogToolRunner
from mcp_app.services.sessions import (
    DatabaseSessionStore,
    asession_close,
    asession_is_live,
    asession_load,
    asession_open,
    session_held,
)
from mcp_app.transport import follow, http
from mcp_app.transport.exchange import SESSION_HEADER, VERSION_HEADER, Exchange, Rejected
from mcp_app.transport.streams import RequestStream, Resumable, StreamClientRequester

SERVER_NAME = lifecycle.SERVER_NAME
SERVER_VERSION = lifecycle.SERVER_VERSION

_tool_runner = CatalogToolRunner()
_session_store = DatabaseSessionStore()
# Each tool's Mcp-Param headers, walked once for the process (inbound keeps no state).
_param_headers = inbound.ParamHeaderCache()
# The resource templates reads' URIs are matched against, parsed once for the process.
_templates = uritemplate.TemplateCache()
# Legacy requests running in this process, by (session id, JSON-encoded request id), so
# notifications/cancelled can stop them.
_in_flight: dict[tuple[str, bytes], Exchange] = {}


def server_info(state: EndpointState) -> dict[str, Any]:
    """The ``Implementation`` this endpoint presents; shaped per revision by the protocol."""
    endpoint = state.snapshot.endpoint
    info: dict[str, Any] = {
        "name": SERVER_NAME,
        "title": endpoint.title or endpoint.slug,
        "version": SERVER_VERSION,
    }
    if endpoint.icons:
        info["icons"] = [dict(icon) for icon in endpoint.icons]
    return info


async def serve_post(ex: Exchange, state: EndpointState) -> None:
    """Serve a POST: one message, or a batch.

    Raises:
        Rejected: wrong media types, or a body that is not JSON-RPC.
    """
    if not http.is_json_content(ex.headers):
        raise Rejected(415, "Content-Type must be application/json")
    if not http.accepts(ex.headers, "application/json"):
        raise Rejected(406, "Accept must include application/json")
    try:
        payload = jsonrpc.decode(ex.body, max_batch=get_conf().MCP_MAX_BATCH_MESSAGES)
    except McpError as exc:
        raise Rejected(400, error=exc, request_id=getattr(exc, "request_id", None)) from None
    if isinstance(payload, list):
        tracing.annotate_request(payload)
        # The one resolution of each request in the batch: every step after this takes it.
        batch = {
            id(message): inbound.resolve(message, state.snapshot, Era.LEGACY, _templates)
            for message in payload
            if isinstance(message, Request)
        }
        ex.recorder.received(payload, modern=False, batch=batch)
        await _batch(ex, state, payload, batch)
        return
    route = inbound.classify(payload, ex.header(VERSION_HEADER))
    modern = route is inbound.Route.MODERN
    # The one resolution of this request: every step after this one takes it.
    resolved = None
    if isinstance(payload, Request):
        resolved = inbound.resolve(
            payload, state.snapshot, Era.MODERN if modern else Era.LEGACY, _templates
        )
    tracing.annotate_request(payload, resolved.target if resolved is not None else None)
    ex.recorder.received([payload], modern=modern, resolved=resolved)
    if modern:
        await _modern(ex, state, payload, resolved)
    elif route is inbound.Route.INITIALIZE:
        await _initialize(ex, state, payload)
    else:
        await _legacy(ex, state, payload, resolved)


def check_scope(ex: Exchange, state: EndpointState, resolved: inbound.Resolved) -> None:
    """Refuse with 403 ``insufficient_scope`` when the token lacks the scope the item needs.

    Sent before any body, so a client can step up and retry (2025-11-25
    basic/authorization, "Scope Challenge Handling").
    """
    request = resolved.request
    needed = access.missing_scope(state, resolved, ex.principal)
    if needed is not None:
        challenge = bearer.Challenge(
            403,
            "insufficient_scope",
            f"This needs the {needed} scope",
            bearer.step_up_scope(state, ex.principal.scopes, needed),
        )
        raise challenge_refusal(state, challenge, request.id)


def challenge_refusal(
    state: EndpointState, challenge: bearer.Challenge, request_id: Any = None
) -> Rejected:
    """The refusal of an OAuth challenge: its status and WWW-Authenticate header."""
    return Rejected(
        challenge.status,
        challenge.description or "Authorization required",
        request_id=request_id,
        headers=[("www-authenticate", challenge.header(state.slug))],
    )


async def load_session(ex: Exchange, state: EndpointState, request_id: Any) -> LegacySession:
    """The request's legacy session.

    Raises:
        Rejected: no Mcp-Session-Id header (400), or no such live session of this caller (404).
    """
    session_id = ex.header(SESSION_HEADER)
    if not session_id:
        raise Rejected(400, "Missing Mcp-Session-Id header", request_id=request_id)
    session = await asession_load(session_id=session_id, endpoint_id=state.id, **ex.session_owner())
    if session is None:
        raise Rejected(404, "Session not found", request_id=request_id)
    ex.recorder.session(session)
    return session


# -- running one request ----------------------------------------------------------------------


def _stream(
    ex: Exchange, session: LegacySession | None = None, request_id: Any = None
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
    stream = ex.current_stream = RequestStream(
        ex.responder,
        can_stream=http.accepts(ex.headers, "text/event-stream"),
        keepalive_seconds=conf.MCP_SSE_KEEPALIVE_SECONDS,
        resumable=resumable,
        prefer_stream=http.prefers(ex.headers, "text/event-stream", over="application/json"),
    )
    return stream


def _context(
    ex: Exchange,
    state: EndpointState,
    *,
    version: str,
    resolved: inbound.Resolved | None,
    stream: RequestStream | None,
    client_capabilities: Mapping[str, Any],
    client_info: Mapping[str, Any] | None,
    log_level: str | None,
    session: LegacySession | None = None,
) -> RequestContext:
    request = resolved.request if resolved is not None else None
    return request_context(
        state.snapshot,
        version=version,
        tools=_tool_runner,
        server_info=server_info(state),
        client_capabilities=client_capabilities,
        client_info=client_info,
        request_id=request.id if request is not None else None,
        progress_token=inbound.progress_token_of(request.params) if request else None,
        log_level=log_level,
        session=session,
        sessions=_session_store if session is not None else None,
        send=stream.notify if stream is not None and stream.can_stream else None,
        client_requests=(
            StreamClientRequester(stream, session.id, get_conf().MCP_CLIENT_REQUEST_TIMEOUT_SECONDS)
            if session is not None and stream is not None
            else None
        ),
        principal=ex.principal.key,
        request_headers=ex.headers,
        tasks=CatalogTaskStore(state.id),
        named_item=resolved.item if resolved is not None else None,
        named_variables=resolved.variables if resolved is not None else None,
    )


def _legacy_context(
    ex: Exchange,
    state: EndpointState,
    session: LegacySession,
    resolved: inbound.Resolved | None,
    stream: RequestStream | None,
) -> RequestContext:
    return _context(
        ex,
        state,
        version=session.protocol_version,
        resolved=resolved,
        stream=stream,
        client_capabilities=session.client_capabilities,
        client_info=session.client_info,
        log_level=session.log_level,
        session=session,
    )


async def run(
    ex: Exchange, state: EndpointState, ctx: RequestContext, resolved: inbound.Resolved
) -> Reply:
    """Dispatch one request within the endpoint's rate limits and tell the call log its reply.

    A call over a limit is not dispatched: ``tools/call`` gets a tool error the model can act
    on, other requests the JSON-RPC error ``RateLimited`` (both say which limit and when to
    retry). A concurrency slot is held until the call ends, a background call's included.
    """
    request = resolved.request
    ex.recorder.dispatched(resolved, ctx.version)
    admission: limits.Lease | limits.Refusal = limits.NO_LEASE
    if state.limits:
        admission = await limits.aadmit(
            limits=state.limits,
            method=request.method,
            target=resolved.target,
            subject=lambda: _caller(ex),
        )
    if isinstance(admission, limits.Refusal):
        reply = _rate_limited(ctx, resolved, admission)
    elif not admission.keys:
        reply = await dispatch.reply(ctx, request, resolved)
    else:
        try:
            reply = await dispatch.reply(ctx, request, resolved)
        except BaseException:
            await admission.arelease()
            raise
        task_id = _task_started(reply)
        if task_id is not None:
            # The call goes on as an MCP task: its slots are freed when the task ends.
            await admission.ahand_over(task_id)
        else:
            await admission.arelease()
    ex.recorder.answered(request, reply)
    return reply


def _task_started(reply: Reply) -> str | None:
    """The task id of a reply that is a task handle (the call runs on), else None."""
    result = reply.result
    if not reply.detail or not isinstance(result, dict):
        return None
    if result.get("resultType") != "task" and "task" not in result:
        return None
    return str(reply.detail.get("task_id") or "") or None


def _caller(ex: Exchange) -> str:
    client = ex.scope.get("client")
    meta = {
        "REMOTE_ADDR": client[0] if client else "",
        "HTTP_X_FORWARDED_FOR": ex.header("x-forwarded-for") or "",
    }
    return limits.caller_subject(
        user_id=ex.principal.user_id,
        client_id=ex.principal.client_id,
        address=addresses.client_address(meta),
    )


def _rate_limited(
    ctx: RequestContext, resolved: inbound.Resolved, refusal: limits.Refusal
) -> Reply:
    request, target = resolved.request, resolved.target
    detail = {"rate_limit": refusal.rule.id}
    if request.method == "tools/call":
        # A result, not an error: the model reads it and can wait or choose another tool.
        result: dict[str, Any] = {
            "content": [{"type": "text", "text": refusal.message}],
            "isError": True,
            "_meta": {limits.META_KEY: refusal.data},
        }
        finish_result(result, ctx.version, ctx.server_info, cacheable=False)
        body = {"jsonrpc": "2.0", "id": request.id, "result": result}
        return Reply(body, None, Outcome.RATE_LIMITED, detail, target)
    error = RateLimited(refusal.message, refusal.data, refusal.rule.id)
    return dispatch.refusal(request, error, resolved)


def _answer_status(reply: Reply, stream: RequestStream, default: int) -> int:
    """The HTTP status of a single request's reply; a refusal by a limit gets 429 with
    Retry-After (RFC 6585 section 4), a tool's rate-limit result its header only."""
    retry_after = None
    if isinstance(reply.error, RateLimited):
        retry_after = reply.error.data["retryAfterSeconds"]
    elif reply.outcome is Outcome.RATE_LIMITED:
        retry_after = reply.result["_meta"][limits.META_KEY]["retryAfterSeconds"]
    if retry_after is not None:
        stream.headers.append(("retry-after", str(retry_after)))
    if reply.error is not None and reply.error.code == RATE_LIMITED:
        return 429
    return default


# -- the eras ---------------------------------------------------------------------------------


async def _modern(
    ex: Exchange, state: EndpointState, message: Any, resolved: inbound.Resolved | None
) -> None:
    """``resolved`` is ``message`` resolved when it is a request, else None."""
    if isinstance(message, Response):
        raise Rejected(400, "Clients must not send responses in protocol 2026-07-28")
    if resolved is None:
        try:
            inbound.check_modern_notification(message, ex.headers)
        except McpError as exc:
            raise Rejected(modern_http_status(exc.code), error=exc) from None
        await ex.responder.respond(202)
        return
    message = resolved.request
    try:
        envelope = inbound.check_modern_request(
            message, ex.headers, state.snapshot, _param_headers, resolved
        )
    except McpError as exc:
        raise Rejected(modern_http_status(exc.code), error=exc, request_id=message.id) from None
    check_scope(ex, state, resolved)
    if message.method == "subscriptions/listen":
        await follow.listen_stream(ex, state, message)
        return
    # 2026-07-28: closing the response stream is how a client cancels the request.
    ex.cancel_on_disconnect = True
    stream = _stream(ex)
    ctx = _context(
        ex,
        state,
        version=envelope.version,
        resolved=resolved,
        stream=stream,
        client_capabilities=envelope.client_capabilities,
        client_info=envelope.client_info,
        log_level=envelope.log_level,
    )
    reply = await run(ex, state, ctx, resolved)
    status = modern_http_status(reply.error.code) if reply.error else 200
    await stream.reply(_answer_status(reply, stream, status), reply.body)


async def _initialize(ex: Exchange, state: EndpointState, message: Any) -> None:
    if not isinstance(message, Request):
        raise Rejected(400, "initialize must be a request with an id")
    session_id = ex.header(SESSION_HEADER)
    if session_id is not None:
        if await asession_is_live(
            session_id=session_id, endpoint_id=state.id, **ex.session_owner()
        ):
            raise Rejected(400, "Session already initialized", request_id=message.id)
        raise Rejected(404, "Session not found", request_id=message.id)
    try:
        version, capabilities, client_info = lifecycle.parse_initialize(message.params)
    except McpError as exc:
        raise Rejected(400, error=exc, request_id=message.id) from None
    session = await asession_open(
        endpoint_id=state.id,
        protocol_version=version,
        client_capabilities=capabilities,
        client_info=client_info,
        **ex.session_owner(),
    )
    ex.recorder.session(session)
    result = lifecycle.initialize_result(version, state.snapshot, server_info(state))
    await ex.responder.respond_json(
        200,
        {"jsonrpc": "2.0", "id": message.id, "result": result},
        headers=[("mcp-session-id", session.id)],
    )


async def _legacy(
    ex: Exchange, state: EndpointState, message: Any, resolved: inbound.Resolved | None
) -> None:
    """``resolved`` is ``message`` resolved when it is a request, else None."""
    request_id = resolved.request.id if resolved is not None else None
    session = await load_session(ex, state, request_id)
    if resolved is not None:
        message = resolved.request
        check_scope(ex, state, resolved)
        stream = _stream(ex, session, message.id)
        stream.start_poll_timer()
        ctx = _legacy_context(ex, state, session, resolved, stream)
        key = (session.id, jsonrpc.encode(message.id))
        _in_flight[key] = ex
        try:
            reply = await run(ex, state, ctx, resolved)
        finally:
            if _in_flight.get(key) is ex:
                del _in_flight[key]
        await stream.reply(_answer_status(reply, stream, 200), reply.body)
    elif isinstance(message, Notification):
        if message.method == "notifications/cancelled":
            await _cancel(session, message.params)
        ctx = _legacy_context(ex, state, session, None, None)
        await dispatch.handle_notification(ctx, message.method, message.params)
        await ex.responder.respond(202)
    else:
        # A client's answer to a question a call of this session asked, possibly from
        # another process: route it to the waiting call by session and id.
        await notify.apublish_client_reply(
            session_id=session.id,
            request_id=message.id,
            result=message.result,
            error=message.error,
        )
        await ex.responder.respond(202)


async def _cancel(session: LegacySession, params: Mapping[str, Any] | None) -> None:
    """Cancel the session's request ``params.requestId``, wherever it runs.

    A request in this process is stopped here; a background call is cancelled through its
    row, which reaches its worker and the process following it. An inline call held by
    another process is not reached (documented in docs/architecture.md). Unknown or finished
    ids are ignored (2025-11-25 basic/utilities/cancellation).
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


async def _batch(
    ex: Exchange,
    state: EndpointState,
    messages: list[Any],
    resolved: Mapping[int, inbound.Resolved],
) -> None:
    """JSON-RPC batches: only sessions that negotiated 2025-03-26 may send them.

    Their size is bounded when decoded (MCP_MAX_BATCH_MESSAGES). Calls of background tools
    past MCP_MAX_BATCH_BACKGROUND_CALLS are answered with an error and not run: a batch runs
    in order, and each such call holds a worker for as long as the tool takes, even after the
    client has gone.
    """
    session = await load_session(ex, state, None)
    if not supports(session.protocol_version, Feature.BATCHES):
        raise Rejected(400, f"Batches are not part of protocol {session.protocol_version}")
    for one in resolved.values():
        # One status for the whole batch: refused before any of it runs.
        check_scope(ex, state, one)
    replies: list[dict[str, Any]] = []
    background_left = get_conf().MCP_MAX_BATCH_BACKGROUND_CALLS
    for message in messages:
        if isinstance(message, Request):
            refusal = None
            this = resolved[id(message)]
            tool = this.tool
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
                reply = dispatch.refusal(message, refusal, this)
                ex.recorder.answered(message, reply)
            else:
                ctx = _legacy_context(ex, state, session, this, None)
                reply = await run(ex, state, ctx, this)
            replies.append(reply.body)
        elif isinstance(message, Notification):
            ctx = _legacy_context(ex, state, session, None, None)
            await dispatch.handle_notification(ctx, message.method, message.params)
    if replies:
        await ex.responder.respond_json(200, replies)
    else:
        await ex.responder.respond(202)


async def serve_get(ex: Exchange, state: EndpointState) -> None:
    """GET: a legacy session's standalone stream, or the resumption of a request stream.

    Raises:
        Rejected: a 2026-07-28 or unknown version, no event-stream Accept, no session.
    """
    _check_stream_method(ex, "GET")
    if not http.accepts(ex.headers, "text/event-stream"):
        raise Rejected(406, "Accept must include text/event-stream")
    session = await load_session(ex, state, None)
    last_event_id = ex.header("last-event-id")
    if last_event_id is not None:
        await follow.resumed_stream(ex, session, last_event_id)
    else:
        await follow.session_stream(ex, state, session)


async def serve_delete(ex: Exchange, state: EndpointState) -> None:
    """DELETE: close a legacy session.

    Raises:
        Rejected: a 2026-07-28 or unknown version, no session header, no such session.
    """
    _check_stream_method(ex, "DELETE")
    session_id = ex.header(SESSION_HEADER)
    if not session_id:
        raise Rejected(400, "Missing Mcp-Session-Id header")
    # Read before closing, which forgets it: the call log names the session's client.
    held = session_held(session_id)
    if not await asession_close(session_id=session_id, endpoint_id=state.id, **ex.session_owner()):
        raise Rejected(404, "Session not found")
    if held is not None:
        ex.recorder.session(held)
    await notify.apublish_session_closed(session_id=session_id)
    await ex.responder.respond(204)


def _check_stream_method(ex: Exchange, method: str) -> None:
    refusal = inbound.stream_method_refusal(method, ex.header(VERSION_HEADER))
    if refusal is not None:
        status, message = refusal
        headers = [("allow", "POST")] if status == 405 else []
        raise Rejected(status, message, headers=headers)
