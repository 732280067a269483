"""A small pipelined Redis client for the rate limiter's hot path (``services/limits.py``).

redis-py's asyncio client costs about as much server CPU per command as the rest of a
``tools/call`` (a connection taken from and given back to its pool under a lock, arguments
encoded one by one, a pure-Python reply parser without hiredis, a retry wrapper). A limited
call needs one script run, so this client does only that: one connection per event loop, the
commands of every concurrent call written to it as they come (RESP2, replies in order) and
each answered from ``data_received``. Scripts run by ``EVALSHA``, falling back to ``EVAL``
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
"""

from __future__ import annotations

import asyncio
import hashlib
import ssl
import weakref
from collections import deque
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from mcp_app.services import redis_sentinel

Arg = bytes | str | int | float


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
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, bytes):
            data = arg
        elif isinstance(arg, str):
            data = arg.encode()
        else:
            data = repr(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


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
        # Commands written within one turn of the event loop go out in one write (under
        # load, many calls' commands share a system call, and their replies a read).
        self.outgoing: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        pos = 0
        try:
            while pos < len(self.buffer):
                value, pos = _parse(self.buffer, pos)
                waiter = self.waiters.popleft()
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

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_exception(ConnectionError("Redis connection lost"))

    def send(self, payload: bytes, replies: int) -> list[asyncio.Future[Any]]:
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in range(replies)]
        self.waiters.extend(futures)
        if not self.outgoing:
            loop.call_soon(self._flush)
        self.outgoing.append(payload)
        return futures

    def _flush(self) -> None:
        payload, self.outgoing = b"".join(self.outgoing), []
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
        async with asyncio.timeout(self.timeout):
            setup: list[list[Arg]] = []
            if target is not None:
                host, port = await self._master_address(target)
                transport, connection = await loop.create_connection(_Connection, host, port)
                if target.password:
                    setup.append(["AUTH", target.username or "default", target.password])
                if target.db:
                    setup.append(["SELECT", target.db])
                setup.append(["ROLE"])
            elif parts.scheme == "unix":
                transport, connection = await loop.create_unix_connection(_Connection, parts.path)
            else:
                transport, connection = await loop.create_connection(
                    _Connection,
                    parts.hostname or "127.0.0.1",
                    parts.port or 6379,
                    ssl=ssl.create_default_context() if parts.scheme == "rediss" else None,
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

    async def _master_address(self, target: redis_sentinel.SentinelTarget) -> tuple[str, int]:
        """Where the sentinels say the master is: the first of them to answer, each given an
        equal share of the timeout."""
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
                    _transport, connection = await loop.create_connection(_Connection, host, port)
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
        if self._sentinel is not None:
            return await self._pipeline_to_master(commands)
        try:
            async with asyncio.timeout(self.timeout):
                connection = await self._connected()
                futures = connection.send(b"".join(encode(c) for c in commands), len(commands))
                if len(futures) == 1:
                    return [await futures[0]]
                return list(await asyncio.gather(*futures))
        except (OSError, TimeoutError):
            self.drop()
            raise

    async def _pipeline_to_master(self, commands: Sequence[Sequence[Arg]]) -> list[Any]:
        """``pipeline`` for a sentinel URL: sent again once to the master found afresh when
        no master could be reached or the server answered as a replica."""
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
                    payload = b"".join(encode(c) for c in commands)
                    replies = await asyncio.gather(
                        *connection.send(payload, len(commands)), return_exceptions=True
                    )
                    for reply in replies:
                        if isinstance(reply, RespError) and str(reply).startswith(
                            NOT_MASTER_ERRORS
                        ):
                            self.drop()
                            if attempt == MASTER_ATTEMPTS:
                                raise NotMasterError(str(reply))
                            break
                        if isinstance(reply, BaseException):
                            raise reply
                    else:
                        return list(replies)
                raise AssertionError("unreachable")  # the last attempt returns or raises
        except (OSError, TimeoutError):
            self.drop()
            raise

    async def evalsha(self, script: Script, keys: Sequence[Arg], args: Sequence[Arg]) -> Any:
        """Run ``script`` (by its digest; sent whole once if Redis does not know it)."""
        command = [len(keys), *keys, *args]
        try:
            return (await self.pipeline([[b"EVALSHA", script.sha, *command]]))[0]
        except RespError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
        return (await self.pipeline([[b"EVAL", script.source, *command]]))[0]

    def drop(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


class Script:
    """A Lua script and its SHA1 digest (``EVALSHA``)."""

    def __init__(self, source: str) -> None:
        self.source = source.encode()
        self.sha = hashlib.sha1(self.source, usedforsecurity=False).hexdigest().encode()


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
