"""catalog_version: bumped by every change of what an endpoint publishes, and only there."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mcp_app.models import Endpoint, Prompt, Resource, ResourceTemplate, Tool
from mcp_app.services.catalog_changes import catalog_changed
from mcp_app.services.catalog_writes import (
    endpoint_create,
    prompt_create,
    resource_create,
    resource_template_create,
    tool_create,
)


@pytest.fixture
def two(db: None) -> tuple[Endpoint, Endpoint]:
    return endpoint_create(slug="affected"), endpoint_create(slug="bystander")


def version(endpoint: Endpoint) -> int:
    return Endpoint.objects.values_list("catalog_version", flat=True).get(pk=endpoint.pk)


def make_tool(*endpoints: Endpoint, name: str = "echo") -> Tool:
    return tool_create(
        name=name, kind=Tool.Kind.PYTHON, config={"function": "echo"}, endpoints=endpoints
    )


def assert_bumps_only_affected(
    two: tuple[Endpoint, Endpoint], change: Callable[[], object]
) -> None:
    affected, bystander = two
    before = version(affected), version(bystander)

    change()

    assert version(affected) > before[0]
    assert version(bystander) == before[1]


def test_catalog_changed_increments_in_one_update(
    two: tuple[Endpoint, Endpoint], django_assert_num_queries: object
) -> None:
    affected, bystander = two

    with django_assert_num_queries(1):  # type: ignore[operator]
        catalog_changed(endpoint_ids=[affected.pk, affected.pk])

    assert version(affected) == 2
    assert version(bystander) == 1


def test_editing_a_tool_bumps_its_endpoints(two: tuple[Endpoint, Endpoint]) -> None:
    tool = make_tool(two[0])

    def edit() -> None:
        tool.description = "Changed."
        tool.save()

    assert_bumps_only_affected(two, edit)


def test_toggling_enabled_bumps(two: tuple[Endpoint, Endpoint]) -> None:
    tool = make_tool(two[0])

    def disable() -> None:
        tool.enabled = False
        tool.save(update_fields=["enabled"])

    assert_bumps_only_affected(two, disable)


def test_deleting_a_tool_bumps_the_endpoints_it_was_on(two: tuple[Endpoint, Endpoint]) -> None:
    tool = make_tool(two[0])

    assert_bumps_only_affected(two, tool.delete)


@pytest.mark.parametrize(
    "change",
    [
        lambda endpoint, tool: endpoint.tools.add(tool),
        lambda endpoint, tool: tool.endpoints.add(endpoint),
    ],
    ids=["forward", "reverse"],
)
def test_attaching_a_tool_bumps(
    two: tuple[Endpoint, Endpoint], change: Callable[[Endpoint, Tool], None]
) -> None:
    tool = make_tool()

    assert_bumps_only_affected(two, lambda: change(two[0], tool))


@pytest.mark.parametrize(
    "change",
    [
        lambda endpoint, tool: endpoint.tools.remove(tool),
        lambda endpoint, tool: tool.endpoints.remove(endpoint),
        lambda endpoint, tool: endpoint.tools.clear(),
        lambda endpoint, tool: tool.endpoints.clear(),
    ],
    ids=["remove", "reverse-remove", "clear", "reverse-clear"],
)
def test_detaching_a_tool_bumps(
    two: tuple[Endpoint, Endpoint], change: Callable[[Endpoint, Tool], None]
) -> None:
    tool = make_tool(two[0])

    assert_bumps_only_affected(two, lambda: change(two[0], tool))


def test_resource_template_and_prompt_edits_bump(two: tuple[Endpoint, Endpoint]) -> None:
    resource = resource_create(uri="demo://a", name="a", text="x", endpoints=[two[0]])
    template = resource_template_create(
        uri_template="demo://t/{x}", name="t", kind="template", config={"template": "{{ x }}"},
        endpoints=[two[0]],
    )  # fmt: skip
    prompt = prompt_create(name="p", description="d", arguments=[{"name": "a"}], endpoints=[two[0]])

    for row in (resource, template, prompt):
        row.title = "new title"
        assert_bumps_only_affected(two, row.save)
    assert_bumps_only_affected(two, lambda: prompt.arguments.get().delete())
    assert_bumps_only_affected(
        two, lambda: prompt.messages.create(role="user", kind="text", text="hi")
    )
    for model in (Resource, ResourceTemplate, Prompt):
        assert_bumps_only_affected(two, model.objects.get().delete)


def test_editing_the_endpoint_itself_bumps_it(two: tuple[Endpoint, Endpoint]) -> None:
    affected = two[0]

    def edit() -> None:
        affected.instructions = "New instructions."
        affected.save()

    assert_bumps_only_affected(two, edit)


def test_a_new_unattached_tool_bumps_nothing(two: tuple[Endpoint, Endpoint]) -> None:
    before = [version(endpoint) for endpoint in two]

    make_tool()

    assert [version(endpoint) for endpoint in two] == before
