"""Catalog edits publish the right change, to the right endpoints, once committed.

Real channel layer (Redis under the test command): the test joins the endpoints' groups as a
stream would and reads what the edits published. Everything runs on one event loop (the
channel layer's connections belong to it); the edits run in a worker thread and commit, as
an admin request does.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import transaction

from mcp_app.models import Endpoint, PromptArgument
from mcp_app.services import notify
from mcp_app.services.catalog_writes import (
    endpoint_create,
    prompt_create,
    resource_create,
    tool_create,
)

pytestmark = pytest.mark.django_db(transaction=True)

SENTINEL = {"type": "test.sentinel"}


class Stream:
    """A listener of one endpoint's group, like an open client stream."""

    def __init__(self, endpoint_id: int) -> None:
        self.group = notify.endpoint_group(endpoint_id)
        self.listener = notify.GroupListener(self.group)

    async def open(self) -> Stream:
        await self.listener.__aenter__()
        return self

    async def receive(self) -> dict[str, Any] | None:
        return await self.listener.next(5)

    async def next_is_sentinel(self) -> bool:
        """Send a marker through the group: True when nothing was queued before it."""
        await notify._asend(self.group, SENTINEL)
        return await self.receive() == SENTINEL

    async def close(self) -> None:
        await self.listener.__aexit__(None, None, None)


@pytest.fixture
async def stream_of() -> AsyncIterator[Callable[[Endpoint], Any]]:
    streams: list[Stream] = []

    async def open_stream(endpoint: Endpoint) -> Stream:
        streams.append(await Stream(endpoint.pk).open())
        return streams[-1]

    yield open_stream
    for stream in streams:
        await stream.close()


def committed(change: Callable[[], Any]) -> Any:
    """Run ``change`` in a worker thread, in its own committed transaction."""

    def run() -> Any:
        with transaction.atomic():
            return change()

    return sync_to_async(run)()


@pytest.fixture
async def endpoints() -> tuple[Endpoint, Endpoint]:
    watched = await committed(lambda: endpoint_create(slug="watched"))
    elsewhere = await committed(lambda: endpoint_create(slug="elsewhere"))
    return watched, elsewhere


def echo_tool(endpoints: list[Endpoint]) -> Callable[[], Any]:
    return lambda: tool_create(
        name="echo", kind="python", config={"function": "echo"}, endpoints=endpoints
    )


async def test_editing_a_tool_tells_only_its_endpoints(endpoints, stream_of):
    watched, elsewhere = endpoints
    tool = await committed(echo_tool([watched]))
    stream, other = await stream_of(watched), await stream_of(elsewhere)

    def edit() -> None:
        tool.description = "Echoes, edited."
        tool.save()

    await committed(edit)
    assert await stream.receive() == {"type": notify.LIST_CHANGED, "kinds": ["tools"]}
    assert await stream.next_is_sentinel()
    assert await other.next_is_sentinel()


async def test_attaching_a_tool_is_a_tools_change(endpoints, stream_of):
    watched, _ = endpoints
    tool = await committed(echo_tool([]))
    stream = await stream_of(watched)
    await committed(lambda: watched.tools.add(tool))
    assert await stream.receive() == {"type": notify.LIST_CHANGED, "kinds": ["tools"]}


async def test_saving_a_resource_announces_the_list_and_the_content(endpoints, stream_of):
    watched, _ = endpoints
    resource = await committed(
        lambda: resource_create(uri="doc://a", name="a", text="one", endpoints=[watched])
    )
    stream = await stream_of(watched)

    def edit() -> None:
        resource.text = "two"
        resource.save()

    await committed(edit)
    assert [await stream.receive(), await stream.receive()] == [
        {"type": notify.LIST_CHANGED, "kinds": ["resources"]},
        {"type": notify.RESOURCE_UPDATED, "uri": "doc://a"},
    ]


async def test_a_new_prompt_argument_is_a_prompts_change(endpoints, stream_of):
    watched, _ = endpoints
    prompt = await committed(
        lambda: prompt_create(name="greet", description="Greets.", endpoints=[watched])
    )
    stream = await stream_of(watched)
    await committed(lambda: PromptArgument.objects.create(prompt=prompt, name="who"))
    assert await stream.receive() == {"type": notify.LIST_CHANGED, "kinds": ["prompts"]}


async def test_renaming_an_endpoint_changes_no_list(endpoints, stream_of):
    watched, _ = endpoints
    stream = await stream_of(watched)

    def rename() -> None:
        watched.title = "Renamed"
        watched.save()

    await committed(rename)
    assert await stream.next_is_sentinel()


async def test_nothing_is_published_when_the_edit_rolls_back(endpoints, stream_of):
    watched, _ = endpoints
    tool = await committed(echo_tool([watched]))
    stream = await stream_of(watched)

    class Abandoned(Exception):
        pass

    def edit_then_fail() -> None:
        tool.description = "Never committed."
        tool.save()
        raise Abandoned

    with pytest.raises(Abandoned):
        await committed(edit_then_fail)
    assert await stream.next_is_sentinel()


async def test_listeners_of_a_group_share_one_channel_and_outlive_each_other() -> None:
    group = notify.session_group("shared")
    first, second = notify.GroupListener(group), notify.GroupListener(group)
    other = notify.GroupListener(notify.session_group("other"))
    async with first, other:
        async with second:
            hub = notify._hubs[asyncio.get_running_loop()]
            # One channel for the process: no receive buffer or parked tasks per stream.
            assert set(hub.listeners) == {group, notify.session_group("other")}
            await notify._asend(group, SENTINEL)
            assert await first.next(5) == SENTINEL
            assert await second.next(5) == SENTINEL
        # The group stays joined while one of its listeners is left.
        await notify._asend(group, SENTINEL)
        assert await first.next(5) == SENTINEL
        assert await other.next(0.2) is None
    assert not hub.listeners and hub.receiver is None
