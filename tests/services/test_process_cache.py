"""The one per-process cache (endpoint states, sessions, token lookups): its age rule, the
epoch that keeps a read from outliving an invalidation, its size bound and single-flight
loads."""

from __future__ import annotations

import asyncio
import threading

import pytest

from mcp_app.services.process_cache import ProcessCache


def clocked(size: int = 8) -> tuple[ProcessCache[str, int], list[float]]:
    now = [100.0]
    return ProcessCache(size, clock=lambda: now[0]), now


def test_an_entry_is_fresh_up_to_the_age_its_reader_allows():
    cache, now = clocked()
    cache.put("a", 1)
    now[0] += 5.0
    assert cache.fresh("a", 5.0).value == 1
    assert cache.fresh("a", 4.9) is None
    # However old, the entry is still held (for when the database is down).
    assert cache.held("a").value == 1


def test_a_read_that_overlapped_an_invalidation_is_served_once_then_reread():
    cache, _ = clocked()
    epoch = cache.epoch
    cache.forget(["elsewhere"])  # lands while "a" is being read
    entry = cache.put("a", 1, epoch)
    assert entry.value == 1
    assert cache.fresh("a", 60.0) is None
    # Read after the invalidation: trusted.
    cache.put("a", 2, cache.epoch)
    assert cache.fresh("a", 60.0).value == 2


def test_forget_drops_keys_matches_or_everything():
    cache, _ = clocked()
    for key, value in {"a": 1, "b": 2, "c": 3, "d": 4}.items():
        cache.put(key, value)
    cache.forget(["a"])
    cache.forget(where=lambda key, value: value % 2 == 0)
    assert [key for key in "abcd" if cache.held(key)] == ["c"]
    cache.forget(everything=True)
    assert cache.held("c") is None


def test_the_least_recently_stored_entries_go_beyond_the_size():
    cache, _ = clocked(size=2)
    for key in "abc":
        cache.put(key, 0)
    cache.put("b", 0)  # stored again: now the most recent
    cache.put("d", 0)
    assert [key for key in "abcd" if cache.held(key)] == ["b", "d"]


def test_an_entry_kept_while_the_database_is_down_is_tried_again_in_a_second():
    cache, now = clocked()
    entry = cache.put("a", 1)
    now[0] += 120.0
    cache.keep_serving(entry, 60.0)
    assert cache.fresh("a", 60.0) is not None
    now[0] += 1.5
    assert cache.fresh("a", 60.0) is None


async def test_concurrent_loads_of_a_key_run_once_and_a_cancelled_waiter_fails_none():
    cache: ProcessCache[str, int] = ProcessCache(8)
    release = threading.Event()
    loads: list[str] = []

    def load(key: str) -> int:
        loads.append(key)
        release.wait(10)
        return cache.put(key, 42).value

    waiters = [asyncio.ensure_future(cache.aload("a", load)) for _ in range(5)]
    await asyncio.sleep(0.05)
    waiters[0].cancel()  # the one that started the load
    release.set()
    results = await asyncio.gather(*waiters[1:])
    assert results == [42] * 4
    assert loads == ["a"]
    assert waiters[0].cancelled()


async def test_a_failed_load_fails_its_waiters_and_the_next_load_runs_again():
    cache: ProcessCache[str, int] = ProcessCache(8)
    attempts: list[int] = []

    def load(key: str) -> int:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("database down")
        return 7

    with pytest.raises(ConnectionError):
        await cache.aload("a", load)
    assert await cache.aload("a", load) == 7
