"""Bulk catalog changes are announced once: per transaction, and per stream and window.

Real Redis under the test command: invalidations are counted on their pub/sub channel as
another process would hear them, and list_changed on a group listener as a stream would
receive it. Edits run in a worker thread and commit, as an admin request or an import does.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import redis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.test import override_settings

from mcp_app.models import Endpoint, Tool
from mcp_app.services import invalidation, notify
from mcp_app.services.catalog_writes import endpoint_create, tool_create

pytestmark = pytest.mark.django_db(transaction=True)

SENTINEL = {"type": "test.sentinel"}
END_OF_TEST = b"test-end-of-pushes"
WAIT_SECONDS = 10.0


def committed(change: Callable[[], Any]) -> Any:
    """Run ``change`` in a worker thread, in its own committed transaction."""

    def run() -> Any:
        with transaction.atomic():
            return change()

    return sync_to_async(run)()


class Pushes:
    """The invalidations published on this installation's channel, as another process hears."""

    def __init__(self) -> None:
        self.client = redis.Redis.from_url(settings.REDIS_URL)
        self.pubsub = self.client.pubsub()
        self.pubsub.subscribe(invalidation.invalidation_channel())
        # Subscribed once Redis confirms: nothing published after that is missed.
        confirmed = self.pubsub.get_message(timeout=WAIT_SECONDS)
        assert confirmed is not None and confirmed["type"] == "subscribe"

    def naming(self, endpoint_id: int) -> int:
        """How many pushes so far name ``endpoint_id`` (read up to a marker sent now)."""
        self.client.publish(invalidation.invalidation_channel(), END_OF_TEST)
        count = 0
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            message = self.pubsub.get_message(timeout=1.0)
            if message is None or message["type"] != "message":
                continue
            if message["data"] == END_OF_TEST:
                return count
            parsed = invalidation.Invalidation.decode(message["data"])
            count += parsed is not None and endpoint_id in parsed.endpoint_ids
        raise AssertionError("the marker push never arrived")

    def close(self) -> None:
        self.pubsub.close()
        self.client.close()


@pytest.fixture
def pushes() -> Iterator[Pushes]:
    subscriber = Pushes()
    yield subscriber
    subscriber.close()


@pytest.fixture
async def listener_of() -> AsyncIterator[Callable[[Endpoint], Any]]:
    listeners: list[notify.GroupListener] = []

    async def open_listener(endpoint: Endpoint) -> notify.GroupListener:
        listener = notify.GroupListener(notify.endpoint_group(endpoint.pk))
        await listener.__aenter__()
        listeners.append(listener)
        return listener

    yield open_listener
    for listener in listeners:
        await listener.__aexit__(None, None, None)


async def until_sentinel(listener: notify.GroupListener) -> list[dict[str, Any]]:
    """Everything the listener got before a marker sent through its group now."""
    await notify._asend(listener.groups[0], SENTINEL)
    received = []
    while (message := await listener.next(WAIT_SECONDS)) != SENTINEL:
        assert message is not None, "the sentinel never arrived"
        received.append(message)
    return received


def three_hundred_tools(endpoint: Endpoint) -> Callable[[], None]:
    def change() -> None:
        for number in range(300):
            tool_create(
                name=f"tool_{number}",
                kind="python",
                config={"function": "echo"},
                endpoints=[endpoint],
            )

    return change


@override_settings(MCP_LIST_CHANGED_COALESCE_SECONDS=0)
async def test_a_transaction_of_300_changes_invalidates_and_notifies_once(
    pushes: Pushes, listener_of: Any
) -> None:
    # No window on the stream: what it receives is what the transaction published.
    endpoint = await committed(lambda: endpoint_create(slug="bulk"))
    listener = await listener_of(endpoint)
    await sync_to_async(pushes.naming)(endpoint.pk)  # what creating the endpoint published

    await committed(three_hundred_tools(endpoint))

    assert await sync_to_async(pushes.naming)(endpoint.pk) == 1
    assert await until_sentinel(listener) == [{"type": notify.LIST_CHANGED, "kinds": ["tools"]}]
    assert await sync_to_async(Tool.objects.filter(endpoints=endpoint).count)() == 300


@override_settings(MCP_LIST_CHANGED_COALESCE_SECONDS=0)
async def test_a_transaction_touching_two_kinds_names_both_in_one_message(
    listener_of: Any,
) -> None:
    endpoint = await committed(lambda: endpoint_create(slug="mixed"))
    listener = await listener_of(endpoint)

    def change() -> None:
        tool_create(name="echo", kind="python", config={"function": "echo"}, endpoints=[endpoint])
        endpoint.prompts.create(name="hello", description="Says hello.")
        tool_create(name="echo2", kind="python", config={"function": "echo"}, endpoints=[endpoint])

    await committed(change)
    assert await until_sentinel(listener) == [
        {"type": notify.LIST_CHANGED, "kinds": ["prompts", "tools"]}
    ]


@override_settings(MCP_LIST_CHANGED_COALESCE_SECONDS=0)
async def test_a_change_after_a_rolled_back_savepoint_is_still_announced(
    pushes: Pushes, listener_of: Any
) -> None:
    endpoint = await committed(lambda: endpoint_create(slug="savepoint"))
    listener = await listener_of(endpoint)
    await sync_to_async(pushes.naming)(endpoint.pk)

    class Abandoned(Exception):
        pass

    def change() -> None:
        tool_create(name="kept", kind="python", config={"function": "echo"}, endpoints=[endpoint])
        try:
            with transaction.atomic():
                endpoint.prompts.create(name="dropped", description="Rolled back.")
                raise Abandoned
        except Abandoned:
            pass
        # Django replaced its list of commit hooks: this starts a batch of its own.
        endpoint.resources.create(uri="doc://kept", name="kept", text="kept")

    await committed(change)
    received = await until_sentinel(listener)
    kinds = {kind for message in received for kind in message["kinds"]}
    assert {"tools", "resources"} <= kinds
    assert await sync_to_async(pushes.naming)(endpoint.pk) >= 1


async def test_a_rolled_back_transaction_leaves_nothing_for_the_next_one(
    listener_of: Any,
) -> None:
    endpoint = await committed(lambda: endpoint_create(slug="rollback"))
    listener = await listener_of(endpoint)

    class Abandoned(Exception):
        pass

    def abandoned() -> None:
        endpoint.prompts.create(name="never", description="Never committed.")
        raise Abandoned

    with pytest.raises(Abandoned):
        await committed(abandoned)
    await committed(
        lambda: tool_create(
            name="echo", kind="python", config={"function": "echo"}, endpoints=[endpoint]
        )
    )
    # The prompts change died with its transaction; it is not published with the next one.
    assert await until_sentinel(listener) == [{"type": notify.LIST_CHANGED, "kinds": ["tools"]}]


WINDOW_SECONDS = 1.0


@override_settings(MCP_LIST_CHANGED_COALESCE_SECONDS=WINDOW_SECONDS)
async def test_a_burst_reaches_a_stream_once_per_window_and_its_last_change_is_kept() -> None:
    group = notify.endpoint_group(987_654)
    async with notify.GroupListener(group) as listener:
        started = time.monotonic()
        for _ in range(200):
            await notify._asend(group, {"type": notify.LIST_CHANGED, "kinds": ["tools"]})
        burst = time.monotonic() - started
        # The burst's first change goes out at once ...
        assert await listener.next(WAIT_SECONDS) == {
            "type": notify.LIST_CHANGED,
            "kinds": ["tools"],
        }
        received = 1
        # ... and the rest in one message per window, the last when its window closes.
        while await listener.next(WINDOW_SECONDS * 3) is not None:
            received += 1
        assert 2 <= received <= 2 + math.ceil(burst / WINDOW_SECONDS)


@override_settings(MCP_LIST_CHANGED_COALESCE_SECONDS=30)
async def test_a_held_kind_does_not_hold_back_another_kind() -> None:
    group = notify.endpoint_group(987_655)
    async with notify.GroupListener(group) as listener:
        for kinds in (["tools"], ["tools"], ["prompts"], ["resources", "tools"]):
            await notify._asend(group, {"type": notify.LIST_CHANGED, "kinds": kinds})
        await notify._asend(group, SENTINEL)
        received = []
        while (message := await listener.next(WAIT_SECONDS)) != SENTINEL:
            assert message is not None
            received.append(message["kinds"])
    # The second tools change waits for its window (30 s); the others are not held behind it.
    assert received == [["tools"], ["prompts"], ["resources"]]


@override_settings(MCP_LIST_CHANGED_COALESCE_SECONDS=30)
async def test_other_messages_are_never_held() -> None:
    group = notify.endpoint_group(987_656)
    async with notify.GroupListener(group) as listener:
        for _ in range(3):
            await notify._asend(group, {"type": notify.RESOURCE_UPDATED, "uri": "doc://a"})
        assert [await listener.next(WAIT_SECONDS) for _ in range(3)] == [
            {"type": notify.RESOURCE_UPDATED, "uri": "doc://a"}
        ] * 3


def test_redis_names_carry_the_installation_namespace() -> None:
    namespace = settings.REDIS_NAMESPACE
    assert invalidation.invalidation_channel() == f"{namespace}:invalidate"
    assert settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"].startswith(f"{namespace}:")
    assert settings.CACHES["default"]["KEY_PREFIX"] == namespace
