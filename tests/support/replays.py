"""A draft to replay, for the tests of replays through the API and through the page: the
permissions that govern replays, team members holding some of them, and alpha's template
tool ``greet``, called once by a client (tests/support/recorded_calls.py) and then reworded
by a draft. Rows are committed: tests using this need ``transaction=True``.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, User

from mcp_app.models import Draft, Tool
from mcp_app.services.catalog_writes import tool_create
from mcp_app.services.drafts import draft_create, live_entry
from tests.api.conftest import make_user
from tests.support.recorded_calls import client_call, flushed
from tests.support.teams import World
from tests.support.upstream import Upstream

# Reading a draft, running a replay (changing the tool), seeing the calls' payloads.
VIEW, RUN, PAYLOADS = "mcp_app.view_draft", "mcp_app.change_tool", "mcp_app.view_call_payloads"


def member(username: str, group: Group, *permissions: str) -> User:
    """A member of ``group`` holding ``permissions`` and not ``manage_every_team``."""
    user = make_user(username, permissions, every_team=False)
    user.groups.add(group)
    return user


def redraft(world: World, name: str, **fields: Any) -> Draft:
    """A draft by alpha's member changing ``fields`` of live tool ``name``."""
    entry = live_entry("tools", name, user=world.alpha.member)
    assert entry is not None
    entry.update(fields)
    document = {"format": "mcphost-catalog/1", "tools": [entry]}
    return draft_create(title=f"Change {name}", document=document, actor=world.alpha.member)


def greet_draft(world: World, caller: str) -> Draft:
    """Alpha's template tool ``greet`` ("Hello {{ name }}!"), called once by a client with
    ``caller`` as the name, and a draft rewording its answer to "Hi {{ name }}!"."""
    tool_create(
        name="greet",
        kind=Tool.Kind.TEMPLATE,
        config={"template": "Hello {{ name }}!", "output": "text"},
        description="Greets someone.",
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        capture_mode=Tool.Capture.FULL,
        team=world.alpha.group,
        endpoints=[world.alpha.endpoint],
    )
    client_call("alpha-endpoint", "greet", {"name": caller})
    flushed()
    return redraft(world, "greet", config={"template": "Hi {{ name }}!", "output": "text"})


def lookup_draft(world: World, upstream: Upstream, *items: str) -> Draft:
    """Alpha's HTTP tool ``lookup`` (a side effect: GET ``upstream``'s /echo/{item}), called
    by a client once per item, and a draft rewording its description."""
    tool_create(
        name="lookup",
        kind=Tool.Kind.HTTP,
        config={"url": upstream.url("/echo/{item}"), "allow_networks": ["127.0.0.1/32"]},
        description="Asks the upstream.",
        input_schema={"type": "object", "properties": {"item": {"type": "string"}}},
        capture_mode=Tool.Capture.FULL,
        team=world.alpha.group,
        endpoints=[world.alpha.endpoint],
    )
    for item in items:
        client_call("alpha-endpoint", "lookup", {"item": item})
    flushed()
    return redraft(world, "lookup", description="Asks the upstream, politely.")
