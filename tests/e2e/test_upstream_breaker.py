"""The circuit breaker of an upstream MCP server counts the upstream's failures, not its tools'.

A tool that runs past the upstream's call timeout while the upstream still answers (a ping in
the same session) is slow, not down: the call is an error result recorded as timed out, and
the upstream's other tools keep working. An upstream that answers nothing at all still opens
its breaker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections
from mcp import Client

from mcp_app.models import CallLog, Upstream
from tests.support.catalog import make_endpoint
from tests.support.live import flush_database, wait_until_idle
from tests.support.mcp_upstream import upstream_process, upstream_row, upstream_tool
from tests.support.mcp_upstream_server import RunningUpstream
from tests.support.upstream import Upstream as HttpUpstream
from tests.support.upstream import run_upstream

pytestmark = pytest.mark.django_db
SLUG = "e2e-up-breaker"
# Short enough to keep the test quick, long enough for a loaded machine to open a session.
CALL_TIMEOUT = 2.0


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: Any) -> Iterator[RunningUpstream]:
    yield from upstream_process(tmp_path_factory, "e2e-up-breaker")


@pytest.fixture(scope="module")
def hung() -> Iterator[HttpUpstream]:
    """An HTTP server that accepts every request and answers none (``/slow``) in time."""
    with run_upstream() as running:
        yield running


@pytest.fixture(scope="module")
def server(
    live_server_url: str, upstream: RunningUpstream, hung: HttpUpstream, django_db_blocker: Any
) -> Iterator[str]:
    with django_db_blocker.unblock():
        for name, url in (("breaker-up", upstream.url), ("breaker-hung", hung.url("/slow"))):
            upstream_row(
                name,
                url,
                call_timeout=CALL_TIMEOUT,
                failure_threshold=2,
                cooldown_seconds=600,
            )
        endpoint = make_endpoint(SLUG)
        endpoint.tools.add(
            upstream_tool("up_slow", "breaker-up", "slow"),
            upstream_tool("up_echo", "breaker-up", "echo"),
            upstream_tool("hung_echo", "breaker-hung", "echo"),
        )
    yield live_server_url
    flush_database(django_db_blocker)


def _statuses(target: str) -> list[str]:
    try:
        rows = CallLog.objects.filter(endpoint_slug=SLUG, target=target).order_by("id")
        return [row.status for row in rows]
    finally:
        connections.close_all()  # this thread's own connection


async def test_a_slow_tool_times_out_without_opening_the_breaker(server):
    async with asyncio.timeout(60), Client(f"{server}/mcp/{SLUG}", mode="legacy") as client:
        slow = [await client.call_tool("up_slow", {"seconds": 60}) for _ in range(3)]
        echoed = await client.call_tool("up_echo", {"text": "still here"})
    assert all(result.is_error for result in slow)
    # Past the threshold (2), yet no call failed fast: each reached the upstream.
    assert all("the tool is slow" in result.content[0].text for result in slow)
    assert not echoed.is_error and echoed.content[0].text == "still here"
    row = await Upstream.objects.aget(name="breaker-up")
    assert not row.circuit_open and row.consecutive_failures == 0
    await asyncio.to_thread(wait_until_idle, server)
    assert await asyncio.to_thread(_statuses, "up_slow") == [CallLog.Status.TIMED_OUT] * 3


async def test_an_upstream_that_answers_nothing_opens_its_breaker(server):
    async with asyncio.timeout(60), Client(f"{server}/mcp/{SLUG}", mode="legacy") as client:
        hung = [await client.call_tool("hung_echo", {"text": "x"}) for _ in range(3)]
    assert all(result.is_error for result in hung)
    assert all("did not answer within" in result.content[0].text for result in hung[:2])
    assert "circuit breaker open" in hung[2].content[0].text
    row = await Upstream.objects.aget(name="breaker-hung")
    assert row.circuit_open and row.consecutive_failures == 2
    await asyncio.to_thread(wait_until_idle, server)
    assert await asyncio.to_thread(_statuses, "hung_echo") == [CallLog.Status.UPSTREAM_ERROR] * 3
