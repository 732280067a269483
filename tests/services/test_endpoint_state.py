"""get_endpoint_state / aget_endpoint_state: the per-request endpoint lookup and its cache."""

from __future__ import annotations

import pytest
from pytest_django import DjangoAssertNumQueries

from mcp_app.models import Endpoint, Tool
from mcp_app.services.catalog import (
    aget_endpoint_state,
    endpoint_create,
    get_endpoint_state,
    tool_create,
)


def add_tool(endpoint: Endpoint, name: str) -> Tool:
    return tool_create(
        name=name, kind=Tool.Kind.PYTHON, config={"function": "echo"}, endpoints=[endpoint]
    )


def test_second_lookup_is_one_query(
    endpoint: Endpoint, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    add_tool(endpoint, "echo")
    first = get_endpoint_state("test")

    with django_assert_num_queries(1):
        second = get_endpoint_state("test")

    assert second is not None and first is not None
    assert second.snapshot is first.snapshot


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


@pytest.mark.django_db(transaction=True)
async def test_async_lookup_returns_the_state_from_a_worker_thread() -> None:
    endpoint = await Endpoint.objects.acreate(slug="async")

    state = await aget_endpoint_state("async")
    missing = await aget_endpoint_state("missing")

    assert state is not None
    assert state.id == endpoint.pk
    assert state.snapshot.endpoint.slug == "async"
    assert missing is None
