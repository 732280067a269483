"""What this process read from the database, kept in memory: one kind of cache for endpoint
states (``services.endpoint_directory``), legacy sessions (``services.sessions``) and bearer-token
lookups (``auth.bearer``).

A ``ProcessCache`` is a thread-safe LRU whose entries remember when they were read. A reader
trusts an entry up to an age it chooses (``fresh``): the re-check interval of a cache that
invalidations keep right, a token lookup's TTL. Invalidations (``forget``) drop entries and
bump an epoch; a value read before an invalidation landed but stored after it (``put`` with
the epoch seen before the read) is served once and re-read at next use, so a missed drop
never outlives a read. ``aload`` runs one load per key for every concurrent caller: a burst
of requests for a key that must be (re)read waits for the one read instead of each querying.
While the database is unreachable, a caller may go on serving an entry however old
(``held``) and try again a second later (``keep_serving``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from mcp_app.services.database import in_thread

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# An entry kept while the database is down is tried again this long after.
KEEP_SERVING_RETRY_SECONDS = 1.0


@dataclass(slots=True)
class Entry(Generic[V]):
    value: V
    checked_at: float  # the cache's clock when ``value`` was read (-inf: re-read at next use)


class ProcessCache(Generic[K, V]):
    """Values by key, at most ``size`` (least recently stored dropped first)."""

    def __init__(self, size: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._size = size
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[K, Entry[V]] = OrderedDict()
        self._loading: dict[K, concurrent.futures.Future[V]] = {}
        # Loads running on their own, referenced until they end (a bare task may be collected).
        self._loads: set[asyncio.Task[None]] = set()
        self._epoch = 0

    @property
    def epoch(self) -> int:
        """Take it before reading what ``put`` will store."""
        return self._epoch

    def fresh(self, key: K, max_age: float) -> Entry[V] | None:
        """The entry for ``key`` if it was read at most ``max_age`` seconds ago.

        No lock and no reordering (a dict read is atomic): the hot path reads this once per
        request, and an entry in use is stored again at least every ``max_age`` seconds,
        which keeps it among the recently stored.
        """
        entry = self._entries.get(key)
        if entry is None or self._clock() - entry.checked_at > max_age:
            return None
        return entry

    def held(self, key: K) -> Entry[V] | None:
        """The entry for ``key`` however old (to go on while the database is down)."""
        return self._entries.get(key)

    def put(self, key: K, value: V, epoch: int | None = None) -> Entry[V]:
        """Store ``value``, read when the epoch was ``epoch`` (None: no invalidation applies).

        Read before an invalidation landed, it is returned to its reader but re-read at next
        use.
        """
        with self._lock:
            stale = epoch is not None and epoch != self._epoch
            entry = Entry(value, float("-inf") if stale else self._clock())
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return entry

    def keep_serving(self, entry: Entry[V], max_age: float) -> None:
        """Serve ``entry`` a little longer (the database is down): it is tried again in a
        second, not after a whole ``max_age``."""
        entry.checked_at = self._clock() - max_age + KEEP_SERVING_RETRY_SECONDS

    def forget(
        self,
        keys: Collection[K] = (),
        *,
        where: Callable[[K, V], bool] | None = None,
        everything: bool = False,
    ) -> None:
        """Drop ``keys``, the entries ``where`` holds for, or all; reads running meanwhile
        are re-read at next use (even when nothing is dropped)."""
        with self._lock:
            self._epoch += 1
            if everything:
                self._entries.clear()
                return
            for key in keys:
                self._entries.pop(key, None)
            if where is not None:
                for key in [k for k, entry in self._entries.items() if where(k, entry.value)]:
                    del self._entries[key]

    def clear(self) -> None:
        self.forget(everything=True)

    async def aload(self, key: K, load: Callable[[K], V]) -> V:
        """Run ``load(key)`` on the thread pool once for every concurrent caller.

        ``load`` stores what it read (with ``put``) and returns it. The load runs in a task
        of its own: a caller cancelled by its client does not fail it for the others.
        """
        with self._lock:
            future = self._loading.get(key)
            owner = future is None
            if future is None:
                future = self._loading[key] = concurrent.futures.Future()
        if owner:
            task = asyncio.get_running_loop().create_task(self._load_into(key, load, future))
            self._loads.add(task)
            task.add_done_callback(self._loads.discard)
        return await asyncio.shield(asyncio.wrap_future(future))

    async def _load_into(
        self, key: K, load: Callable[[K], V], future: concurrent.futures.Future[V]
    ) -> None:
        try:
            result = await in_thread(load)(key)
        except BaseException as exc:
            future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        else:
            future.set_result(result)
        finally:
            with self._lock:
                if self._loading.get(key) is future:
                    del self._loading[key]
