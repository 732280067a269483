"""get_endpoint_state / aget_endpoint_state: the per-request endpoint lookup and its cache."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.db.models import F
from django.db.models.functions import Now
from pytest_django import DjangoAssertNumQueries

from mcp_app.models import Endpoint, Tool
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from mcp_app.services.endpoint_directory import aget_endpoint_state, get_endpoint_state
from mcp_app.services.snapshots import snapshot_builds
from tests.support.queries import all_threads_queries


def add_tool(endpoint: Endpoint, name: str) -> Tool:
    return tool_create(
        name=name, kind=Tool.Kind.PYTHON, config={"function": "echo"}, endpoints=[endpoint]
    )


def test_second_lookup_needs_no_query(
    endpoint: Endpoint, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    add_tool(endpoint, "echo")
    first = get_endpoint_state("test")

    with django_assert_num_queries(0):
        second = get_endpoint_state("test")

    assert second is not None and first is not None
    assert second.snapshot is first.snapshot


def test_a_cached_state_is_rechecked_once_the_interval_passed(
    endpoint: Endpoint, settings, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    add_tool(endpoint, "echo")
    first = get_endpoint_state("test")
    settings.MCP_CACHE_RECHECK_SECONDS = 0.0

    with django_assert_num_queries(1):
        again = get_endpoint_state("test")

    assert again is not None and first is not None
    # Unchanged catalog version: the version check reuses the snapshot, no rebuild.
    assert again.snapshot is first.snapshot


def test_a_change_whose_push_was_missed_shows_after_the_recheck_interval(
    endpoint: Endpoint, settings
) -> None:
    """Spec-silent, our bound: a missed push leaves a process stale for at most the interval."""
    before = get_endpoint_state("test")
    # A change that no process was told about (as when Redis was down at commit time).
    Endpoint.objects.filter(pk=endpoint.pk).update(
        title="Renamed", catalog_version=F("catalog_version") + 1, updated_at=Now()
    )

    still = get_endpoint_state("test")
    settings.MCP_CACHE_RECHECK_SECONDS = 0.0
    after = get_endpoint_state("test")

    assert before is not None and still is not None and after is not None
    assert still.snapshot.endpoint.title == "Test endpoint"
    assert after.snapshot.endpoint.title == "Renamed"


def test_a_catalog_change_rebuilds_the_snapshot(endpoint: Endpoint) -> None:
    add_tool(endpoint, "echo")
    before = get_endpoint_state("test")
    add_tool(endpoint, "echo2")

    after = get_endpoint_state("test")

    assert before is not None and after is not None
    assert after.catalog_version > before.catalog_version
    assert [tool.name for tool in after.snapshot.tools] == ["echo", "echo2"]


def test_state_carries_origins_and_the_enabled_flag(db: None) -> None:
    endpoint = endpoint_create(
        slug="web", allowed_origins="https://App.example.com/\n\nhttp://localhost:3000"
    )
    endpoint.enabled = False
    endpoint.save()

    state = get_endpoint_state("web")

    assert state is not None
    assert state.enabled is False
    assert state.allowed_origins == ("https://app.example.com", "http://localhost:3000")
    assert state.slug == "web"
    assert state.id == endpoint.pk


def test_unknown_slug_has_no_state(db: None) -> None:
    assert get_endpoint_state("nope") is None


def test_an_unknown_slug_is_remembered_until_an_endpoint_takes_it(
    db: None, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    assert get_endpoint_state("later") is None
    with django_assert_num_queries(0):
        assert get_endpoint_state("later") is None

    created = endpoint_create(slug="later")

    state = get_endpoint_state("later")
    assert state is not None and state.id == created.pk


def test_a_deleted_endpoint_is_forgotten_at_once(endpoint: Endpoint) -> None:
    assert get_endpoint_state("test") is not None

    endpoint.delete()

    assert get_endpoint_state("test") is None


def test_a_renamed_endpoint_answers_at_its_new_slug_only(endpoint: Endpoint) -> None:
    assert get_endpoint_state("test") is not None
    assert get_endpoint_state("renamed") is None

    endpoint.slug = "renamed"
    endpoint.save()

    assert get_endpoint_state("test") is None
    state = get_endpoint_state("renamed")
    assert state is not None and state.id == endpoint.pk


@pytest.mark.django_db(transaction=True)
async def test_async_lookup_returns_the_state_from_a_worker_thread() -> None:
    endpoint = await Endpoint.objects.acreate(slug="async")

    state = await aget_endpoint_state("async")
    missing = await aget_endpoint_state("missing")

    assert state is not None
    assert state.id == endpoint.pk
    assert state.snapshot.endpoint.slug == "async"
    assert missing is None


@pytest.mark.django_db(transaction=True)
async def test_concurrent_lookups_after_an_edit_build_the_snapshot_once() -> None:
    endpoint = await sync_to_async(endpoint_create)(slug="herd")
    await sync_to_async(add_tool)(endpoint, "echo")
    await aget_endpoint_state("herd")
    await sync_to_async(add_tool)(endpoint, "echo2")
    builds = snapshot_builds()

    with all_threads_queries() as queries:
        states = await asyncio.gather(*(aget_endpoint_state("herd") for _ in range(16)))

    assert snapshot_builds() == builds + 1
    assert {id(state) for state in states} == {id(states[0])}
    assert [tool.name for tool in states[0].snapshot.tools] == ["echo", "echo2"]
    # One endpoint read and one build (a query per kind of row plus prefetches) for all 16.
    assert len([q for q in queries.statements if 'FROM "mcp_app_endpoint"' in q]) == 1


@pytest.mark.django_db(transaction=True)
async def test_a_lookup_whose_client_went_away_still_serves_the_others() -> None:
    await sync_to_async(endpoint_create)(slug="cancel")
    first = asyncio.ensure_future(aget_endpoint_state("cancel"))
    second = asyncio.ensure_future(aget_endpoint_state("cancel"))
    await asyncio.sleep(0)
    first.cancel()

    async with asyncio.timeout(10):
        state = await second

    assert state is not None and state.slug == "cancel"
