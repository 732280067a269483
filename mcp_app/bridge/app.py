"""The bridge's ASGI app: Streamable HTTP in front, one stdio child per MCP session behind.

Every request carries the shared secret (``servers.SECRET_HEADER``) or is refused (401);
``/healthz`` alone answers without it, and says nothing but "ok". ``/<upstream>/mcp`` is an
upstream's MCP endpoint (MCP 2025-11-25, "Transports", Streamable HTTP):

* POST ``initialize`` without a session: the launcher turns the upstream's name into a
  ``Launch`` (the allow-listed program, its environment with the credentials, limits); a
  child starts, answers, and its session id is minted here. Refused, with a JSON-RPC error
  saying why, when the upstream has ``max_children`` sessions already, or while its program
  is backing off after failing to start (exiting before it answered ``initialize``) several
  times in a row: 0.5 s after the first failure, doubling up to a minute.
* POST of a request: written to the child; the answer is an SSE stream of what the child
  sends for it, ending with its response. A progress notification goes to the request that
  gave its token; list_changed and resources/updated to the standalone stream; anything
  else the child sends (log messages, elicitation and sampling requests) to the request
  started last in the session, else the standalone stream. A request of the child that no
  stream can carry is answered at once with an error the child can read; a notification is
  kept (the newest 100) until the standalone stream opens, except a list_changed, which goes
  to another session's open standalone stream of the same upstream first.
* POST of a notification or of a response (an answer to the child's request): 202.
* GET: the session's standalone SSE stream (one at a time). DELETE: the child is stopped.

A session whose child has exited answers 404, so the client initializes a new one (a new
child). A session unused for longer than the upstream's idle time, with no stream open, is
ended too. Nothing is logged of a request's headers or of the messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import secrets
import time
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import orjson

from mcp_app.bridge.children import Child
from mcp_app.bridge.servers import SECRET_HEADER, Launch

logger = logging.getLogger(__name__)
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MAX_BODY_BYTES = 16 * 1024 * 1024
KEEPALIVE_SECONDS = 15.0
# Longest pause between two looks for idle sessions (a shorter idle time looks more often).
SWEEP_SECONDS = 10.0
BACKOFF_SECONDS = (0.5, 60.0)
# Longest a new child may take to answer initialize (npx may fetch its package first).
START_SECONDS = 120.0
# Messages of the child that belong on the standalone stream whatever runs; list changes are
# the same in every child of a program.
_LIST_CHANGED = frozenset({
    "notifications/tools/list_changed", "notifications/resources/list_changed",
    "notifications/prompts/list_changed",
})  # fmt: skip
_STANDALONE = _LIST_CHANGED | {"notifications/resources/updated"}
BACKLOG = 100
INTERNAL_ERROR = -32603
INVALID_REQUEST = -32600


class LaunchRefused(Exception):
    """The upstream cannot be started (unknown, not stdio, no longer allowed...); the
    message is for the client."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


Launcher = Callable[[str], Awaitable[Launch]]


@dataclass(slots=True)
class _Starts:
    """An upstream's recent failures to start, and when the next start may be tried."""

    failures: int = 0
    not_before: float = 0.0


@dataclass(eq=False)
class Session:
    """One MCP session: its child and the streams waiting for the child's messages."""

    id: str
    child: Child
    last_used: float = field(default_factory=time.monotonic)
    # Per request in flight (its id, as JSON): the queue its POST stream reads; None ends it.
    pending: dict[bytes, asyncio.Queue[Any]] = field(default_factory=dict)
    # Progress token (as JSON) -> the request that gave it.
    tokens: dict[bytes, bytes] = field(default_factory=dict)
    standalone: asyncio.Queue[Any] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    reader: asyncio.Task[None] | None = None
    ended: bool = False
    # Notifications meant for the standalone stream while none is open (the newest BACKLOG).
    backlog: list[Any] = field(default_factory=list)
    # Hands a list_changed to another session of the same upstream whose standalone stream is
    # open (True: taken): a client follows one session's stream per upstream, and a change of
    # the program's lists is the same in every child.
    elsewhere: Callable[[Any], bool] | None = None

    @property
    def upstream(self) -> str:
        return self.child.name

    def route(self, message: Any) -> Any | None:
        """Queue one message of the child for its stream; return a reply the child needs
        when nothing can carry its request."""
        if not isinstance(message, dict):
            return None
        method = message.get("method")
        if method is None and "id" in message:
            queue = self.pending.get(orjson.dumps(message["id"]))
            if queue is not None:
                queue.put_nowait(message)
            return None
        target: asyncio.Queue[Any] | None = None
        params = message.get("params")
        if method == "notifications/progress" and isinstance(params, dict):
            owner = self.tokens.get(orjson.dumps(params.get("progressToken")))
            target = self.pending.get(owner) if owner is not None else None
        elif method not in _STANDALONE and self.pending:
            target = next(reversed(self.pending.values()))
        if target is None:
            target = self.standalone
        if target is not None:
            target.put_nowait(message)
            return None
        if method in _LIST_CHANGED and self.elsewhere is not None and self.elsewhere(message):
            return None
        if "id" not in message:
            # Kept for the standalone stream, which a client opens just after initialize.
            self.backlog = [*self.backlog[-(BACKLOG - 1) :], message]
            return None
        return {
            "jsonrpc": "2.0",
            "id": message["id"],
            "error": {"code": INTERNAL_ERROR, "message": "No client stream is open now."},
        }

    def close_streams(self) -> None:
        for queue in [*self.pending.values(), self.standalone]:
            if queue is not None:
                queue.put_nowait(None)


class Bridge:
    """The ASGI app (see the module docstring)."""

    def __init__(
        self, *, secret: str, launcher: Launcher, start_seconds: float = START_SECONDS
    ) -> None:
        if not secret:
            raise ValueError("The bridge needs a shared secret.")
        self._secret = secret.encode()
        self._launcher = launcher
        self._start_seconds = start_seconds
        self.sessions: dict[str, Session] = {}
        self._starts: dict[str, _Starts] = {}
        self._starting: Counter[str] = Counter()
        self._sweeper: asyncio.Task[None] | None = None
        self._stopping: set[asyncio.Task[Any]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path == "/healthz":
            await _plain(send, 200, "ok")
            return
        headers = {k.decode("latin-1").lower(): v for k, v in scope["headers"]}
        given = headers.get(SECRET_HEADER.lower(), b"")
        if not hmac.compare_digest(given, self._secret):
            await _plain(send, 401, "The bridge secret is missing or wrong.")
            return
        parts = path.strip("/").split("/")
        if len(parts) != 2 or parts[1] != "mcp" or not parts[0]:
            await _plain(send, 404, "Not an upstream endpoint: use /<upstream>/mcp.")
            return
        upstream = unquote(parts[0])
        session_id = headers.get("mcp-session-id", b"").decode("latin-1")
        method = scope["method"]
        if method == "POST":
            await self._post(upstream, session_id, receive, send)
        elif method == "GET":
            await self._get(upstream, session_id, receive, send)
        elif method == "DELETE":
            await self._delete(upstream, session_id, send)
        else:
            await _plain(send, 405, "POST, GET or DELETE.")

    # -- requests --

    async def _post(self, upstream: str, session_id: str, receive: Receive, send: Send) -> None:
        body = await _body(receive)
        if body is None:
            await _plain(send, 413, "The request body is too large.")
            return
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            await _json(send, 400, _error(None, -32700, "Parse error."))
            return
        if not isinstance(message, dict):
            await _json(send, 400, _error(None, INVALID_REQUEST, "One message per request."))
            return
        if message.get("method") == "initialize" and not session_id:
            await self._initialize(upstream, message, send)
            return
        session = self.sessions.get(session_id)
        if session is None or session.ended or session.upstream != upstream:
            await _plain(send, 404, "No such session (its child has ended).")
            return
        session.last_used = time.monotonic()
        if "method" not in message or "id" not in message:
            if not await self._write(session, message):
                await _plain(send, 404, "No such session (its child has ended).")
                return
            await _plain(send, 202, "")
            return
        await self._request(session, message, receive, send)

    async def _initialize(self, upstream: str, message: dict[str, Any], send: Send) -> None:
        request_id = message.get("id")
        starts = self._starts.setdefault(upstream, _Starts())
        wait = starts.not_before - time.monotonic()
        if wait > 0:
            await _json(send, 200, _error(request_id, INTERNAL_ERROR, (
                f"The stdio server of upstream {upstream!r} failed to start {starts.failures} "
                f"time(s) in a row; the next try is in {wait:.1f} s."
            )))  # fmt: skip
            return
        try:
            launch = await self._launcher(upstream)
        except LaunchRefused as exc:
            await _json(send, 200, _error(request_id, INVALID_REQUEST, exc.message))
            return
        except Exception:  # noqa: BLE001  (the boundary: the database may be down, say)
            logger.exception("stdio %s: could not read what to start", upstream)
            await _json(send, 200, _error(request_id, INTERNAL_ERROR, (
                f"The stdio bridge could not read upstream {upstream!r}; see its log."
            )))  # fmt: skip
            return
        open_now = self._starting[upstream] + sum(
            1 for s in self.sessions.values() if s.upstream == upstream
        )
        if open_now >= launch.max_children:
            await _json(send, 200, _error(request_id, INTERNAL_ERROR, (
                f"The upstream {upstream!r} has {open_now} sessions open, its limit; "
                "try again once one ends."
            )))  # fmt: skip
            return
        # Counted from here, so concurrent initializes cannot pass the limit together.
        self._starting[upstream] += 1
        try:
            child = await Child.start(launch)
        except OSError as exc:
            logger.error("stdio %s: could not start: %s", upstream, exc.strerror)
            self._failed_start(upstream, starts)
            await _json(send, 200, _error(request_id, INTERNAL_ERROR, (
                f"The stdio server of upstream {upstream!r} could not be started."
            )))  # fmt: skip
            return
        finally:
            self._starting[upstream] -= 1
        session = Session(id=secrets.token_urlsafe(24), child=child)
        session.elsewhere = lambda message: self._to_another_stream(session, message)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        key = orjson.dumps(request_id)
        session.pending[key] = queue
        self.sessions[session.id] = session
        session.reader = asyncio.get_running_loop().create_task(self._read(session))
        self._sweep_later()
        answer: Any = None
        hung = False
        try:
            async with asyncio.timeout(self._start_seconds):
                if await self._write(session, message):
                    while (item := await queue.get()) is not None:
                        if "method" not in item:
                            answer = item
                            break
        except TimeoutError:
            hung = True
        session.pending.pop(key, None)
        if answer is None:
            status = None if hung else await _exit_status(child)
            await self._end(session)
            self._failed_start(upstream, starts)
            why = (
                f"did not answer initialize within {self._start_seconds:g} s"
                if hung
                else f"exited before it answered initialize (exit status {status})"
            )
            await _json(send, 200, _error(request_id, INTERNAL_ERROR, (
                f"The stdio server of upstream {upstream!r} {why}."
            )))  # fmt: skip
            return
        starts.failures, starts.not_before = 0, 0.0
        await _json(send, 200, answer, session_id=session.id)

    def _to_another_stream(self, session: Session, message: Any) -> bool:
        for other in self.sessions.values():
            if other is not session and other.upstream == session.upstream and other.standalone:
                other.standalone.put_nowait(message)
                return True
        return False

    def _failed_start(self, upstream: str, starts: _Starts) -> None:
        starts.failures += 1
        pause = min(BACKOFF_SECONDS[0] * 2 ** (starts.failures - 1), BACKOFF_SECONDS[1])
        starts.not_before = time.monotonic() + pause
        logger.warning(
            "stdio %s: failed to start %s time(s) in a row; next try in %.1f s",
            upstream, starts.failures, pause,
        )  # fmt: skip

    async def _request(
        self, session: Session, message: dict[str, Any], receive: Receive, send: Send
    ) -> None:
        key = orjson.dumps(message["id"])
        if key in session.pending:
            await _json(send, 400, _error(message["id"], INVALID_REQUEST, "That id is in use."))
            return
        queue: asyncio.Queue[Any] = asyncio.Queue()
        session.pending[key] = queue
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        token = orjson.dumps(meta.get("progressToken")) if isinstance(meta, dict) else None
        if token is not None:
            session.tokens[token] = key
        try:
            if not await self._write(session, message):
                await _plain(send, 404, "No such session (its child has ended).")
                return
            await _start_stream(send)
            await _stream(queue, receive, send, until=message["id"])
        finally:
            session.pending.pop(key, None)
            if token is not None:
                session.tokens.pop(token, None)
            session.last_used = time.monotonic()

    async def _get(self, upstream: str, session_id: str, receive: Receive, send: Send) -> None:
        session = self.sessions.get(session_id)
        if session is None or session.ended or session.upstream != upstream:
            await _plain(send, 404, "No such session (its child has ended).")
            return
        if session.standalone is not None:
            await _plain(send, 409, "This session's stream is open already.")
            return
        queue: asyncio.Queue[Any] = asyncio.Queue()
        for message in session.backlog:
            queue.put_nowait(message)
        session.backlog = []
        session.standalone = queue
        try:
            await _start_stream(send)
            await _stream(queue, receive, send, until=None)
        finally:
            if session.standalone is queue:
                session.standalone = None
            session.last_used = time.monotonic()

    async def _delete(self, upstream: str, session_id: str, send: Send) -> None:
        session = self.sessions.get(session_id)
        if session is None or session.upstream != upstream:
            await _plain(send, 404, "No such session (its child has ended).")
            return
        await self._end(session)
        await _plain(send, 200, "")

    # -- children --

    async def _write(self, session: Session, message: Any) -> bool:
        """Write ``message`` to the session's child; False when it has gone."""
        try:
            async with session.lock:
                await session.child.send(message)
        except (ConnectionError, BrokenPipeError):
            await self._end(session)
            return False
        return True

    async def _read(self, session: Session) -> None:
        """Route the child's messages until its stdout ends; then end the session."""
        try:
            async for message in session.child.messages():
                reply = session.route(message)
                if reply is not None:
                    await self._write(session, reply)
        finally:
            if not session.ended:
                self._end_later(session)

    def _end_later(self, session: Session) -> None:
        task = asyncio.get_running_loop().create_task(self._end(session))
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    async def _end(self, session: Session) -> None:
        if session.ended:
            return
        session.ended = True
        self.sessions.pop(session.id, None)
        session.close_streams()
        await session.child.stop()
        if session.reader is not None and session.reader is not asyncio.current_task():
            session.reader.cancel()

    def _sweep_later(self) -> None:
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    async def _sweep(self) -> None:
        """End sessions idle past their upstream's idle time; stop once none is left."""
        while self.sessions:
            halves = [s.child.launch.idle_seconds / 2 for s in self.sessions.values()]
            await asyncio.sleep(min([SWEEP_SECONDS, *halves]))
            now = time.monotonic()
            for session in list(self.sessions.values()):
                idle = now - session.last_used > session.child.launch.idle_seconds
                if idle and not session.pending and session.standalone is None:
                    logger.info("stdio %s: ending an idle session", session.upstream)
                    await self._end(session)

    async def close(self) -> None:
        """Stop every child (shutdown)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        await asyncio.gather(*(self._end(s) for s in list(self.sessions.values())))
        await asyncio.gather(*self._stopping, return_exceptions=True)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            event = await receive()
            if event["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif event["type"] == "lifespan.shutdown":
                await self.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


async def _exit_status(child: Child) -> int | None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(2.0):
            return await child.process.wait()
    return None


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


async def _body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        event = await receive()
        if event["type"] == "http.disconnect":
            return b""
        chunk = event.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not event.get("more_body"):
            return b"".join(chunks)


async def _plain(send: Send, status: int, text: str) -> None:
    body = text.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8")] if body else []
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _json(send: Send, status: int, message: Any, *, session_id: str = "") -> None:
    headers = [(b"content-type", b"application/json")]
    if session_id:
        headers.append((b"mcp-session-id", session_id.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": orjson.dumps(message)})


async def _start_stream(send: Send) -> None:
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})


async def _stream(queue: asyncio.Queue[Any], receive: Receive, send: Send, *, until: Any) -> None:
    """Write the queue's messages as SSE events until the response to ``until`` (None: until
    the session ends), the queue closes, or the client goes; keep-alive comments between."""
    disconnect = asyncio.get_running_loop().create_task(_disconnected(receive))
    try:
        while True:
            getter = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait(
                {getter, disconnect}, timeout=KEEPALIVE_SECONDS, return_when="FIRST_COMPLETED"
            )
            if disconnect in done:
                getter.cancel()
                return
            if getter not in done:
                getter.cancel()
                await send({"type": "http.response.body", "body": b": keepalive\n\n",
                            "more_body": True})  # fmt: skip
                continue
            item = getter.result()
            if item is None:
                break
            data = b"event: message\ndata: " + orjson.dumps(item) + b"\n\n"
            await send({"type": "http.response.body", "body": data, "more_body": True})
            if until is not None and "method" not in item and item.get("id") == until:
                break
        await send({"type": "http.response.body", "body": b""})
    finally:
        disconnect.cancel()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
