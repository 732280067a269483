"""Replayable SSE events of legacy streams, shared by every web process.

A 2025-11-25 client may lose a stream's connection (or the server may close it to have the
client poll) and resume with ``GET`` + ``Last-Event-ID`` on any web process
(2025-11-25 basic/transports, "Resumability and Redelivery"). Every event of such a stream
is kept here under the stream's id, for a bounded time and count, together with the session
that owns the stream, so a resume replays exactly the missed events of that stream and never
another stream's or another session's.

Redis backs the store when ``REDIS_URL`` is set; the embedded single-process setup keeps
events in process memory.
"""

from __future__ import annotations

import asyncio
import secrets
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import orjson
import redis.asyncio as aioredis
from django.conf import settings

from mcp_app.conf import get_conf, redis_key
from mcp_app.services import redis_sentinel

# Event ids are "<stream id>.<sequence>"; stream ids never contain a dot.
SEPARATOR = "."


@dataclass(frozen=True, slots=True)
class Event:
    id: str
    seq: int
    data: bytes


def new_stream_id() -> str:
    return secrets.token_urlsafe(12)


def event_id(stream_id: str, seq: int) -> str:
    return f"{stream_id}{SEPARATOR}{seq}"


def parse_event_id(value: str) -> tuple[str, int] | None:
    """Split an event id into (stream id, sequence); None for anything we did not issue."""
    stream_id, sep, seq = value.rpartition(SEPARATOR)
    if not sep or not stream_id or not seq.isdigit() or len(value) > 200:
        return None
    return stream_id, int(seq)


class EventStore(Protocol):
    async def open(self, stream_id: str, session_id: str, request_id: Any = None) -> None:
        """Register a stream of ``session_id``, answering JSON-RPC ``request_id`` if given."""
        ...

    async def owner(self, stream_id: str) -> str | None: ...

    async def request_of(self, stream_id: str) -> tuple[bool, Any]:
        """(found, the request id the stream answers): read when its process is gone."""
        ...

    async def append(self, stream_id: str, data: bytes) -> str:
        """Keep one event; return its id."""
        ...

    async def append_response(self, stream_id: str, data: bytes) -> str:
        """Keep the stream's response unless one was kept already; return that event's id.

        For processes answering an orphaned stream from the call's row: two may resume it
        at the same moment, and the request must still get one response, not two.
        """
        ...

    async def after(self, stream_id: str, seq: int) -> list[Event]:
        """Return the stream's events after ``seq``, oldest first."""
        ...


# KEYS: events, seq, owner, request, response; ARGV: data, ttl, max events. Returns the
# response's sequence number: the one kept before, or the new one.
_APPEND_RESPONSE = """
local kept = redis.call('GET', KEYS[5])
if kept then return tonumber(kept) end
local seq = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[1], seq, seq .. ':' .. ARGV[1])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -tonumber(ARGV[3]) - 1)
redis.call('SET', KEYS[5], seq, 'EX', ARGV[2])
for i = 1, 4 do redis.call('EXPIRE', KEYS[i], ARGV[2]) end
return seq
"""


class RedisEventStore:
    """Events in Redis: a sorted set per stream (score = sequence), all keys expiring."""

    def __init__(self, url: str, *, ttl_seconds: int, max_events: int) -> None:
        self.url = url
        self.ttl = ttl_seconds
        self.max_events = max_events
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis] = (
            weakref.WeakKeyDictionary()
        )

    def _redis(self) -> aioredis.Redis:
        # A client belongs to the event loop that created it.
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            # Retries a command once on a fresh connection after a Redis restart.
            client = redis_sentinel.async_client(self.url, **settings.REDIS_CLIENT_OPTIONS)
            self._clients[loop] = client
        return client

    @staticmethod
    def _keys(stream_id: str) -> tuple[str, str, str]:
        base = redis_key(f"sse:{stream_id}")
        return f"{base}:events", f"{base}:seq", f"{base}:owner"

    @staticmethod
    def _request_key(stream_id: str) -> str:
        return redis_key(f"sse:{stream_id}:request")

    @staticmethod
    def _response_key(stream_id: str) -> str:
        return redis_key(f"sse:{stream_id}:response")

    async def open(self, stream_id: str, session_id: str, request_id: Any = None) -> None:
        _, _, owner = self._keys(stream_id)
        async with self._redis().pipeline(transaction=False) as pipe:
            pipe.set(owner, session_id, ex=self.ttl)
            if request_id is not None:
                pipe.set(self._request_key(stream_id), orjson.dumps(request_id), ex=self.ttl)
            await pipe.execute()

    async def request_of(self, stream_id: str) -> tuple[bool, Any]:
        value = await self._redis().get(self._request_key(stream_id))
        return (False, None) if value is None else (True, orjson.loads(value))

    async def owner(self, stream_id: str) -> str | None:
        _, _, owner = self._keys(stream_id)
        value = await self._redis().get(owner)
        # The client returns bytes (no decode_responses); its types also allow str.
        return value.decode() if isinstance(value, bytes) else value

    async def append(self, stream_id: str, data: bytes) -> str:
        events, seq_key, owner = self._keys(stream_id)
        client = self._redis()
        seq = int(await client.incr(seq_key))
        async with client.pipeline(transaction=False) as pipe:
            pipe.zadd(events, {f"{seq}:".encode() + data: seq})
            # Keep the newest max_events; older ones can no longer be replayed.
            pipe.zremrangebyrank(events, 0, -self.max_events - 1)
            for key in (events, seq_key, owner, self._request_key(stream_id)):
                pipe.expire(key, self.ttl)
            await pipe.execute()
        return event_id(stream_id, seq)

    async def append_response(self, stream_id: str, data: bytes) -> str:
        events, seq_key, owner = self._keys(stream_id)
        keys = [events, seq_key, owner, self._request_key(stream_id), self._response_key(stream_id)]
        # One script, so the check and the append are atomic across processes.
        seq = await self._redis().eval(
            _APPEND_RESPONSE, len(keys), *keys, data, self.ttl, self.max_events
        )
        return event_id(stream_id, int(seq))

    async def after(self, stream_id: str, seq: int) -> list[Event]:
        events, _, _ = self._keys(stream_id)
        raw = await self._redis().zrangebyscore(events, f"({seq}", "+inf")
        found = []
        for member in raw:
            assert isinstance(member, bytes)  # no decode_responses: members come as bytes
            number, _, data = member.partition(b":")
            found.append(Event(event_id(stream_id, int(number)), int(number), data))
        return found


class MemoryEventStore:
    """Events in this process (the embedded setup): bounded per stream and by age."""

    def __init__(self, *, ttl_seconds: int, max_events: int, max_streams: int = 10_000) -> None:
        self.ttl = ttl_seconds
        self.max_events = max_events
        self.max_streams = max_streams
        self._streams: OrderedDict[str, tuple[str, float, list[tuple[int, bytes]]]] = OrderedDict()
        self._requests: dict[str, Any] = {}
        self._responses: dict[str, str] = {}

    def _expire(self) -> None:
        now = time.monotonic()
        while self._streams:
            stream_id, (_, touched, _) = next(iter(self._streams.items()))
            if now - touched < self.ttl and len(self._streams) <= self.max_streams:
                break
            del self._streams[stream_id]
            self._requests.pop(stream_id, None)
            self._responses.pop(stream_id, None)

    async def open(self, stream_id: str, session_id: str, request_id: Any = None) -> None:
        self._expire()
        self._streams[stream_id] = (session_id, time.monotonic(), [])
        if request_id is not None:
            self._requests[stream_id] = request_id

    async def request_of(self, stream_id: str) -> tuple[bool, Any]:
        found = stream_id in self._requests
        return found, self._requests.get(stream_id)

    async def owner(self, stream_id: str) -> str | None:
        self._expire()
        entry = self._streams.get(stream_id)
        return entry[0] if entry else None

    async def append(self, stream_id: str, data: bytes) -> str:
        session_id, _, events = self._streams.get(stream_id, ("", 0.0, []))
        seq = events[-1][0] + 1 if events else 1
        events.append((seq, data))
        del events[: -self.max_events]
        self._streams[stream_id] = (session_id, time.monotonic(), events)
        self._streams.move_to_end(stream_id)
        return event_id(stream_id, seq)

    async def append_response(self, stream_id: str, data: bytes) -> str:
        # append never yields, so no other resume runs between the check and the append.
        kept = self._responses.get(stream_id)
        if kept is None:
            kept = self._responses[stream_id] = await self.append(stream_id, data)
        return kept

    async def after(self, stream_id: str, seq: int) -> list[Event]:
        entry = self._streams.get(stream_id)
        if entry is None:
            return []
        return [Event(event_id(stream_id, n), n, data) for n, data in entry[2] if n > seq]


@lru_cache(maxsize=1)
def _store(redis_url: str, ttl: int, max_events: int) -> EventStore:
    if redis_url:
        return RedisEventStore(redis_url, ttl_seconds=ttl, max_events=max_events)
    return MemoryEventStore(ttl_seconds=ttl, max_events=max_events)


def get_event_store() -> EventStore:
    conf = get_conf()
    return _store(settings.REDIS_URL, conf.MCP_SSE_EVENT_TTL_SECONDS, conf.MCP_SSE_MAX_EVENTS)
