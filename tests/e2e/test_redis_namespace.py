"""Two installations sharing one Redis database never hear each other.

Installation A is this test process with the session's live server, on the test database.
Installation B is a second Daphne on a database of its own, with the same Redis and
``REDIS_NAMESPACE`` left to its default (derived from the database). Both publish an endpoint
with the same id and slug, so without namespaces their channel-layer groups and invalidation
channel would be the same names.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from django.conf import settings
from django.db import connection
from mcp import Client
from mcp.client.subscriptions import PromptsListChanged, ToolsListChanged

from mcp_app.models import Prompt
from mcp_app.services import invalidation
from tests.e2e.test_change_notifications import edit, touch_tool
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.live import ROOT, asgi_server, database_url, flush_database
from tests.support.parallel import other_workers_namespaces

pytestmark = pytest.mark.django_db

SLUG = "namespaced"

# Installation B: the same endpoint (same id), its own database; prints its namespace.
SEED_B = """
from django.conf import settings
from mcp_app.models import Endpoint, Prompt, Tool
endpoint = Endpoint.objects.create(id={endpoint_id}, slug="{slug}", title="B", auth_mode="public")
endpoint.tools.add(Tool.objects.create(name="echo", kind="python", config={{"function": "echo"}}))
endpoint.prompts.add(Prompt.objects.create(name="hello", description="Says hello."))
print(settings.REDIS_NAMESPACE)
"""
# A prompt edit on installation B, made by a process of B (as its admin would).
EDIT_PROMPT_B = """
from mcp_app.models import Prompt
prompt = Prompt.objects.get(name="hello")
prompt.description = "Says hello on B."
prompt.save()
"""


def manage_b(b_url: str, *args: str) -> str:
    """A management command of installation B (its database, its default namespace)."""
    env = {**os.environ, "DATABASE_URL": b_url, "REDIS_NAMESPACE": ""}
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def installations(live_server_url: str, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    """A's and B's endpoint URLs, B's namespace and the endpoint id both share."""
    with django_db_blocker.unblock():
        endpoint = make_endpoint(SLUG)
        endpoint.tools.add(make_python_tool("echo", "echo"))
        endpoint.prompts.add(Prompt.objects.create(name="hello", description="Says hello."))
        other_db = f"{connection.settings_dict['NAME']}_namespace_b"
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{other_db}"')
            cursor.execute(f'CREATE DATABASE "{other_db}"')
    a_url = urlsplit(database_url())
    b_url = urlunsplit(a_url._replace(path=f"/{other_db}"))
    try:
        manage_b(b_url, "migrate", "--verbosity", "0")
        seed = SEED_B.format(endpoint_id=endpoint.pk, slug=SLUG)
        b_namespace = manage_b(b_url, "shell", "-c", seed).strip().splitlines()[-1]
        with asgi_server("daphne", {"DATABASE_URL": b_url, "REDIS_NAMESPACE": ""}) as b_server:
            yield {
                "a": f"{live_server_url}/mcp/{SLUG}",
                "b": f"{b_server}/mcp/{SLUG}",
                "b_url": b_url,
                "b_namespace": b_namespace,
                "endpoint_id": endpoint.pk,
            }
    finally:
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{other_db}" WITH (FORCE)')
        flush_database(django_db_blocker)


class Invalidations:
    """Every invalidation published on the shared Redis, by channel, whatever its namespace."""

    def __init__(self) -> None:
        self.client = redis.Redis.from_url(settings.REDIS_URL)
        self.pubsub = self.client.pubsub()
        self.pubsub.psubscribe("*invalidate")
        confirmed = self.pubsub.get_message(timeout=10)
        assert confirmed is not None and confirmed["type"] == "psubscribe"

    def until(self, channel: str, marker: bytes) -> list[tuple[str, bytes]]:
        """(channel, message) of each push up to ``marker`` published on ``channel`` now."""
        self.client.publish(channel, marker)
        seen = []
        while (message := self.pubsub.get_message(timeout=10)) is not None:
            if message["type"] != "pmessage":
                continue
            if message["data"] == marker:
                return seen
            seen.append((message["channel"].decode(), message["data"]))
        raise AssertionError("the marker push never arrived")

    def close(self) -> None:
        self.pubsub.close()
        self.client.close()


def decoded(data: bytes) -> invalidation.Invalidation:
    message = invalidation.Invalidation.decode(data)
    assert message is not None, data
    return message


def test_the_installations_have_different_default_namespaces(installations):
    assert installations["b_namespace"] != settings.REDIS_NAMESPACE
    assert installations["b_namespace"].startswith("mcphost:")


async def test_an_edit_on_one_installation_reaches_no_client_and_no_cache_of_the_other(
    installations, django_db_blocker
):
    pushes = Invalidations()
    try:
        async with (
            asyncio.timeout(60),
            Client(installations["a"], mode="2026-07-28") as a_client,
            a_client.listen(tools_list_changed=True) as a_sub,
            Client(installations["b"], mode="2026-07-28") as b_client,
            b_client.listen(tools_list_changed=True, prompts_list_changed=True) as b_sub,
        ):
            await edit(django_db_blocker, touch_tool("echo"))
            # A's client hears of A's edit ...
            assert isinstance(await anext(aiter(a_sub)), ToolsListChanged)
            # ... and B's client hears only of B's own later edit: had A's tools change
            # reached B's stream, it would have come first.
            await asyncio.to_thread(manage_b, installations["b_url"], "shell", "-c", EDIT_PROMPT_B)
            assert isinstance(await anext(aiter(b_sub)), PromptsListChanged)
            tools = await b_client.list_tools(cache_mode="bypass")
    finally:
        b_channel = f"{installations['b_namespace']}:invalidate"
        seen = await asyncio.to_thread(pushes.until, b_channel, b"test-marker")
        pushes.close()
    a_channel = invalidation.invalidation_channel()
    assert a_channel != b_channel
    # Under pytest-xdist the run's other workers are installations too, editing as they test.
    others = {f"{namespace}:invalidate" for namespace in other_workers_namespaces()}
    seen = [(channel, data) for channel, data in seen if channel not in others]
    # Each installation's pushes went on its own channel only: B's process, subscribed to
    # its channel, never heard A's edit.
    assert {channel for channel, _ in seen} == {a_channel, b_channel}
    named = {
        channel
        for channel, data in seen
        if installations["endpoint_id"] in (decoded(data)).endpoint_ids
    }
    assert named == {a_channel, b_channel}  # each edit, on its own installation's channel
    assert [tool.name for tool in tools.tools] == ["echo"]


@pytest.mark.parametrize("namespace", ["two words", "a/b", "x" * 81])
def test_an_unusable_namespace_stops_the_process_with_a_clear_error(namespace):
    env = {**os.environ, "REDIS_NAMESPACE": namespace, "DJANGO_SETTINGS_MODULE": "mcpsite.settings"}
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert "REDIS_NAMESPACE may hold only letters, digits and . _ : -" in done.stderr
