"""Writing HTTP responses on an ASGI ``send``: whole JSON bodies and SSE streams.

A POST answer starts as JSON and becomes an SSE stream only when the request emits its first
notification, so the common call costs one JSON response and a fast error still gets its mapped
HTTP status (the same choice as the SDK's modern path). Writes after the client has gone are
dropped silently: the disconnect is handled by the consumer, not by the writer.
"""

from __future__ import annotations

import asyncio
import secrets
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import redis.exceptions
from django.db import InterfaceError, OperationalError

from mcp_app.protocol import jsonrpc, sse
from mcp_app.protocol.results import ServiceUnavailable, ToolError
from mcp_app.services import metrics, notify
from mcp_app.services.events import EventStore, event_id
from mcp_app.services.notify import GroupListener

AsgiSend = Callable[[dict[str, Any]], Awaitable[None]]

SSE_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
)


# Retry-After of a 503 during an outage: about how long a PostgreSQL or Redis restart takes.
OUTAGE_RETRY_AFTER_SECONDS = 5
_OUTAGES = (
    OperationalError,
    InterfaceError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    ConnectionError,  # the socket level: refused, reset
    ServiceUnavailable,  # a runner's word for one of the above
)


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` means PostgreSQL or Redis is unreachable (503), not a bug (500)."""
    return isinstance(exc, _OUTAGES)


def encode_headers(headers: Sequence[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]


# The Content-Type of nearly every answer, encoded once.
_JSON_CONTENT_TYPE = (b"content-type", b"application/json")


class HttpResponder:
    """One HTTP response on an ASGI connection; tracks whether it started and finished."""

    def __init__(self, send: AsgiSend, extra_headers: Sequence[tuple[str, str]] = ()) -> None:
        self._send = send
        self.extra_headers = list(extra_headers)
        self.started = False
        self.finished = False
        self.client_gone = False
        # The response's status once it started; None while nothing was sent.
        self.status: int | None = None
        self._lock = asyncio.Lock()
        # Counts this response in the open-streams gauge until finish(), or until it is
        # garbage-collected when the connection ended without one.
        self._open_stream: weakref.finalize[..., HttpResponder] | None = None

    async def _asgi(self, message: dict[str, Any]) -> None:
        if self.client_gone:
            return
        try:
            await self._send(message)
        except (OSError, RuntimeError):
            # The server reports a closed connection this way; the consumer sees the disconnect.
            self.client_gone = True

    async def respond(
        self,
        status: int,
        body: bytes = b"",
        *,
        content_type: str | None = "application/json",
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Send a complete response, unless one has already started."""
        async with self._lock:
            if self.started:
                return
            self.started = self.finished = True
            self.status = status
            encoded = encode_headers(self.extra_headers)
            if headers:
                encoded += encode_headers(headers)
            if content_type and body:
                encoded.append(
                    _JSON_CONTENT_TYPE
                    if content_type == "application/json"
                    else (b"content-type", content_type.encode("latin-1"))
                )
            await self._asgi({"type": "http.response.start", "status": status, "headers": encoded})
            await self._asgi({"type": "http.response.body", "body": body, "more_body": False})

    async def respond_json(
        self, status: int, payload: Any, headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        await self.respond(status, jsonrpc.encode(payload), headers=headers)

    async def start_stream(
        self, status: int = 200, headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        async with self._lock:
            if self.started:
                return
            self.started = True
            self.status = status
            all_headers = [*self.extra_headers, *headers]
            await self._asgi(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [*SSE_HEADERS, *encode_headers(all_headers)],
                }
            )
            metrics.SSE_STREAMS.inc()
            self._open_stream = weakref.finalize(self, metrics.SSE_STREAMS.dec)
            # Flush the headers now: a client waiting on a silent stream must see it is open.
            await self._asgi({"type": "http.response.body", "body": b"", "more_body": True})

    async def write(self, chunk: bytes) -> None:
        async with self._lock:
            if self.finished:
                return
            await self._asgi({"type": "http.response.body", "body": chunk, "more_body": True})

    async def finish(self, chunk: bytes = b"") -> None:
        async with self._lock:
            if self.finished:
                return
            self.finished = True
            self.closed()
            await self._asgi({"type": "http.response.body", "body": chunk, "more_body": False})

    def closed(self) -> None:
        """The request's work is over: an open stream no longer counts (idempotent)."""
        if self._open_stream is not None:
            self._open_stream()


@dataclass(frozen=True, slots=True)
class Resumable:
    """How a 2025-11-25 stream is kept replayable (2025-11-25 basic/transports, SEP-1699).

    Its first event primes the stream (an id, a ``retry`` hint, empty data); every later event
    is kept in the event store under the stream's id and published to the stream's group, so
    a client that lost the connection (or that the server made poll by closing it after
    ``poll_after`` seconds) resumes with ``GET`` + ``Last-Event-ID`` on any web process.
    """

    stream_id: str
    session_id: str
    store: EventStore
    retry_ms: int
    poll_after: float
    # The request the stream answers: a resume on another process finds its background call
    # by it when the process that followed the call is gone.
    request_id: Any = None


def is_response(data: bytes) -> bool:
    """Whether an event carries a JSON-RPC response (the last event of a request's stream)."""
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return isinstance(message, dict) and "id" in message and "method" not in message


class RequestStream:
    """The answer to one JSON-RPC request: JSON, or SSE once a notification must go out first.

    A client that prefers SSE (lists ``text/event-stream`` ahead of ``application/json``) gets
    SSE for every successful answer; everyone else gets the cheaper JSON when nothing streams.
    """

    def __init__(
        self,
        responder: HttpResponder,
        *,
        can_stream: bool,
        keepalive_seconds: float,
        headers: Sequence[tuple[str, str]] = (),
        resumable: Resumable | None = None,
        prefer_stream: bool = False,
    ) -> None:
        self.responder = responder
        self.can_stream = can_stream
        # The client put text/event-stream first: a successful answer goes out as SSE too.
        self.prefer_stream = prefer_stream and can_stream
        self.headers = list(headers)
        self.keepalive_seconds = keepalive_seconds
        self.resumable = resumable if can_stream else None
        self._keepalive: asyncio.Task[None] | None = None
        self._poll: asyncio.Task[None] | None = None
        # Set by close(): the response is over, and no timer may start any more.
        self._closed = False
        self._lock = asyncio.Lock()

    @property
    def streaming(self) -> bool:
        return self.responder.started

    def start_poll_timer(self) -> None:
        """Close the connection if the request still runs after ``poll_after`` seconds.

        The client then waits the primed ``retry`` and resumes with GET + Last-Event-ID, so a
        long call does not hold a connection (SEP-1699). Only for resumable streams.
        """
        if self.resumable is not None and self.resumable.poll_after > 0 and not self._closed:
            self._poll = asyncio.create_task(self._close_for_polling(self.resumable.poll_after))

    async def _close_for_polling(self, after: float) -> None:
        await asyncio.sleep(after)
        async with self._lock:
            await self._start()
            await self.responder.finish()
        self.close()

    async def _start(self) -> None:
        """Begin the SSE response (once): headers, the priming event, keep-alives."""
        if self.responder.started:
            return
        await self.responder.start_stream(200, self.headers)
        if self.resumable is not None:
            # Registered only now: a call answered with plain JSON costs no store write.
            await self.resumable.store.open(
                self.resumable.stream_id, self.resumable.session_id, self.resumable.request_id
            )
            first = event_id(self.resumable.stream_id, 0)
            await self.responder.write(sse.priming_event(first, self.resumable.retry_ms))
        if not self._closed:
            self._keepalive = asyncio.create_task(self._keep_alive())

    async def _emit(self, data: bytes, *, last: bool) -> None:
        if self.resumable is None:
            frame = sse.encode_event(data)
        else:
            stream_id = self.resumable.stream_id
            frame_id = await self.resumable.store.append(stream_id, data)
            frame = sse.encode_event(data, event_id=frame_id)
            # A client that resumed on another process follows the stream from its group.
            await notify.apublish_stream_event(stream_id=stream_id, event_id=frame_id, data=data)
        if last:
            await self.responder.finish(frame)
        else:
            await self.responder.write(frame)

    async def notify(self, message: Mapping[str, Any]) -> None:
        """Write one JSON-RPC notification; switches the response to SSE on first use."""
        if not self.can_stream:
            return
        async with self._lock:
            await self._start()
            await self._emit(jsonrpc.encode(message), last=False)

    async def _keep_alive(self) -> None:
        while not self.responder.finished:
            await asyncio.sleep(self.keepalive_seconds)
            await self.responder.write(sse.keepalive())

    def close(self) -> None:
        """Stop the keep-alive and poll timers: the response is over, or its client is gone.

        Every way a request's response ends calls it: ``reply``, ``abandon``, and the
        consumer, when the handler ends (a failure, a cancellation) and when the client
        departs. Idempotent, and synchronous so the departure path need not await: a timer
        ends at its next await, and its late write would be dropped by the finished responder.
        """
        self._closed = True
        for task in (self._keepalive, self._poll):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
        self._keepalive = self._poll = None

    async def reply(self, status: int, payload: Any) -> None:
        """Send the final response: as JSON with ``status``, or as the stream's last event."""
        self.close()
        async with self._lock:
            if self.prefer_stream and status == 200:
                await self._start()
            if self.responder.started:
                await self._emit(jsonrpc.encode(payload), last=True)
            else:
                await self.responder.respond_json(status, payload, self.headers)

    async def abandon(self) -> None:
        """End the response of a cancelled request without answering it.

        Nothing more is sent for it (2025-11-25 basic/utilities/cancellation); a response that
        had not started becomes an empty event stream, or a bare 202 for a JSON-only client.
        """
        self.close()
        async with self._lock:
            if not self.responder.started:
                if not self.can_stream:
                    await self.responder.respond(202)
                    return
                await self.responder.start_stream(200, self.headers)
            await self.responder.finish()


class StreamClientRequester:
    """protocol.ports.ClientRequester for a legacy call: ask on its stream, await the POST.

    The question goes out on the call's own SSE stream; the client answers with a separate
    POST, which may reach any web process and is routed back over the channel layer
    (``services.notify.client_reply_group``).
    """

    def __init__(self, stream: RequestStream, session_id: str, timeout: float) -> None:
        self.stream = stream
        self.session_id = session_id
        self.timeout = timeout

    async def request(self, method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        if not self.stream.can_stream:
            raise ToolError(
                "This tool asks the client questions: call it with Accept: text/event-stream."
            )
        request_id = f"mcphost-{secrets.token_urlsafe(12)}"
        group = notify.client_reply_group(self.session_id, request_id)
        async with GroupListener(group) as replies:
            message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            await self.stream.notify(message)
            reply = await replies.next(self.timeout)
        if reply is None:
            raise ToolError(f"The client did not answer {method} within {self.timeout:g} s.")
        if reply.get("error") is not None:
            error = reply["error"]
            detail = error.get("message") if isinstance(error, Mapping) else None
            raise ToolError(f"The client declined {method}: {detail or 'no reason given'}")
        result = reply.get("result")
        if not isinstance(result, Mapping):
            raise ToolError(f"The client's answer to {method} is not an object.")
        return result
