"""A small pipelined Redis client for the rate limiter's hot path (``services/limits.py``).

redis-py's asyncio client costs about as much server CPU per command as the rest of a
``tools/call`` (a connection taken from and given back to its pool under a lock, arguments
encoded one by one, a pure-Python reply parser without hiredis, a retry wrapper). A limited
call needs one script run, so this client does only that: one connection per event loop, the
commands of every concurrent call written to it in batches, one batch awaiting its replies at
a time (RESP2, replies in order), each answered from ``data_received``; a limit's fixed
arguments are encoded once (``Bulks``). Scripts run by ``EVALSHA``, falling back to ``EVAL``
once when Redis does not know them (after a restart or ``SCRIPT FLUSH``).

Errors are ``RespError`` (Redis answered an error) or ``OSError``/``TimeoutError`` (no Redis);
the connection is dropped on any of the latter and made again by the next command.
Everything else (the admin's quota view, scans) uses redis-py.

A ``redis+sentinel://`` URL (``services/redis_sentinel.py``) names a master that Redis
Sentinel fails over: each connection is made to where a sentinel says the master is (asking
them in turn) and is kept only if that server says it is a master (``ROLE``). A reply of
``READONLY`` or ``MASTERDOWN`` (a demoted master, a replica) drops the connection and the
commands are sent once more, to the master found afresh; so is a connection that could not be
made. A connection lost after the commands went out is not sent again (a script may have
run): that call fails as one without Redis would, and the next one finds the master. All of it
within the one ``timeout``; a plain URL costs nothing of this.

A ``rediss://`` URL, or a sentinel URL with TLS options, has every connection (to the
sentinels too) speak TLS with the context ``services/redis_tls.py`` makes of the URL's
options, as redis-py would.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import ssl
import weakref
from collections import deque
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from mcp_app.services import redis_sentinel, redis_tls


class Bulks:
    """Arguments encoded once (bulk strings, ``count`` of them) and sent as they are: what a
    caller sends with every command, a limit's fixed numbers say, costs no encoding per call."""

    __slots__ = ("count", "data")

    def __init__(self, args: Sequence[bytes | str | int | float]) -> None:
        self.data, self.count = _bulks(args)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Bulks) and (self.data, self.count) == (other.data, other.count)

    def __hash__(self) -> int:
        return hash(self.data)

    def __repr__(self) -> str:
        return f"Bulks({self.data!r})"


Arg = bytes | str | int | float | Bulks


# A command to a sentinel-managed master is sent at most this often (a second time only after
# the first found no master or a replica).
MASTER_ATTEMPTS = 2
# Error replies of a server that is not (or no longer) a writable master.
NOT_MASTER_ERRORS = ("READONLY", "MASTERDOWN")


class RespError(Exception):
    """Redis answered a command with an error reply."""


class NotMasterError(ConnectionError):
    """The server reached is not the master (a sentinel URL's server after a failover)."""


class _Incomplete(Exception):
    pass


def encode(args: Sequence[Arg]) -> bytes:
    """One command as a RESP array of bulk strings."""
    data, count = _bulks(args)
    return b"*%d\r\n%s" % (count, data)


def _bulks(args: Sequence[Arg]) -> tuple[bytes, int]:
    """``args`` as bulk strings, and how many."""
    # type() before isinstance: this runs for every argument of every limited call.
    parts = []
    count = len(args)
    for arg in args:
        if type(arg) is str:
            data = arg.encode()
        elif type(arg) is bytes:
            data = arg
        elif isinstance(arg, Bulks):
            parts.append(arg.data)
            count += arg.count - 1
            continue
        elif isinstance(arg, str):
            data = arg.encode()
        elif isinstance(arg, bytes):
            data = bytes(arg)
        else:
            data = repr(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts), count


def _parse(buf: bytes | bytearray, pos: int) -> tuple[Any, int]:
    """One reply starting at ``pos``: (value, position after it).

    Raises:
        _Incomplete: the buffer does not hold all of it yet.
    """
    end = buf.find(b"\r\n", pos)
    if end < 0:
        raise _Incomplete
    kind, line = buf[pos : pos + 1], bytes(buf[pos + 1 : end])
    after = end + 2
    if kind == b":":
        return int(line), after
    if kind == b"$":
        size = int(line)
        if size < 0:
            return None, after
        if len(buf) < after + size + 2:
            raise _Incomplete
        return bytes(buf[after : after + size]), after + size + 2
    if kind == b"*":
        count = int(line)
        if count < 0:
            return None, after
        items = []
        for _ in range(count):
            item, after = _parse(buf, after)
            items.append(item)
        return items, after
    if kind == b"+":
        return line, after
    if kind == b"-":
        return RespError(line.decode(errors="replace")), after
    raise RespError(f"Unexpected reply from Redis: {kind!r}")


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, and it may call
        # connection_made after create_connection returned: both set it.
        self.transport: Any = None
        self.waiters: deque[asyncio.Future[Any]] = deque()
        self.buffer = bytearray()
        self.closed = False
        # Commands go out in batches, one batch in flight at a time: those written within one
        # turn of the event loop, or while the batch before them awaits its replies, share a
        # write, and their replies a read. On this path a system call costs more than the
        # Python around it, so under load the batches grow and each call pays less of one;
        # alone, a command waits for no one. Group commit, as databases do it.
        self.outgoing: list[bytes] = []
        self.outgoing_replies = 0
        # Replies still due for the batch in flight (0: none in flight).
        self.in_flight = 0
        self.flush_scheduled = False
        # When each waiter's caller gives up (loop time), in the waiters' order, and one timer
        # for the oldest: a timer per call would cost more than the rest of the round trip.
        # Replies come in order, so once the oldest is late the connection is stuck, and every
        # waiter fails with TimeoutError (``_check_deadlines``).
        self.deadlines: deque[float] = deque()
        self.watch: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        pos = 0
        try:
            while pos < len(self.buffer):
                value, pos = _parse(self.buffer, pos)
                waiter = self.waiters.popleft()
                self.deadlines.popleft()
                self.in_flight -= 1
                if waiter.done():
                    continue  # its caller gave up (a timeout): the reply is dropped, in order
                if isinstance(value, RespError):
                    waiter.set_exception(value)
                else:
                    waiter.set_result(value)
        except _Incomplete:
            pass
        except (RespError, ValueError, IndexError):
            self.close()
        del self.buffer[:pos]
        if self.in_flight <= 0 and self.outgoing and not self.flush_scheduled:
            self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail_all(ConnectionError("Redis connection lost"))

    def _fail_all(self, error: Exception) -> None:
        if self.watch is not None:
            self.watch.cancel()
            self.watch = None
        self.deadlines.clear()
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_exception(error)

    def send(
        self, payload: bytes, replies: int, deadline: float = math.inf
    ) -> list[asyncio.Future[Any]]:
        """Write ``payload`` (``replies`` commands) in the next batch; a future per reply,
        failed with TimeoutError if the reply is not in by ``deadline`` (loop time)."""
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in range(replies)]
        self.waiters.extend(futures)
        self.deadlines.extend([deadline] * replies)
        if self.watch is None and deadline != math.inf:
            self.watch = loop.call_at(deadline, self._check_deadlines)
        self.outgoing.append(payload)
        self.outgoing_replies += replies
        if self.in_flight <= 0 and not self.flush_scheduled:
            # Nothing in flight: out at the end of this turn. Otherwise the batch in flight
            # sends this one when its last reply comes (``data_received``).
            self.flush_scheduled = True
            loop.call_soon(self._scheduled_flush)
        return futures

    def _check_deadlines(self) -> None:
        self.watch = None
        # Deadlines grow in the waiters' order (a client's timeout is fixed); the setup
        # commands a connection starts with have none (their caller's own timeout bounds them).
        oldest = next((deadline for deadline in self.deadlines if deadline != math.inf), None)
        if oldest is None:
            return
        loop = asyncio.get_running_loop()
        if oldest <= loop.time():
            self._fail_all(TimeoutError("Redis did not answer in time"))
            self.close()
        else:
            self.watch = loop.call_at(oldest, self._check_deadlines)

    def _scheduled_flush(self) -> None:
        self.flush_scheduled = False
        if self.outgoing:
            self._flush()

    def _flush(self) -> None:
        payload, self.outgoing = b"".join(self.outgoing), []
        self.in_flight, self.outgoing_replies = self.outgoing_replies, 0
        if not self.closed:
            self.transport.write(payload)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class Client:
    """Commands to the Redis at ``url`` from the current event loop, within ``timeout``."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url = url
        self.timeout = timeout
        self._connection: _Connection | None = None
        self._connecting: asyncio.Future[_Connection] | None = None
        # None for a plain URL (the fast path never looks further).
        self._sentinel = redis_sentinel.parse(url)

    async def _connected(self) -> _Connection:
        held = self._connection
        if held is not None and not held.closed:
            return held
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.ensure_future(self._connect())
        return await asyncio.shield(self._connecting)

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        parts = urlsplit(self.url)
        target = self._sentinel
        try:
            # Made afresh, as redis-py does: renewed files are read on reconnecting.
            tls = redis_tls.context(self.url)
        except ValueError as exc:  # a file gone since the start: no Redis, as it were
            raise ConnectionError(f"TLS of {parts.hostname}: {exc}") from exc
        async with asyncio.timeout(self.timeout):
            setup: list[list[Arg]] = []
            if target is not None:
                host, port = await self._master_address(target, tls)
                transport, connection = await loop.create_connection(
                    _Connection, host, port, ssl=tls
                )
                if target.password:
                    setup.append(["AUTH", target.username or "default", target.password])
                if target.db:
                    setup.append(["SELECT", target.db])
                setup.append(["ROLE"])
            elif parts.scheme == "unix":
                transport, connection = await loop.create_unix_connection(_Connection, parts.path)
            else:
                transport, connection = await loop.create_connection(
                    _Connection, parts.hostname or "127.0.0.1", parts.port or 6379, ssl=tls
                )
            connection.transport = transport
            if target is None and parts.password:
                user = unquote(parts.username or "default")
                setup.append(["AUTH", user, unquote(parts.password)])
            database = (parts.path or "/").strip("/") or dict(
                item.split("=", 1) for item in parts.query.split("&") if "=" in item
            ).get("db", "")
            if target is None and database and database != "0":
                setup.append(["SELECT", database])
            if setup:
                futures = connection.send(b"".join(encode(c) for c in setup), len(setup))
                try:
                    replies = await asyncio.gather(*futures, return_exceptions=True)
                    role = replies.pop() if target is not None else None
                    failed = next((r for r in replies if isinstance(r, BaseException)), None)
                    if failed is not None:
                        raise failed
                    # A user without ROLE (an @admin command) skips the check: a replica
                    # still answers READONLY to the first write.
                    if isinstance(role, BaseException) and not str(role).startswith("NOPERM"):
                        raise role
                    if isinstance(role, list) and role[:1] != [b"master"]:
                        raise NotMasterError(f"{host}:{port} is not a master")
                except BaseException:
                    connection.close()
                    raise
        self._connection = connection
        return connection

    async def _master_address(
        self, target: redis_sentinel.SentinelTarget, tls: ssl.SSLContext | None
    ) -> tuple[str, int]:
        """Where the sentinels say the master is: the first of them to answer, each given an
        equal share of the timeout (over TLS with ``tls``, as the master)."""
        loop = asyncio.get_running_loop()
        ask: list[list[Arg]] = []
        if target.sentinel_password:
            user = target.sentinel_username or "default"
            ask.append(["AUTH", user, target.sentinel_password])
        ask.append(["SENTINEL", "get-master-addr-by-name", target.master])
        failures = []
        # A silent sentinel may not take the others' turn.
        each = self.timeout / len(target.sentinels)
        for host, port in target.sentinels:
            connection = None
            try:
                async with asyncio.timeout(each):
                    _transport, connection = await loop.create_connection(
                        _Connection, host, port, ssl=tls
                    )
                    futures = connection.send(b"".join(encode(c) for c in ask), len(ask))
                    address = (await asyncio.gather(*futures))[-1]
            except (OSError, RespError, TimeoutError) as exc:
                failures.append(f"{host}:{port}: {exc or type(exc).__name__}")
                continue
            finally:
                if connection is not None:
                    connection.close()
            if address:
                return address[0].decode(), int(address[1])
            failures.append(f"{host}:{port}: does not know {target.master}")
        raise ConnectionError(f"No sentinel named the master ({'; '.join(failures)})")

    async def pipeline(self, commands: Sequence[Sequence[Arg]]) -> list[Any]:
        """Send ``commands`` in one write; their replies, in order.

        Raises:
            RespError: one of them failed (the others ran).
            OSError, TimeoutError: Redis could not be reached or did not answer in time.
        """
        return await self._round_trip(b"".join([encode(c) for c in commands]), len(commands))

    async def evalsha(self, script: Script, keys: Sequence[Arg], args: Sequence[Arg]) -> Any:
        """Run ``script`` (by its digest; sent whole once if Redis does not know it)."""
        tail, count = _bulks([len(keys), *keys, *args])
        try:
            return (await self._round_trip(b"*%d\r\n%s%s" % (count + 2, script.by_sha, tail)))[0]
        except RespError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
        return (await self._round_trip(b"*%d\r\n%s%s" % (count + 2, script.whole, tail)))[0]

    async def _round_trip(self, payload: bytes, replies: int = 1) -> list[Any]:
        """Send ``payload`` (``replies`` commands, encoded); their replies, in order."""
        if self._sentinel is not None:
            return await self._round_trip_to_master(payload, replies)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        try:
            connection = self._connection
            if connection is None or connection.closed:
                async with asyncio.timeout_at(deadline):
                    connection = await self._connected()
            # No timer of its own: the connection fails it at the deadline (``send``).
            futures = connection.send(payload, replies, deadline)
            if replies == 1:
                return [await futures[0]]
            return list(await asyncio.gather(*futures))
        except (OSError, TimeoutError):
            self.drop()
            raise

    async def _round_trip_to_master(self, payload: bytes, replies: int) -> list[Any]:
        """``_round_trip`` for a sentinel URL: sent again once to the master found afresh
        when no master could be reached or the server answered as a replica."""
        try:
            async with asyncio.timeout(self.timeout):
                for attempt in range(1, MASTER_ATTEMPTS + 1):
                    try:
                        connection = await self._connected()
                    except OSError:
                        self.drop()
                        if attempt == MASTER_ATTEMPTS:
                            raise
                        continue
                    answers = await asyncio.gather(
                        *connection.send(payload, replies), return_exceptions=True
                    )
                    for answer in answers:
                        if isinstance(answer, RespError) and str(answer).startswith(
                            NOT_MASTER_ERRORS
                        ):
                            self.drop()
                            if attempt == MASTER_ATTEMPTS:
                                raise NotMasterError(str(answer))
                            break
                        if isinstance(answer, BaseException):
                            raise answer
                    else:
                        return list(answers)
                raise AssertionError("unreachable")  # the last attempt returns or raises
        except (OSError, TimeoutError):
            self.drop()
            raise

    def drop(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


class Script:
    """A Lua script and its SHA1 digest (``EVALSHA``)."""

    def __init__(self, source: str) -> None:
        self.source = source.encode()
        self.sha = hashlib.sha1(self.source, usedforsecurity=False).hexdigest().encode()
        # The command's name and first argument, encoded: run by digest, or whole.
        self.by_sha = _bulks([b"EVALSHA", self.sha])[0]
        self.whole = _bulks([b"EVAL", self.source])[0]


_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Client] = weakref.WeakKeyDictionary()


def client(url: str, timeout: float) -> Client:
    """This event loop's client of ``url`` (a connection belongs to the loop that made it)."""
    loop = asyncio.get_running_loop()
    held = _clients.get(loop)
    if held is None or held.url != url or held.timeout != timeout:
        if held is not None:
            held.drop()
        held = _clients[loop] = Client(url, timeout)
    return held
