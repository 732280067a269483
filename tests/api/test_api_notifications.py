"""An edit through the API reaches a connected MCP client, as an admin edit does.

The client holds a legacy session's GET stream on a live Daphne process; the edit is a PATCH
to the same server's API with an API token. Nothing is faked: the notification comes from the
model signals, through the Redis channel layer, onto the stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mcp_app.models import Tool
from mcp_app.services.api_tokens import api_token_create
from tests.api.conftest import make_user
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.live import flush_database, live_server_url  # noqa: F401  (fixture)
from tests.support.notifications import get_stream
from tests.support.raw_mcp import open_session

pytestmark = pytest.mark.django_db

SLUG = "api-notify"


@pytest.fixture(scope="module")
def served(live_server_url: str, django_db_blocker: Any) -> Iterator[dict[str, Any]]:  # noqa: F811
    with django_db_blocker.unblock():
        endpoint = make_endpoint(SLUG)
        tool = make_python_tool("api_echo", "echo")
        endpoint.tools.add(tool)
        user = make_user("robot", ["mcp_app.view_tool", "mcp_app.change_tool"])
        _token, key = api_token_create(user=user, name="ci")
    yield {"base": live_server_url, "tool_id": tool.pk, "key": key}
    flush_database(django_db_blocker)


async def test_a_tool_edit_through_the_api_sends_list_changed(served: dict[str, Any]) -> None:
    url = f"{served['base']}/mcp/{SLUG}"
    api = f"{served['base']}/api/v1/tools/{served['tool_id']}/"
    auth = {"authorization": f"Bearer {served['key']}"}
    async with httpx.AsyncClient(timeout=30) as client:
        session_id = await open_session(client, url)
        async with get_stream(client, url, session_id) as messages:
            edited = await client.patch(api, headers=auth, json={"description": "Edited."})
            assert edited.status_code == 200
            async with asyncio.timeout(10):
                message = await messages.get()
    assert message["method"] == "notifications/tools/list_changed"
    assert await Tool.objects.filter(description="Edited.").aexists()
