"""Bounded waits: poll until something holds, fail with what was awaited once time is up.

Tests never sleep for a fixed time to let something happen; they wait for it to have happened,
within a bound, with these two (the one for code on an event loop awaits an async predicate).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

# Long enough for a busy 2-core machine running the whole suite.
WAIT_SECONDS = 15.0


def wait_until(
    predicate: Callable[[], T],
    what: str,
    *,
    timeout: float = WAIT_SECONDS,
    interval: float = 0.05,
    detail: Callable[[], str] | None = None,
) -> T:
    """Call ``predicate`` until it returns something truthy, and return that.

    Raises:
        AssertionError: ``what`` did not happen within ``timeout`` seconds (with ``detail()``,
            e.g. a log, appended).
    """
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() >= deadline:
            raise AssertionError(_late(what, timeout, detail))
        time.sleep(interval)
    return value


async def await_until(
    predicate: Callable[[], T | Awaitable[T]],
    what: str,
    *,
    timeout: float = WAIT_SECONDS,
    interval: float = 0.05,
    detail: Callable[[], str] | None = None,
) -> T:
    """``wait_until`` on an event loop: ``predicate`` may be a coroutine function."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise AssertionError(_late(what, timeout, detail))
        await asyncio.sleep(interval)


def _late(what: str, timeout: float, detail: Callable[[], str] | None) -> str:
    message = f"{what}: not within {timeout:g} s"
    return f"{message}\n{detail()}" if detail is not None else message
