"""``asyncio.timeout()`` and ``call_later()`` for the hot path, at a tenth of a second's grain.

Every request arms two deadlines that almost never fire: the body must arrive within
``MCP_BODY_TIMEOUT_SECONDS`` and an inline tool must finish within
``MCP_INLINE_TOOL_TIMEOUT_SECONDS``.
``asyncio.timeout()`` schedules a timer for each, and creating and cancelling a timer costs
about 5 µs on uvloop (a libuv handle each time): a tenth of a whole ``tools/call``. Here a
deadline is an entry in a set, and one sweeper task per event loop looks at the set every
``TICK_SECONDS`` while it is not empty; a deadline fires at most one tick late. The sweeper
ends at the first tick that finds the set empty, so an idle process is not woken.

Semantics match ``asyncio.timeout()`` (Python 3.11): on expiry the task is cancelled, and the
``CancelledError`` leaving the block becomes ``TimeoutError``, unless something else cancelled
the task as well.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from types import TracebackType

logger = logging.getLogger(__name__)

# How late a deadline may fire. Inline tool and body limits are seconds long.
TICK_SECONDS = 0.1


class _Sweeper:
    """The deadlines armed on one event loop, and the task that fires the overdue ones."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.armed: set[Deadline | Later] = set()
        self.task: asyncio.Task[None] | None = None

    def arm(self, deadline: Deadline | Later) -> None:
        self.armed.add(deadline)
        if self.task is None:
            self.task = self.loop.create_task(self._sweep())

    async def _sweep(self) -> None:
        # Sleep first: most deadlines are disarmed before the sweeper's first step, and a
        # sweeper that ended at once would be recreated by the very next request.
        try:
            while True:
                await asyncio.sleep(TICK_SECONDS)
                if not self.armed:
                    return
                now = self.loop.time()
                for due in [d for d in self.armed if d.when <= now]:
                    self.armed.discard(due)
                    try:
                        due.fire()
                    except Exception:
                        logger.exception("A deadline's callback failed")
        finally:
            self.task = None


_sweepers: dict[asyncio.AbstractEventLoop, _Sweeper] = {}


def _sweeper(loop: asyncio.AbstractEventLoop) -> _Sweeper:
    found = _sweepers.get(loop)
    if found is None:
        # Loops come and go (tests, worker tasks): forget the closed ones.
        for old in [old for old in _sweepers if old.is_closed()]:
            del _sweepers[old]
        found = _sweepers[loop] = _Sweeper(loop)
    return found


class Deadline:
    """``async with Deadline(seconds):`` raises TimeoutError if the block runs past it."""

    __slots__ = ("_cancelling", "_expired", "_sweeper", "_task", "seconds", "when")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.when = 0.0
        self._expired = False
        self._cancelling = 0
        self._task: asyncio.Task[object] | None = None
        self._sweeper: _Sweeper | None = None

    def expired(self) -> bool:
        """Whether this deadline fired (a TimeoutError from inside the block is not it)."""
        return self._expired

    def fire(self) -> None:
        if self._task is not None and not self._task.done():
            self._expired = True
            self._task.cancel()

    async def __aenter__(self) -> Deadline:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("Deadline must be used inside a task")
        loop = task.get_loop()
        self._task = task
        self._cancelling = task.cancelling()
        self.when = loop.time() + self.seconds
        self._sweeper = _sweeper(loop)
        self._sweeper.arm(self)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        assert self._sweeper is not None and self._task is not None
        self._sweeper.armed.discard(self)
        expired = self._expired and exc_type is asyncio.CancelledError
        if expired and self._task.uncancel() <= self._cancelling:
            raise TimeoutError from exc


class Later:
    """A callback run about ``seconds`` from now (a tick late at most) unless cancelled first.

    For work that only matters when something takes long, such as watching for a client's
    disconnect: most requests end before it would start, and never pay for it.
    """

    __slots__ = ("_callback", "_sweeper", "when")

    def __init__(self, seconds: float, callback: Callable[[], object]) -> None:
        loop = asyncio.get_running_loop()
        self.when = loop.time() + seconds
        self._callback = callback
        self._sweeper = _sweeper(loop)
        self._sweeper.arm(self)

    def fire(self) -> None:
        self._callback()

    def cancel(self) -> None:
        self._sweeper.armed.discard(self)
