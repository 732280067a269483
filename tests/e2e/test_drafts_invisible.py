"""No client ever sees a draft (issue #32): the official ``mcp`` SDK against a live server,
in the legacy era (2025-11-25) and the 2026-07-28 one.

Three drafts are saved through the live server's API: one changes a tool's description and
input schema, one adds a new tool, one takes a tool off the endpoint. Until they are
published, tools/list and tools/call in both eras answer the live versions only (the new
tool is unknown, the removed one still runs), and saving them sends no notification. Then
they are published together, as one change set: both eras see the change, and each
subscribed client gets exactly one tools list_changed for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from mcp import Client
from mcp.client.subscriptions import PromptsListChanged, ToolsListChanged
from mcp.shared.exceptions import MCPError

from mcp_app.models import Prompt
from mcp_app.protocol import errors
from mcp_app.services.api_tokens import api_token_create
from mcp_app.services.drafts import live_entry
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.live import asgi_server, flush_database
from tests.support.notifications import PROMPTS_CHANGED, Notifications, events_until
from tests.support.waiting import await_until

pytestmark = pytest.mark.django_db

SLUG = "drafts-invisible"
FORMAT = "mcphost-catalog/1"
LIVE_SCHEMA = {"type": "object", "properties": {"message": {"type": "string"}}}
DRAFT_SCHEMA = {
    "type": "object",
    "properties": {"message": {"type": "string", "maxLength": 3}},
    "required": ["message"],
}
LIVE_DESCRIPTION = "Echoes the message."
DRAFT_DESCRIPTION = "Echoes a short message."
MODES = ("legacy", "2026-07-28")


def seed() -> str:
    """The endpoint, its tools and a prompt; an API token of an operator (its key)."""
    endpoint = make_endpoint(SLUG)
    endpoint.tools.add(
        make_python_tool(
            "dv_stable", "echo", description=LIVE_DESCRIPTION, input_schema=LIVE_SCHEMA
        ),
        make_python_tool("dv_doomed", "echo", input_schema=LIVE_SCHEMA),
    )
    endpoint.prompts.add(Prompt.objects.create(name="dv_marker", description="A marker."))
    operator = User.objects.create_superuser("drafts-operator", password="unused-password-123")
    _token, key = api_token_create(user=operator, name="drafts-e2e")
    return key


@pytest.fixture(scope="module")
def server(django_db_setup: None, django_db_blocker: Any) -> Iterator[tuple[str, str]]:
    """A Daphne sending every list_changed as it comes, and the operator's API key: what a
    stream receives there is what each transaction published."""
    with django_db_blocker.unblock():
        key = seed()
    with asgi_server("daphne", {"MCP_LIST_CHANGED_COALESCE_SECONDS": "0"}) as url:
        yield url, key
    flush_database(django_db_blocker)


def edit(django_db_blocker: Any, change: Callable[[], Any]) -> Any:
    def run() -> Any:
        with django_db_blocker.unblock():
            return change()

    return database_sync_to_async(run, thread_sensitive=False)()


def touch_marker() -> None:
    prompt = Prompt.objects.get(name="dv_marker")
    prompt.description += " Again."
    prompt.save()


def draft_documents() -> list[dict[str, Any]]:
    """(a) a reworded, stricter dv_stable; (b) a new tool; (c) dv_doomed off the endpoint."""
    stable, doomed = live_entry("tools", "dv_stable"), live_entry("tools", "dv_doomed")
    assert stable is not None and doomed is not None
    fresh = {
        "name": "dv_fresh",
        "kind": "template",
        "description": "Greets.",
        "config": {"template": "Fresh {{ who }}", "output": "text"},
        "input_schema": {"type": "object", "properties": {"who": {"type": "string"}}},
        "endpoints": [SLUG],
    }
    return [
        {
            "format": FORMAT,
            "tools": [{**stable, "description": DRAFT_DESCRIPTION, "input_schema": DRAFT_SCHEMA}],
        },
        {"format": FORMAT, "tools": [fresh]},
        {"format": FORMAT, "tools": [{**doomed, "endpoints": []}]},
    ]


async def tools_of(client: Client) -> dict[str, Any]:
    result = await client.list_tools(cache_mode="bypass")
    return {tool.name: tool for tool in result.tools}


async def assert_live_versions_only(client: Client) -> None:
    """tools/list and tools/call answer the live catalog: no draft shows."""
    tools = await tools_of(client)
    assert sorted(tools) == ["dv_doomed", "dv_stable"]
    assert tools["dv_stable"].description == LIVE_DESCRIPTION
    assert tools["dv_stable"].input_schema == LIVE_SCHEMA
    long = await client.call_tool("dv_stable", {"message": "longer than three"})
    assert not long.is_error  # the draft's maxLength is not in force
    assert not (await client.call_tool("dv_doomed", {"message": "hi"})).is_error
    with pytest.raises(MCPError) as unknown:
        await client.call_tool("dv_fresh", {"who": "x"})
    assert unknown.value.error.code == errors.INVALID_PARAMS


async def assert_published(client: Client) -> None:
    async def changed() -> bool:
        return sorted(await tools_of(client)) == ["dv_fresh", "dv_stable"]

    # Bounded: the publish reaches the server's catalog cache by its invalidation push.
    await await_until(changed, "the published change set in tools/list")
    tools = await tools_of(client)
    assert tools["dv_stable"].description == DRAFT_DESCRIPTION
    assert tools["dv_stable"].input_schema == DRAFT_SCHEMA
    assert (await client.call_tool("dv_stable", {"message": "longer than three"})).is_error
    assert not (await client.call_tool("dv_stable", {"message": "ok"})).is_error
    fresh = await client.call_tool("dv_fresh", {"who": "you"})
    assert fresh.content[0].text == "Fresh you"
    with pytest.raises(MCPError) as unknown:
        await client.call_tool("dv_doomed", {"message": "hi"})
    assert unknown.value.error.code == errors.INVALID_PARAMS


@pytest.mark.spec("2025-11-25", "server/tools", "notifications/tools/list_changed")
@pytest.mark.spec("2026-07-28", "basic/patterns/subscriptions", "only the kinds opted into")
async def test_no_client_sees_a_draft_until_its_change_set_is_published_once(
    server: tuple[str, str], django_db_blocker: Any
) -> None:
    base_url, key = server
    url = f"{base_url}/mcp/{SLUG}"
    legacy_heard = Notifications()
    legacy_methods = legacy_heard.methods

    api = httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {key}"})
    async with (
        asyncio.timeout(120),
        api,
        Client(url, mode="legacy", message_handler=legacy_heard.handler) as legacy,
        Client(url, mode="2026-07-28") as modern,
        modern.listen(tools_list_changed=True, prompts_list_changed=True) as sub,
    ):
        touches = await legacy_heard.wait_stream_open(lambda: edit(django_db_blocker, touch_marker))
        # The listen stream was open before the first: it heard each of them.
        for _ in range(touches):
            assert await events_until(sub) == [PromptsListChanged]
        legacy_heard.clear()

        ids = []
        for number, document in enumerate(await edit(django_db_blocker, draft_documents)):
            saved = await api.post(
                "/api/v1/drafts/", json={"title": f"Draft {number}", "document": document}
            )
            assert saved.status_code == 201, saved.text
            ids.append(saved.json()["id"])
        for client in (legacy, modern):
            await assert_live_versions_only(client)
        # Saving drafts announced nothing: the next message is the marker's.
        await edit(django_db_blocker, touch_marker)
        await legacy_heard.next(PROMPTS_CHANGED)
        assert await events_until(sub) == [PromptsListChanged]
        assert legacy_methods == ["notifications/prompts/list_changed"]
        legacy_heard.clear()

        published = await api.post("/api/v1/drafts/publish/", json={"drafts": ids})
        assert published.status_code == 200, published.text
        # A later change of another kind closes the count: each stream keeps its order.
        await edit(django_db_blocker, touch_marker)
        await legacy_heard.next(PROMPTS_CHANGED)
        modern_events = await events_until(sub)
        for client in (legacy, modern):
            await assert_published(client)

    assert legacy_methods.count("notifications/tools/list_changed") == 1
    assert legacy_methods[-1] == "notifications/prompts/list_changed"
    assert modern_events == [ToolsListChanged, PromptsListChanged]
    assert len({row["change_set"] for row in published.json()["drafts"]}) == 1
