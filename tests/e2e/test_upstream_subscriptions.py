"""Subscriptions to a resource an upstream MCP server serves, relayed there, in both eras.

The upstream is the SDK's server (``--subscriptions``: ``up://ticker``, which tells its
subscribers whenever ``tick`` runs); our endpoint, in a live Daphne process, serves it as
``ours://ticker``. A legacy client subscribes with ``resources/subscribe``, a 2026-07-28
client with ``subscriptions/listen``; each hears the upstream's updates, the upstream is told
when they stop, and a restarted upstream is subscribed to again.
"""

from __future__ import annotations

import asyncio
import contextlib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPDeprecationWarning

from mcp_app.models import Resource
from tests.support.catalog import make_endpoint
from tests.support.live import flush_database, free_port
from tests.support.mcp_upstream import upstream_row
from tests.support.mcp_upstream_server import RunningUpstream, run_mcp_upstream

pytestmark = pytest.mark.django_db
SLUG = "e2e-up-subs"
URI = "ours://ticker"


@pytest.fixture(scope="module")
def port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def markers(tmp_path_factory: Any) -> Path:
    return tmp_path_factory.mktemp("e2e-up-subs")


@pytest.fixture(scope="module")
def server(live_server_url: str, port: int, django_db_blocker: Any) -> Iterator[str]:
    with django_db_blocker.unblock():
        # Each test runs (and restarts) the upstream itself, on this port. A short idle time
        # makes the web process look at its sessions (and their subscribers) every second.
        up = upstream_row("subs-up", f"http://127.0.0.1:{port}/mcp", session_idle_seconds=2)
        resource = Resource(uri=URI, name="ticker", upstream=up, remote_uri="up://ticker")
        resource.full_clean()
        resource.save()
        make_endpoint(SLUG).resources.add(resource)
    yield f"{live_server_url}/mcp/{SLUG}"
    flush_database(django_db_blocker)


def upstream_saw(markers: Path) -> list[str]:
    """The subscribes and unsubscribes the upstream received, in order."""
    path = markers / "subscriptions"
    return path.read_text().splitlines() if path.exists() else []


async def tick(running: RunningUpstream) -> int:
    """Change the ticker upstream; return how many upstream sessions it told."""
    async with Client(running.url, mode="legacy") as direct:
        result = await direct.call_tool("tick", {})
    return int(result.content[0].text)


async def tick_until_heard(running: RunningUpstream, heard: asyncio.Queue[str]) -> str:
    """Tick until an update reaches our client; return the URI it named.

    Our client's and our own streams open on their own schedule after a (re)subscription:
    an update sent before both are open is lost, so the ticks go on until one arrives.
    """
    while True:
        await tick(running)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.5):
                return await heard.get()


@contextlib.contextmanager
def legacy_subscriptions() -> Iterator[None]:
    with warnings.catch_warnings():
        # resources/subscribe is removed as of 2026-07-28; legacy sessions still have it.
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        yield


@pytest.mark.spec("2025-11-25", "server/resources", "notifications/resources/updated")
async def test_a_legacy_subscription_is_relayed_upstream_and_survives_its_restart(
    server: str, port: int, markers: Path
) -> None:
    heard: asyncio.Queue[str] = asyncio.Queue()

    async def on_message(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/resources/updated":
            heard.put_nowait(message.params.uri)

    async with (
        asyncio.timeout(90),
        Client(server, mode="legacy", message_handler=on_message) as client,
    ):
        with run_mcp_upstream(markers, port=port, subscriptions=True) as running:
            with legacy_subscriptions():
                await client.subscribe_resource(URI)
            assert upstream_saw(markers) == ["subscribe up://ticker"]
            assert await tick_until_heard(running, heard) == URI
        # The upstream restarts and forgets every session: ours is opened and subscribed
        # again without any request of the client's.
        with run_mcp_upstream(markers, port=port, subscriptions=True) as running:
            assert await tick_until_heard(running, heard) == URI
            assert upstream_saw(markers) == ["subscribe up://ticker"] * 2
            with legacy_subscriptions():
                await client.unsubscribe_resource(URI)
            assert upstream_saw(markers)[-1] == "unsubscribe up://ticker"
            assert await tick(running) == 0
            while not heard.empty():  # updates sent before the unsubscribe
                heard.get_nowait()
            contents = await client.read_resource(URI)  # a round trip after the tick
    assert contents.contents[0].text.startswith("tick ")
    assert heard.empty()


@pytest.mark.spec("2026-07-28", "basic/patterns/subscriptions", "resourceSubscriptions")
async def test_a_listen_stream_hears_an_upstream_resource_until_it_closes(
    server: str, port: int, markers: Path
) -> None:
    async with (
        asyncio.timeout(60),
        Client(server, mode="2026-07-28") as client,
    ):
        with run_mcp_upstream(markers, port=port, subscriptions=True) as running:
            seen = len(upstream_saw(markers))
            heard: asyncio.Queue[str] = asyncio.Queue()
            async with client.listen(resource_subscriptions=[URI]) as sub:
                assert sub.honored.resource_subscriptions == [URI]
                assert upstream_saw(markers)[seen:] == ["subscribe up://ticker"]

                async def read() -> None:
                    async for event in sub:
                        if isinstance(event, ResourceUpdated):
                            heard.put_nowait(event.uri)

                reader = asyncio.create_task(read())
                try:
                    assert await tick_until_heard(running, heard) == URI
                finally:
                    reader.cancel()
            # The stream closed: the upstream is told once our side notices.
            while upstream_saw(markers)[-1] != "unsubscribe up://ticker":
                await asyncio.sleep(0.05)
            assert await tick(running) == 0


async def test_a_session_that_ends_ends_its_upstream_subscription(
    server: str, port: int, markers: Path
) -> None:
    with run_mcp_upstream(markers, port=port, subscriptions=True) as running:
        async with asyncio.timeout(60):
            async with Client(server, mode="legacy") as client:
                with legacy_subscriptions():
                    await client.subscribe_resource(URI)
                assert upstream_saw(markers)[-1] == "subscribe up://ticker"
            # The client ended its session (DELETE) without unsubscribing: the process
            # holding the subscription notices at its next look.
            while upstream_saw(markers)[-1] != "unsubscribe up://ticker":
                await asyncio.sleep(0.05)
            assert await tick(running) == 0
