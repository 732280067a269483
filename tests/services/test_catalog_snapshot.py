"""build_snapshot: what an endpoint publishes, in order, in a bounded number of queries."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from pytest_django import DjangoAssertNumQueries

from mcp_app.executors.template import TemplateExecutor
from mcp_app.models import Endpoint, Tool, Upstream
from mcp_app.protocol.catalog import (
    CatalogSnapshot,
    PromptArgumentDef,
    PromptMessageDef,
    ResourceDef,
    ToolDef,
)
from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.versions import LATEST_LEGACY
from mcp_app.services.catalog_writes import (
    endpoint_create,
    prompt_create,
    resource_create,
    resource_template_create,
    tool_create,
)
from mcp_app.services.context_factory import request_context
from mcp_app.services.runner import CatalogToolRunner
from mcp_app.services.snapshots import ResourceBinding, ToolBinding, build_snapshot

VERBATIM_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"age": {"type": "integer", "minimum": 0}},
    "properties": {"age": {"$ref": "#/$defs/age"}},
    "additionalProperties": False,
}


def template_tool(name: str, endpoint: Endpoint, **fields: Any) -> Tool:
    return tool_create(
        name=name,
        kind=Tool.Kind.TEMPLATE,
        config={"template": "hi"},
        description=f"The {name} tool.",
        endpoints=[endpoint],
        **fields,
    )


def test_snapshot_lists_enabled_tools_sorted_by_name_with_wire_fields(
    endpoint: Endpoint,
) -> None:
    template_tool("zeta", endpoint)
    template_tool("off", endpoint, enabled=False)
    alpha = template_tool(
        "alpha",
        endpoint,
        title="Alpha",
        input_schema=VERBATIM_SCHEMA,
        output_schema={"type": "object"},
        read_only_hint=True,
        destructive_hint=False,
        icons=[{"src": "https://example.com/a.png", "mimeType": "image/png"}],
        meta={"com.example/tier": "gold"},
    )

    snapshot = build_snapshot(Endpoint.objects.get(pk=endpoint.pk))

    assert [tool.name for tool in snapshot.tools] == ["alpha", "zeta"]
    assert snapshot.tools[0] == ToolDef(
        name="alpha",
        title="Alpha",
        description="The alpha tool.",
        input_schema=VERBATIM_SCHEMA,
        output_schema={"type": "object"},
        annotations={"title": "Alpha", "readOnlyHint": True, "destructiveHint": False},
        icons=({"src": "https://example.com/a.png", "mimeType": "image/png"},),
        meta={"com.example/tier": "gold"},
        binding=ToolBinding(
            pk=alpha.pk,
            kind="template",
            config={"template": "hi"},
            prepared=TemplateExecutor().prepare({"template": "hi"}),
            # The version call-log rows name (services/history.py).
            history_id=alpha.history.latest().history_id,
        ),
    )
    assert snapshot.tools[0].binding.prepared == TemplateExecutor().prepare({"template": "hi"})
    assert snapshot.endpoint.slug == "test"
    assert snapshot.endpoint.instructions == "For tests."


def test_tools_of_other_endpoints_are_not_published(endpoint: Endpoint) -> None:
    other = endpoint_create(slug="other")
    template_tool("elsewhere", other)

    assert build_snapshot(endpoint).tools == ()


def test_resources_templates_and_prompts_are_published_with_their_parts(
    endpoint: Endpoint,
) -> None:
    readme = resource_create(
        uri="demo://readme", name="readme", mime_type="text/markdown", text="héllo",
        endpoints=[endpoint],
    )  # fmt: skip
    resource_create(uri="demo://off", name="off", text="x", enabled=False, endpoints=[endpoint])
    resource_template_create(
        uri_template="demo://notes/{topic}",
        name="notes",
        kind="template",
        config={"template": "{{ topic }}"},
        completions={"topic": ["a", "b"]},
        endpoints=[endpoint],
    )
    prompt_create(
        name="review",
        description="Review code.",
        arguments=[
            {"name": "code", "required": True},
            {"name": "language", "completion_values": "python\n\n go \n"},
        ],
        messages=[
            {"role": "user", "kind": "text", "text": "Review {code}"},
            {"role": "assistant", "kind": "resource_link", "uri": "demo://readme", "name": "r"},
        ],
        endpoints=[endpoint],
    )

    snapshot = build_snapshot(endpoint)

    assert snapshot.resources == (
        ResourceDef(
            uri="demo://readme",
            name="readme",
            mime_type="text/markdown",
            size=6,
            binding=ResourceBinding(pk=readme.pk, text="héllo"),
        ),
    )
    assert snapshot.resource_templates[0].completions == {"topic": ("a", "b")}
    prompt = snapshot.prompt("review")
    assert prompt is not None
    assert prompt.arguments == (
        PromptArgumentDef(name="code", required=True),
        PromptArgumentDef(name="language", completions=("python", "go")),
    )
    assert prompt.messages == (
        PromptMessageDef(role="user", kind="text", text="Review {code}"),
        PromptMessageDef(role="assistant", kind="resource_link", uri="demo://readme", name="r"),
    )


def fill_catalog(endpoint: Endpoint, count: int) -> None:
    for index in range(count):
        template_tool(f"tool{index}", endpoint)
        resource_create(uri=f"demo://r/{index}", name=f"r{index}", text="x", endpoints=[endpoint])
        prompt_create(
            name=f"prompt{index}",
            description="p",
            arguments=[{"name": "a"}],
            messages=[{"role": "user", "text": "{a}"}],
            endpoints=[endpoint],
        )


@pytest.mark.parametrize("count", [5, 50])
def test_snapshot_query_count_does_not_grow_with_the_catalog(
    count: int, endpoint: Endpoint, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    fill_catalog(endpoint, count)

    # One per kind of row, one per kind for its allowed groups, two for prompt parts, the
    # tools' change stamps and the newest history ids of the tools read.
    with django_assert_max_num_queries(12):
        snapshot = build_snapshot(endpoint)

    assert len(snapshot.tools) == len(snapshot.resources) == len(snapshot.prompts) == count


def test_a_rebuild_after_a_one_tool_edit_reads_and_redefines_only_that_tool(
    endpoint: Endpoint, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    fill_catalog(endpoint, 50)
    before = build_snapshot(endpoint)
    edited = Tool.objects.get(name="tool7")
    edited.description = "Edited."
    edited.save()

    with django_assert_max_num_queries(12) as queries:
        rebuilt = build_snapshot(endpoint)

    assert rebuilt.tool("tool7").description == "Edited."
    unchanged = [tool for tool in before.tools if tool.name != "tool7"]
    assert all(rebuilt.tool(tool.name) is tool for tool in unchanged)
    # The one read of full tool rows names just the edited tool.
    tool_rows = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith('SELECT "mcp_app_tool"."id", "mcp_app_tool"."created_at"')
    ]
    assert len(tool_rows) == 1 and f"IN ({edited.pk})" in tool_rows[0], tool_rows


def test_a_tool_whose_groups_changed_is_redefined_with_them(endpoint: Endpoint) -> None:
    tool = template_tool("guarded", endpoint)
    build_snapshot(endpoint)
    tool.allowed_groups.add(Group.objects.create(name="ops"))

    rebuilt = build_snapshot(endpoint)

    key = rebuilt.tool("guarded").binding
    assert isinstance(key, ToolBinding) and key.access.groups == frozenset({"ops"})


def test_only_an_endpoint_that_relays_from_an_upstream_binds_its_ports_to_the_caller(
    endpoint: Endpoint,
) -> None:
    """A request's context gets ports of its own (four objects, on every request) only where
    the caller matters: reads, prompts and completions relayed in the caller's session."""
    resource_create(uri="demo://readme", name="readme", text="hi", endpoints=[endpoint])
    plain = build_snapshot(endpoint)
    peer = Upstream.objects.create(name="peer", url="https://peer.example.com/mcp")
    prompt_create(name="review", description="Review.", upstream=peer, endpoints=[endpoint])
    endpoint.refresh_from_db()
    relayed = build_snapshot(endpoint)

    def ports(snapshot: CatalogSnapshot) -> RequestContext:
        return request_context(
            snapshot, version=LATEST_LEGACY, tools=CatalogToolRunner(), principal="user:7/client:3"
        )

    shared = request_context(plain, version=LATEST_LEGACY, tools=CatalogToolRunner())
    assert not plain.caller_bound and relayed.caller_bound
    for port in ("resources", "prompts", "completions", "watcher"):
        assert getattr(ports(plain), port) is getattr(shared, port)
        assert getattr(ports(relayed), port) is not getattr(shared, port)
        assert getattr(ports(relayed), port).caller == "user:7"
