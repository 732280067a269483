"""Tool names are unique per endpoint, however the tools get attached or renamed."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction

from mcp_app.models import Endpoint, Tool
from mcp_app.services.catalog_writes import check_unique_tool_names, endpoint_create, tool_create


def make_tool(name: str, *endpoints: Endpoint, function: str = "echo") -> Tool:
    return tool_create(
        name=name, kind=Tool.Kind.PYTHON, config={"function": function}, endpoints=endpoints
    )


def test_attaching_a_second_tool_of_the_same_name_is_refused(endpoint: Endpoint) -> None:
    make_tool("search", endpoint)
    twin = make_tool("search", function="add")

    # A savepoint, as the m2m add runs in the test's transaction and fails inside it.
    clash = "already has another tool named 'search'"
    with pytest.raises(ValidationError, match=clash), transaction.atomic():
        endpoint.tools.add(twin)

    assert endpoint.tools.get().name == "search"
    assert not twin.endpoints.exists()


def test_attaching_from_the_tool_side_is_refused_too(endpoint: Endpoint) -> None:
    make_tool("search", endpoint)
    twin = make_tool("search")

    with pytest.raises(ValidationError, match="already has another tool named 'search'"):
        twin.endpoints.add(endpoint)


def test_creating_a_tool_on_an_endpoint_with_that_name_is_refused(endpoint: Endpoint) -> None:
    make_tool("search", endpoint)

    with pytest.raises(ValidationError):
        make_tool("search", endpoint)

    assert Tool.objects.filter(name="search").count() == 1


def test_renaming_into_a_clash_is_refused(endpoint: Endpoint) -> None:
    make_tool("search", endpoint)
    other = make_tool("find", endpoint)
    other.name = "search"

    with pytest.raises(ValidationError, match="already has another tool named 'search'"):
        other.save()


def test_the_same_name_on_different_endpoints_is_fine(endpoint: Endpoint) -> None:
    other = endpoint_create(slug="other")
    make_tool("search", endpoint)
    make_tool("search", other)

    assert Tool.objects.filter(name="search").count() == 2


def test_resaving_a_tool_does_not_clash_with_itself(endpoint: Endpoint) -> None:
    tool = make_tool("search", endpoint)
    tool.title = "Search"

    tool.save()
    endpoint.tools.add(tool)

    assert endpoint.tools.get() == tool


def test_a_set_of_tools_with_repeated_names_is_refused(db: None) -> None:
    with pytest.raises(ValidationError, match="Two of the selected tools are named 'x'"):
        check_unique_tool_names(endpoint_ids=[], tools=[(1, "x"), (2, "x"), (3, "y")])
