"""The replayable event store of legacy streams, on Redis and in memory."""

from __future__ import annotations

import asyncio
import os

import pytest

from mcp_app.services.events import (
    MemoryEventStore,
    RedisEventStore,
    event_id,
    new_stream_id,
    parse_event_id,
)


def stores() -> list[object]:
    made: list[object] = [MemoryEventStore(ttl_seconds=60, max_events=3)]
    if url := os.environ.get("REDIS_URL"):
        made.append(RedisEventStore(url, ttl_seconds=60, max_events=3))
    return made


@pytest.fixture(params=stores(), ids=lambda store: type(store).__name__)
def store(request: pytest.FixtureRequest) -> object:
    return request.param


async def test_events_after_an_id_come_back_in_order(store) -> None:
    stream = new_stream_id()
    await store.open(stream, "session-a")
    ids = [await store.append(stream, f"event {n}".encode()) for n in range(3)]
    _, seq = parse_event_id(ids[0])
    missed = await store.after(stream, seq)
    assert [(e.id, e.data) for e in missed] == [(ids[1], b"event 1"), (ids[2], b"event 2")]
    assert await store.owner(stream) == "session-a"


async def test_only_the_newest_events_are_kept(store) -> None:
    stream = new_stream_id()
    await store.open(stream, "s")
    for n in range(5):
        await store.append(stream, str(n).encode())
    assert [e.data for e in await store.after(stream, 0)] == [b"2", b"3", b"4"]


async def test_another_stream_replays_nothing_of_this_one(store) -> None:
    mine, other = new_stream_id(), new_stream_id()
    await store.open(mine, "s")
    await store.open(other, "s")
    await store.append(mine, b"mine")
    assert await store.after(other, 0) == []
    assert await store.owner(new_stream_id()) is None


async def test_a_response_appended_by_two_resumes_at_once_is_kept_once(store) -> None:
    stream = new_stream_id()
    await store.open(stream, "s", request_id=7)
    await store.append(stream, b"progress")
    response = b'{"jsonrpc":"2.0","id":7,"result":{}}'
    ids = await asyncio.gather(*(store.append_response(stream, response) for _ in range(2)))
    assert ids[0] == ids[1]
    assert [(e.id, e.data) for e in await store.after(stream, 1)] == [(ids[0], response)]


def test_event_ids_round_trip_and_foreign_ids_are_refused() -> None:
    assert parse_event_id(event_id("abc-_x", 7)) == ("abc-_x", 7)
    for foreign in ("", "7", "abc.", ".7", "abc.x", "a" * 300 + ".1"):
        assert parse_event_id(foreign) is None
