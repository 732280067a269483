"""Catalog edits reach connected clients, across processes, in both eras.

The edits are made in this test process (as the admin, the shell or a fixture would); the
clients are connected to Daphne and uvicorn processes; the notifications cross between them
through the Redis channel layer and must arrive on the right streams only.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import redis
from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client as AdminClient
from django.urls import reverse
from mcp import Client
from mcp.client.subscriptions import PromptsListChanged, ResourceUpdated, ToolsListChanged

from mcp_app.conf import get_conf
from mcp_app.models import Endpoint, Prompt, Resource, Tool
from mcp_app.services import invalidation
from mcp_app.services.catalog_io import catalog_export, catalog_import
from tests.support.admin_forms import tool_form
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.live import asgi_server, flush_database
from tests.support.notifications import (
    PROMPTS_CHANGED,
    Notifications,
    events_until,
    get_stream,
    next_methods,
)
from tests.support.raw_mcp import JSON_HEADERS, open_session

pytestmark = pytest.mark.django_db

SLUG = "notify"
URI = "notify://status"


@pytest.fixture(scope="module")
def endpoints(live_server_url: str, uvicorn_server_url: str, django_db_blocker: Any) -> Any:
    with django_db_blocker.unblock():
        endpoint = make_endpoint(SLUG)
        endpoint.tools.add(make_python_tool("echo", "echo"))
        endpoint.resources.add(
            Resource.objects.create(uri=URI, name="status", mime_type="text/plain", text="ok")
        )
        endpoint.prompts.add(Prompt.objects.create(name="hello", description="Says hello."))
        other = make_endpoint("notify-other")
        other.tools.add(make_python_tool("other_echo", "echo"))
    yield f"{live_server_url}/mcp/{SLUG}", f"{uvicorn_server_url}/mcp/{SLUG}"
    flush_database(django_db_blocker)


def edit(django_db_blocker: Any, change: Callable[[], Any]) -> Any:
    """Run a catalog edit committed in this process, as the admin would."""

    def run() -> Any:
        with django_db_blocker.unblock():
            return change()

    # channels' wrapper closes the thread's connection afterwards (CONN_MAX_AGE is 0 in tests).
    return database_sync_to_async(run, thread_sensitive=False)()


def touch_tool(name: str) -> Callable[[], None]:
    def change() -> None:
        tool = Tool.objects.get(name=name)
        tool.description += " (edited)"
        tool.save()

    return change


def set_resource_text(text: str) -> Callable[[], None]:
    def change() -> None:
        resource = Resource.objects.get(uri=URI)
        resource.text = text
        resource.save()

    return change


@pytest.mark.spec("2025-11-25", "server/tools", "notifications/tools/list_changed")
async def test_a_tool_edit_reaches_a_legacy_stream_held_by_another_process(
    endpoints, django_db_blocker
):
    daphne_url, uvicorn_url = endpoints
    async with httpx.AsyncClient(timeout=30) as client:
        session_id = await open_session(client, daphne_url)
        async with get_stream(client, uvicorn_url, session_id) as messages:
            await edit(django_db_blocker, touch_tool("echo"))
            assert await next_methods(messages, 1) == ["notifications/tools/list_changed"]


async def test_an_edit_on_another_endpoint_is_not_sent(endpoints, django_db_blocker):
    daphne_url, _ = endpoints

    def edit_prompt() -> None:
        prompt = Prompt.objects.get(name="hello")
        prompt.description += " Again."
        prompt.save()

    async with httpx.AsyncClient(timeout=30) as client:
        session_id = await open_session(client, daphne_url)
        async with get_stream(client, daphne_url, session_id) as messages:
            await edit(django_db_blocker, touch_tool("other_echo"))
            await edit(django_db_blocker, edit_prompt)
            # Messages keep their order: had the other endpoint's tool edit been sent here,
            # its tools/list_changed would come first.
            assert await next_methods(messages, 1) == ["notifications/prompts/list_changed"]


@pytest.mark.spec("2025-11-25", "server/resources", "notifications/resources/updated")
async def test_resource_updates_reach_its_subscribers_only(endpoints, django_db_blocker):
    daphne_url, uvicorn_url = endpoints
    async with httpx.AsyncClient(timeout=30) as client:
        subscriber = await open_session(client, daphne_url)
        bystander = await open_session(client, daphne_url)
        subscribed = await client.post(
            daphne_url,
            headers={**JSON_HEADERS, "mcp-session-id": subscriber},
            json={
                "jsonrpc": "2.0",
                "id": 2,
                "method": "resources/subscribe",
                "params": {"uri": URI},
            },
        )
        assert subscribed.json()["result"] == {}
        async with (
            get_stream(client, uvicorn_url, subscriber) as subscriber_messages,
            get_stream(client, daphne_url, bystander) as bystander_messages,
        ):
            await edit(django_db_blocker, set_resource_text("degraded"))
            assert sorted(await next_methods(subscriber_messages, 2)) == [
                "notifications/resources/list_changed",
                "notifications/resources/updated",
            ]
            assert await next_methods(bystander_messages, 1) == [
                "notifications/resources/list_changed"
            ]
            await edit(django_db_blocker, touch_tool("echo"))
            # The tool edit is the bystander's next message: no resources/updated came before.
            assert await next_methods(bystander_messages, 1) == ["notifications/tools/list_changed"]


@pytest.mark.spec("2026-07-28", "basic/patterns/subscriptions", "only the kinds opted into")
async def test_a_listen_stream_gets_only_what_it_asked_for_tagged_with_its_id(
    endpoints, django_db_blocker
):
    _, uvicorn_url = endpoints
    async with (
        asyncio.timeout(20),
        Client(uvicorn_url, mode="2026-07-28") as client,
        client.listen(tools_list_changed=True, resource_subscriptions=[URI]) as sub,
    ):
        assert sub.honored.tools_list_changed
        assert not sub.honored.prompts_list_changed

        def edit_prompt() -> None:
            prompt = Prompt.objects.get(name="hello")
            prompt.description = "Says hello politely."
            prompt.save()

        await edit(django_db_blocker, edit_prompt)  # not opted into: never sent
        await edit(django_db_blocker, touch_tool("echo"))
        await edit(django_db_blocker, set_resource_text("recovered"))
        events = []
        async for event in sub:
            events.append(event)
            if len(events) == 2:
                break
    assert isinstance(events[0], ToolsListChanged)
    assert isinstance(events[1], ResourceUpdated) and events[1].uri == URI


async def test_listen_without_event_stream_accept_is_406(endpoints):
    daphne_url, _ = endpoints
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(
            daphne_url,
            headers={
                "content-type": "application/json",
                "accept": "application/json",
                "mcp-protocol-version": "2026-07-28",
                "mcp-method": "subscriptions/listen",
            },
            json={
                "jsonrpc": "2.0",
                "id": 9,
                "method": "subscriptions/listen",
                "params": {"notifications": {"toolsListChanged": True}, "_meta": meta},
            },
        )
    assert response.status_code == 406


@pytest.mark.spec("2025-11-25", "basic/transports", "each message on exactly one stream")
async def test_a_session_keeps_only_its_newest_get_stream(endpoints, django_db_blocker):
    daphne_url, uvicorn_url = endpoints
    async with httpx.AsyncClient(timeout=30) as client:
        session_id = await open_session(client, daphne_url)
        headers = {"accept": "text/event-stream", "mcp-session-id": session_id}
        async with client.stream("GET", daphne_url, headers=headers) as older:
            assert older.status_code == 200
            async with get_stream(client, uvicorn_url, session_id) as newer:
                # The older stream gives way as soon as the newer one opens.
                async with asyncio.timeout(10):
                    await older.aread()
                await edit(django_db_blocker, touch_tool("echo"))
                assert await next_methods(newer, 1) == ["notifications/tools/list_changed"]


async def test_deleting_the_session_ends_its_get_stream(endpoints):
    daphne_url, uvicorn_url = endpoints
    async with httpx.AsyncClient(timeout=30) as client:
        session_id = await open_session(client, daphne_url)
        headers = {"accept": "text/event-stream", "mcp-session-id": session_id}
        async with client.stream("GET", uvicorn_url, headers=headers) as stream:
            assert stream.status_code == 200
            deleted = await client.delete(daphne_url, headers={"mcp-session-id": session_id})
            assert deleted.status_code == 204
            async with asyncio.timeout(10):
                await stream.aread()  # returns once the server ends the stream


async def test_an_operator_saving_a_tool_in_the_admin_refreshes_connected_clients(
    endpoints, django_db_blocker
):
    """The issue's acceptance: an admin form save reaches a client listening elsewhere."""
    _, uvicorn_url = endpoints

    def save_in_admin() -> int:
        user = get_user_model().objects.create_superuser(
            "notify-operator", "op@example.com", "pw-123456"
        )
        admin = AdminClient()
        admin.force_login(user)
        endpoint_id = Tool.objects.get(name="echo").endpoints.get().pk
        form = tool_form(endpoint_id, name="shout_notify")
        return admin.post(reverse("admin:mcp_app_tool_add"), form).status_code

    async with (
        asyncio.timeout(20),
        Client(uvicorn_url, mode="2026-07-28") as client,
        client.listen(tools_list_changed=True) as sub,
    ):
        assert await edit(django_db_blocker, save_in_admin) == 302
        event = await anext(aiter(sub))
        tools = [tool.name for tool in (await client.list_tools(cache_mode="bypass")).tools]
    assert isinstance(event, ToolsListChanged)
    assert "shout_notify" in tools


BULK_SLUG = "notify-bulk"
BULK_TOOLS = 300
END_OF_PUSHES = b"test-end-of-pushes"


@pytest.fixture(scope="module")
def unwindowed_server(endpoints: Any) -> Any:
    """A Daphne sending every list_changed as it comes: what a stream receives there is
    what the transaction published (the module's data is already in place)."""
    with asgi_server("daphne", {"MCP_LIST_CHANGED_COALESCE_SECONDS": "0"}) as url:
        yield url


def seed_bulk_endpoint() -> int:
    endpoint = make_endpoint(BULK_SLUG)
    endpoint.tools.add(make_python_tool("bulk_seed", "echo"))
    endpoint.prompts.add(Prompt.objects.create(name="bulk_hello", description="Says hello."))
    return endpoint.pk


def import_bulk_tools() -> None:
    document = catalog_export(endpoint_slugs=[BULK_SLUG])
    (seed,) = document["tools"]
    document["tools"] += [{**seed, "name": f"bulk_{number:03}"} for number in range(BULK_TOOLS - 1)]
    report = catalog_import(document=document)
    assert len(report.changes) >= BULK_TOOLS - 1


def touch_bulk_prompt() -> None:
    prompt = Prompt.objects.get(name="bulk_hello")
    prompt.description += " Again."
    prompt.save()


def invalidations_naming(pubsub: Any, endpoint_id: int) -> int:
    """How many pushes on the invalidation channel named the endpoint, up to a marker."""
    redis.Redis.from_url(settings.REDIS_URL).publish(
        invalidation.invalidation_channel(), END_OF_PUSHES
    )
    count = 0
    while (message := pubsub.get_message(timeout=10)) is not None:
        if message["type"] != "message":
            continue
        if message["data"] == END_OF_PUSHES:
            return count
        decoded = invalidation.Invalidation.decode(message["data"])
        count += decoded is not None and endpoint_id in decoded.endpoint_ids
    raise AssertionError("the marker push never arrived")


async def all_tool_names(client: Client) -> list[str]:
    names: list[str] = []
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        names += [tool.name for tool in page.tools]
        if not page.next_cursor:
            return names
        cursor = page.next_cursor


@pytest.mark.spec("2025-11-25", "server/tools", "notifications/tools/list_changed")
async def test_an_import_of_300_tools_is_announced_once_per_stream_and_published_once(
    endpoints, unwindowed_server, uvicorn_server_url, django_db_blocker
):
    """The issue's finding: one import of 300 tools sent 300 list_changed to each client."""
    endpoint_id = await edit(django_db_blocker, seed_bulk_endpoint)
    legacy_heard = Notifications()
    legacy_methods = legacy_heard.methods
    pubsub = redis.Redis.from_url(settings.REDIS_URL).pubsub()
    pubsub.subscribe(invalidation.invalidation_channel())
    assert (await asyncio.to_thread(pubsub.get_message, timeout=10))["type"] == "subscribe"
    legacy_url = f"{unwindowed_server}/mcp/{BULK_SLUG}"
    try:
        async with (
            asyncio.timeout(120),
            Client(legacy_url, mode="legacy", message_handler=legacy_heard.handler) as legacy,
        ):
            await legacy_heard.wait_stream_open(lambda: edit(django_db_blocker, touch_bulk_prompt))
            async with (
                Client(f"{uvicorn_server_url}/mcp/{BULK_SLUG}", mode="2026-07-28") as modern,
                modern.listen(tools_list_changed=True, prompts_list_changed=True) as sub,
            ):
                legacy_heard.clear()
                await asyncio.to_thread(invalidations_naming, pubsub, endpoint_id)

                await edit(django_db_blocker, import_bulk_tools)
                pushes = await asyncio.to_thread(invalidations_naming, pubsub, endpoint_id)
                # A later change of another kind closes the count: streams keep their order.
                await edit(django_db_blocker, touch_bulk_prompt)
                await legacy_heard.next(PROMPTS_CHANGED)
                modern_events = await events_until(sub)
                legacy_tools = await all_tool_names(legacy)
                modern_tools = await all_tool_names(modern)
    finally:
        pubsub.close()
    assert pushes == 1
    assert legacy_methods.count("notifications/tools/list_changed") == 1
    assert legacy_methods[-1] == "notifications/prompts/list_changed"
    assert modern_events == [ToolsListChanged, PromptsListChanged]
    assert len(legacy_tools) == len(modern_tools) == BULK_TOOLS


async def test_edits_in_a_row_reach_a_stream_once_per_window_and_the_last_one_too(
    endpoints, django_db_blocker
):
    """Separate transactions (API writes in a row): throttled per stream, trailing edge kept."""
    daphne_url, _ = endpoints
    window = get_conf().MCP_LIST_CHANGED_COALESCE_SECONDS  # the servers' default
    async with httpx.AsyncClient(timeout=30) as client:
        session_id = await open_session(client, daphne_url)
        async with get_stream(client, daphne_url, session_id) as messages:
            started = time.monotonic()
            for _ in range(20):
                await edit(django_db_blocker, touch_tool("echo"))
            burst = time.monotonic() - started
            methods = await next_methods(messages, 1)
            # The rest of the burst follows, one message per window, the last once its
            # window closes; then the stream is quiet.
            while True:
                try:
                    async with asyncio.timeout(window * 8):
                        methods.append((await messages.get())["method"])
                except TimeoutError:
                    break
    assert set(methods) == {"notifications/tools/list_changed"}
    assert 2 <= len(methods) <= 2 + math.ceil(burst / window)


ENABLE_SLUG = "notify-enable"
ENABLE_TOOLS = 40


def seed_disabled_tools() -> list[int]:
    """An endpoint publishing a prompt and 40 disabled tools, as an import leaves them."""
    endpoint = make_endpoint(ENABLE_SLUG)
    endpoint.prompts.add(Prompt.objects.create(name="enable_hello", description="Says hello."))
    tools = [
        make_python_tool(f"enable_{number:02}", "echo", enabled=False)
        for number in range(ENABLE_TOOLS)
    ]
    endpoint.tools.add(*tools)
    return [tool.pk for tool in tools]


def touch_enable_prompt() -> None:
    prompt = Prompt.objects.get(name="enable_hello")
    prompt.description += " Again."
    prompt.save()


def enable_in_admin(pks: list[int]) -> None:
    """The operator ticks every tool in the list and runs "Enable selected"."""
    user = get_user_model().objects.create_superuser(
        "bulk-operator", "bulk@example.com", "pw-123456"
    )
    admin = AdminClient()
    admin.force_login(user)
    response = admin.post(
        reverse("admin:mcp_app_tool_changelist"),
        {"action": "enable_selected", "_selected_action": [str(pk) for pk in pks]},
    )
    assert response.status_code == 302
    assert Tool.objects.filter(pk__in=pks, enabled=True).count() == len(pks)


@pytest.mark.spec("2025-11-25", "server/tools", "notifications/tools/list_changed")
async def test_a_bulk_enable_in_the_admin_reaches_a_legacy_client_once(
    endpoints, unwindowed_server, django_db_blocker
):
    """Our choice: one admin action is one transaction, so one list_changed, not one a row."""
    pks = await edit(django_db_blocker, seed_disabled_tools)
    heard = Notifications()
    methods = heard.methods

    async with (
        asyncio.timeout(60),
        Client(
            f"{unwindowed_server}/mcp/{ENABLE_SLUG}", mode="legacy", message_handler=heard.handler
        ) as legacy,
    ):
        await heard.wait_stream_open(lambda: edit(django_db_blocker, touch_enable_prompt))
        assert await all_tool_names(legacy) == []
        heard.clear()

        await edit(django_db_blocker, lambda: enable_in_admin(pks))
        # A later change of another kind closes the count: the stream keeps its order.
        await edit(django_db_blocker, touch_enable_prompt)
        await heard.next(PROMPTS_CHANGED)
        tools = await all_tool_names(legacy)

    assert methods.count("notifications/tools/list_changed") == 1
    assert len(tools) == ENABLE_TOOLS


PUBLISH_SLUG = "notify-publish"


def seed_unpublished_tools() -> list[int]:
    """An endpoint publishing a prompt, and 40 disabled tools on no endpoint, as an OpenAPI
    import or an upstream sync without an endpoint leaves them."""
    endpoint = make_endpoint(PUBLISH_SLUG)
    endpoint.prompts.add(Prompt.objects.create(name="publish_hello", description="Says hello."))
    tools = [
        make_python_tool(f"publish_{number:02}", "echo", enabled=False)
        for number in range(ENABLE_TOOLS)
    ]
    return [tool.pk for tool in tools]


def touch_publish_prompt() -> None:
    prompt = Prompt.objects.get(name="publish_hello")
    prompt.description += " Again."
    prompt.save()


def endpoint_action_in_admin(action: str, pks: list[int], **data: str) -> None:
    """The operator ticks every tool in the list, runs ``action`` and picks the endpoint."""
    user, _ = get_user_model().objects.get_or_create(
        username="publish-operator", defaults={"is_staff": True, "is_superuser": True}
    )
    admin = AdminClient()
    admin.force_login(user)
    endpoint = Endpoint.objects.get(slug=PUBLISH_SLUG)
    response = admin.post(
        reverse("admin:mcp_app_tool_changelist"),
        {
            "action": action,
            "_selected_action": [str(pk) for pk in pks],
            "post": "yes",
            "endpoints": [str(endpoint.pk)],
            **data,
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]


@pytest.mark.spec("2025-11-25", "server/tools", "notifications/tools/list_changed")
async def test_adding_to_and_removing_from_an_endpoint_in_bulk_reaches_a_client_once_each(
    endpoints, unwindowed_server, django_db_blocker
):
    """Issue #28: one bulk change, one notification, for "add to endpoint" (with enable) and
    "remove from endpoint" as for "enable selected"."""
    pks = await edit(django_db_blocker, seed_unpublished_tools)
    heard = Notifications()
    counts = []

    async with (
        asyncio.timeout(60),
        Client(
            f"{unwindowed_server}/mcp/{PUBLISH_SLUG}",
            mode="legacy",
            message_handler=heard.handler,
        ) as legacy,
    ):
        await heard.wait_stream_open(lambda: edit(django_db_blocker, touch_publish_prompt))
        assert await all_tool_names(legacy) == []
        for action, data in (("publish_selected", {"enable": "on"}), ("unpublish_selected", {})):
            heard.clear()
            await edit(
                django_db_blocker,
                lambda action=action, data=data: endpoint_action_in_admin(action, pks, **data),
            )
            # A later change of another kind closes the count: the stream keeps its order.
            await edit(django_db_blocker, touch_publish_prompt)
            await heard.next(PROMPTS_CHANGED)
            counts.append(
                (
                    heard.methods.count("notifications/tools/list_changed"),
                    len(await all_tool_names(legacy)),
                )
            )

    assert counts == [(1, ENABLE_TOOLS), (1, 0)]
