"""The issue's acceptance flow: an operator adds a tool in the admin, a client calls it.

The admin runs in this process (Django's test client), the MCP endpoint in the live Daphne
process: the change crosses processes through the database and the catalog version alone.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import Client as AdminClient
from django.urls import reverse
from mcp import Client

from mcp_app.models import Tool
from tests.support.admin_forms import tool_form
from tests.support.catalog import make_endpoint
from tests.support.live import flush_database

pytestmark = pytest.mark.django_db

SLUG = "operator"


@pytest.fixture(scope="module")
def operator(live_server_url: str, django_db_blocker: Any) -> Any:
    with django_db_blocker.unblock():
        endpoint = make_endpoint(SLUG, title="Operator's endpoint")
        user = get_user_model().objects.create_superuser("operator", "op@example.com", "pw-123456")
        admin = AdminClient()
        admin.force_login(user)
    yield admin, endpoint, f"{live_server_url}/mcp/{SLUG}"
    flush_database(django_db_blocker)


def admin_post(admin: AdminClient, django_db_blocker: Any, url: str, data: dict[str, Any]) -> int:
    with django_db_blocker.unblock():
        return admin.post(url, data).status_code


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_tool_added_in_the_admin_is_callable_at_once(operator, django_db_blocker, mode):
    admin, endpoint, url = operator
    add_url = reverse("admin:mcp_app_tool_add")
    if not await sync_to_async(Tool.objects.filter(name="shout").exists)():
        status = await sync_to_async(admin_post)(
            admin, django_db_blocker, add_url, tool_form(endpoint.pk)
        )
        assert status == 302  # saved, redirected to the change list

    async with asyncio.timeout(20), Client(url, mode=mode) as client:
        tools = (await client.list_tools(cache_mode="bypass")).tools
        result = await client.call_tool("shout", {"word": "hello"})
    assert [(t.name, t.title, t.annotations.read_only_hint) for t in tools] == [
        ("shout", "Shout", True)
    ]
    assert result.content[0].text == "HELLO!"


async def test_an_admin_edit_reaches_the_next_request(operator, django_db_blocker):
    admin, endpoint, url = operator
    tool = await sync_to_async(Tool.objects.filter(name="shout").first)()
    if tool is None:
        await sync_to_async(admin_post)(
            admin, django_db_blocker, reverse("admin:mcp_app_tool_add"), tool_form(endpoint.pk)
        )
        tool = await sync_to_async(Tool.objects.get)(name="shout")
    change_url = reverse("admin:mcp_app_tool_change", args=[tool.pk])
    async with asyncio.timeout(20), Client(url, mode="2026-07-28") as client:
        before = await client.call_tool("shout", {"word": "a"})
        status = await sync_to_async(admin_post)(
            admin, django_db_blocker, change_url, tool_form(endpoint.pk, template="{{ word }}?")
        )
        after = await client.call_tool("shout", {"word": "a"})
    assert status == 302
    assert (before.content[0].text, after.content[0].text) == ("A!", "a?")


async def test_an_invalid_schema_in_the_admin_saves_nothing_and_changes_no_endpoint(
    operator, django_db_blocker
):
    admin, endpoint, url = operator
    async with asyncio.timeout(20), Client(url, mode="2026-07-28") as client:
        before = [t.name for t in (await client.list_tools(cache_mode="bypass")).tools]
        status = await sync_to_async(admin_post)(
            admin,
            django_db_blocker,
            reverse("admin:mcp_app_tool_add"),
            tool_form(
                endpoint.pk, name="broken", input_schema='{"type": "object", "properties": 5}'
            ),
        )
        after = [t.name for t in (await client.list_tools(cache_mode="bypass")).tools]
    assert status == 200  # the form comes back with its error
    assert before == after
    assert not await sync_to_async(Tool.objects.filter(name="broken").exists)()
