"""The per-upstream sync policy (issue #26): "mark" leaves a changed upstream out of sync for an
operator, "apply" applies its additions and changes at once, from the scheduled probe and from
the upstream's own ``notifications/tools/list_changed``, as a sync by hand would (new rows
disabled, history rows "upstream sync", one list_changed for connected clients).

The upstream is the SDK server of ``tests/support/mcp_upstream_server.py`` on 127.0.0.1,
restarted as a later version (``--upgraded --more-tools``) to change under the host.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import override_settings

from mcp_app.executors import mcp_upstream
from mcp_app.models import Endpoint, Prompt, Resource, Tool, Upstream
from mcp_app.services import notify
from mcp_app.services.catalog_writes import endpoint_create
from mcp_app.services.upstream_health import upstream_probe
from mcp_app.services.upstream_sync import SyncChoice, upstream_offer_apply
from mcp_app.services.upstream_targets import upstream_list_offer, upstream_resolve
from tests.support.live import free_port
from tests.support.mcp_upstream_server import run_mcp_upstream
from tests.support.waiting import await_until

pytestmark = pytest.mark.django_db(transaction=True)
SENTINEL = {"type": "test.sentinel"}
WAIT_SECONDS = 10.0


@pytest.fixture(autouse=True)
async def _fresh_sessions() -> Any:
    yield
    await mcp_upstream.close_sessions()


@pytest.fixture
async def listener() -> AsyncIterator[Any]:
    """What connected clients of the endpoint "main" are told, as their streams hear it."""
    endpoint = await database_sync_to_async(endpoint_create)(slug="main")
    listening = notify.GroupListener(notify.endpoint_group(endpoint.pk))
    await listening.__aenter__()
    yield listening
    await listening.__aexit__(None, None, None)


async def until_sentinel(listening: Any) -> list[dict[str, Any]]:
    await notify._asend(listening.groups[0], SENTINEL)
    received = []
    while (message := await listening.next(WAIT_SECONDS)) != SENTINEL:
        assert message is not None, "the sentinel never arrived"
        received.append(message)
    return received


def make_upstream(url: str, policy: str) -> Upstream:
    upstream = Upstream(name="up", url=url, allow_networks="127.0.0.1/32", sync_policy=policy)
    upstream.full_clean()
    upstream.save()
    return upstream


async def imported(upstream: Upstream) -> None:
    """echo and add imported by hand, enabled on the endpoint "main"."""
    offer = await upstream_list_offer("up")
    main = await Endpoint.objects.aget(slug="main")
    await database_sync_to_async(upstream_offer_apply)(
        upstream,
        offer,
        choice=SyncChoice(add=frozenset({"echo", "add"})),
        endpoints=[main],
        enabled=True,
    )


async def echo() -> Tool:
    return await Tool.objects.aget(kind=Tool.Kind.MCP_UPSTREAM, config__tool="echo")


@override_settings(MCP_LIST_CHANGED_COALESCE_SECONDS=0)
@pytest.mark.parametrize("policy", ["mark", "apply"])
async def test_the_probe_applies_an_upgrade_only_under_the_apply_policy(
    tmp_path: Path, listener: Any, policy: str
) -> None:
    port = free_port()
    upstream = await database_sync_to_async(make_upstream)(f"http://127.0.0.1:{port}/mcp", policy)
    with run_mcp_upstream(tmp_path, port=port):
        await imported(upstream)
        assert await upstream_probe("up") == Upstream.ProbeState.ACTIVE
    await until_sentinel(listener)  # what the import announced

    with run_mcp_upstream(tmp_path, port=port, upgraded=True, more_tools=True):
        await upstream_probe("up")

    row, tool = await Upstream.objects.aget(pk=upstream.pk), await echo()
    later = await Tool.objects.filter(config__tool="added_later").afirst()
    received = await until_sentinel(listener)
    if policy == "mark":
        assert row.tools_out_of_sync
        assert (tool.description, later, received) == ("Returns the text.", None, [])
        return
    assert not row.tools_out_of_sync
    assert (tool.title, tool.description) == ("Echo", "Returns the text, unchanged.")
    assert (tool.destructive_hint, tool.read_only_hint, tool.meta) == (
        False,
        True,
        {"com.example/version": "2"},
    )
    assert tool.enabled
    version = await tool.history.alatest()
    assert version.history_change_reason == "upstream sync"
    # New tools are drafts, as from a sync by hand.
    assert later is not None and not later.enabled
    assert received == [{"type": notify.LIST_CHANGED, "kinds": ["tools"]}]


async def test_an_upstreams_list_changed_is_applied_under_the_apply_policy(
    tmp_path: Path,
) -> None:
    with run_mcp_upstream(tmp_path) as running:
        upstream = await database_sync_to_async(make_upstream)(running.url, "apply")
        await database_sync_to_async(endpoint_create)(slug="main")
        await imported(upstream)
        target = (await upstream_resolve("up")).target
        await mcp_upstream.list_tools(target)  # opens the shared session and its stream
        (session,) = mcp_upstream._sessions[asyncio.get_running_loop()].values()
        await await_until(
            lambda: session.listening, "the notification stream opened", timeout=WAIT_SECONDS
        )

        await mcp_upstream.request(target, "tools/call", {"name": "grow", "arguments": {}}, None)

        grown = await await_until(
            lambda: Tool.objects.filter(config__tool="grown").afirst(),
            "list_changed applied",
            timeout=WAIT_SECONDS,
        )
    assert not grown.enabled
    assert (await grown.history.alatest()).history_change_reason == "upstream sync"

    async def in_sync() -> bool:
        return not (await Upstream.objects.aget(pk=upstream.pk)).tools_out_of_sync

    await await_until(in_sync, "the upstream back in sync", timeout=WAIT_SECONDS)


@override_settings(MCP_LIST_CHANGED_COALESCE_SECONDS=0)
async def test_the_apply_policy_takes_resource_and_prompt_changes_with_one_notification(
    tmp_path: Path, listener: Any
) -> None:
    port = free_port()
    upstream = await database_sync_to_async(make_upstream)(f"http://127.0.0.1:{port}/mcp", "apply")
    main = await Endpoint.objects.aget(slug="main")

    def changed_since_the_sync() -> None:
        # As if the upstream had reworded both since the sync: ours and what that sync took
        # hold the older words, and the digest of that offer is not the upstream's now.
        row = Upstream.objects.get(pk=upstream.pk)
        synced = row.synced_items
        synced["resources"]["up://readme"]["description"] = "Old words."
        synced["prompts"]["review"]["description"] = "Old words."
        Upstream.objects.filter(pk=upstream.pk).update(
            synced_items=synced, tools_fingerprint="0" * 64
        )
        Resource.objects.filter(uri="up://readme").update(description="Old words.")
        Prompt.objects.filter(name="review").update(description="Old words.")

    with run_mcp_upstream(tmp_path, port=port):
        offer = await upstream_list_offer("up")
        await database_sync_to_async(upstream_offer_apply)(
            upstream, offer,
            choice=SyncChoice(add_resources=frozenset({"up://readme"}),
                              add_prompts=frozenset({"review"})),
            endpoints=[main], enabled=True,
        )  # fmt: skip
        await until_sentinel(listener)  # what the import announced
        await database_sync_to_async(changed_since_the_sync)()
        await upstream_probe("up")

    readme = await Resource.objects.aget(uri="up://readme")
    review = await Prompt.objects.aget(name="review")
    assert (readme.description, review.description) == (
        "The upstream's readme.",
        "Asks for a review of some code.",
    )
    assert not (await Upstream.objects.aget(pk=upstream.pk)).tools_out_of_sync
    received = await until_sentinel(listener)
    # One list_changed for both kinds (the readme's subscribers are also told it changed).
    assert [sorted(m["kinds"]) for m in received if m["type"] == notify.LIST_CHANGED] == [
        ["prompts", "resources"]
    ]
