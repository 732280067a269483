"""Coarse deadlines behave as asyncio.timeout() does, a tick late at most."""

from __future__ import annotations

import asyncio

import pytest

from mcp_app.services import deadlines
from mcp_app.services.deadlines import TICK_SECONDS, Deadline

# Generous for a loaded machine: the point is "fires", not "fires on time".
BOUND_SECONDS = 5.0


def test_an_overdue_block_raises_timeout_error() -> None:
    async def run() -> Deadline:
        deadline = Deadline(0.01)
        with pytest.raises(TimeoutError):
            async with deadline:
                await asyncio.sleep(BOUND_SECONDS)
        return deadline

    deadline = asyncio.run(run())
    assert deadline.expired()


def test_a_block_that_finishes_in_time_is_untouched() -> None:
    async def run() -> tuple[str, Deadline]:
        deadline = Deadline(BOUND_SECONDS)
        async with deadline:
            await asyncio.sleep(0)
            value = "done"
        # Past the next tick: a disarmed deadline must not cancel anything later.
        await asyncio.sleep(TICK_SECONDS * 2)
        return value, deadline

    value, deadline = asyncio.run(run())
    assert value == "done" and not deadline.expired()


def test_a_timeout_error_of_the_block_itself_is_not_the_deadline() -> None:
    async def run() -> Deadline:
        deadline = Deadline(BOUND_SECONDS)
        with pytest.raises(TimeoutError):
            async with deadline:
                raise TimeoutError("upstream")
        return deadline

    assert not asyncio.run(run()).expired()


def test_a_cancel_from_outside_stays_a_cancel() -> None:
    async def run() -> None:
        async def guarded() -> None:
            async with Deadline(BOUND_SECONDS):
                await asyncio.sleep(BOUND_SECONDS)

        task = asyncio.create_task(guarded())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())


def test_nested_deadlines_fire_the_inner_one_only() -> None:
    async def run() -> tuple[Deadline, Deadline, str]:
        outer, inner = Deadline(BOUND_SECONDS), Deadline(0.01)
        async with outer:
            try:
                async with inner:
                    await asyncio.sleep(BOUND_SECONDS)
            except TimeoutError:
                caught = "inner"
        return outer, inner, caught

    outer, inner, caught = asyncio.run(run())
    assert caught == "inner" and inner.expired() and not outer.expired()


def test_the_sweeper_ends_when_nothing_is_armed() -> None:
    async def run() -> bool:
        async with Deadline(BOUND_SECONDS):
            pass
        sweeper = deadlines._sweepers[asyncio.get_running_loop()]
        assert sweeper.task is not None
        async with asyncio.timeout(BOUND_SECONDS):
            while sweeper.task is not None:
                await asyncio.sleep(TICK_SECONDS / 2)
        return True

    assert asyncio.run(run())


def test_later_runs_its_callback_unless_cancelled_first() -> None:
    async def run() -> list[str]:
        ran: list[str] = []
        deadlines.Later(0, lambda: ran.append("kept"))
        deadlines.Later(0, lambda: ran.append("cancelled")).cancel()
        async with asyncio.timeout(BOUND_SECONDS):
            while not ran:
                await asyncio.sleep(TICK_SECONDS / 2)
        await asyncio.sleep(TICK_SECONDS * 2)
        return ran

    assert asyncio.run(run()) == ["kept"]
