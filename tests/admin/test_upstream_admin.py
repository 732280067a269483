"""The upstream admin: health and breaker shown, the breaker reset, tools, resources and prompts
imported and re-synced.

The upstream is the SDK server of ``tests/support/mcp_upstream_server.py`` on 127.0.0.1; the
sync page lists it over HTTP as it would in production (``transaction=True``: the listing
reads the row from another thread's connection).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from mcp_app.models import Prompt, Resource, ResourceTemplate, Tool, Upstream
from mcp_app.protocol.shaping import shape_tool
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from mcp_app.services.snapshots import tool_def
from tests.admin.conftest import tool_payload
from tests.support.mcp_upstream_server import RunningUpstream, run_mcp_upstream

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory: Any) -> Iterator[RunningUpstream]:
    with run_mcp_upstream(tmp_path_factory.mktemp("admin")) as running:
        yield running


def make_upstream(url: str, **fields: Any) -> Upstream:
    return Upstream.objects.create(name="up", url=url, allow_networks="127.0.0.1/32", **fields)


def sync_url(upstream: Upstream) -> str:
    return reverse("admin:mcp_app_upstream_sync", args=[upstream.pk])


def test_the_change_list_shows_the_breaker_state(admin_client: Client) -> None:
    make_upstream(
        "http://127.0.0.1:9/mcp",
        consecutive_failures=5,
        circuit_open_until=timezone.now() + datetime.timedelta(minutes=5),
    )
    response = admin_client.get(reverse("admin:mcp_app_upstream_changelist"))
    assert b"breaker open until" in response.content


def test_the_reset_action_closes_the_breaker(admin_client: Client) -> None:
    upstream = make_upstream(
        "http://127.0.0.1:9/mcp",
        consecutive_failures=5,
        circuit_open_until=timezone.now() + datetime.timedelta(minutes=5),
    )
    admin_client.post(
        reverse("admin:mcp_app_upstream_changelist"),
        {"action": "reset_breaker", "_selected_action": [upstream.pk]},
    )
    upstream.refresh_from_db()
    assert not upstream.circuit_open and upstream.consecutive_failures == 0


def test_import_creates_disabled_drafts_renamed_on_collision(
    admin_client: Client, server: RunningUpstream
) -> None:
    upstream = make_upstream(server.url)
    main = endpoint_create(slug="main")
    tool_create(
        name="echo", description="Ours.", kind="template", config={"template": "x"},
        endpoints=[main],
    )  # fmt: skip
    page = admin_client.get(sync_url(upstream))
    assert page.status_code == 200
    added = [remote["name"] for remote in page.context["plan"].added]
    assert {"echo", "add", "mixed"} <= set(added)

    admin_client.post(sync_url(upstream), {"add": ["echo", "add"], "endpoint": [str(main.pk)]})

    drafts = {tool.name: tool for tool in Tool.objects.filter(kind=Tool.Kind.MCP_UPSTREAM)}
    assert set(drafts) == {"up_echo", "add"}  # "echo" was taken on the endpoint
    assert drafts["up_echo"].config == {"upstream": "up", "tool": "echo"}
    assert not any(tool.enabled for tool in drafts.values())
    assert all(list(tool.endpoints.all()) == [main] for tool in drafts.values())
    assert drafts["add"].input_schema["required"] == ["a", "b"]
    assert drafts["add"].description == "Adds two integers."


def test_import_onto_other_endpoints_keeps_the_name_and_may_enable(
    admin_client: Client, server: RunningUpstream
) -> None:
    upstream = make_upstream(server.url)
    main, other = endpoint_create(slug="main"), endpoint_create(slug="other")
    tool_create(
        name="echo", description="Ours.", kind="template", config={"template": "x"},
        endpoints=[main],
    )  # fmt: skip

    admin_client.post(
        sync_url(upstream), {"add": ["echo"], "endpoint": [str(other.pk)], "enable": "on"}
    )

    draft = Tool.objects.get(kind=Tool.Kind.MCP_UPSTREAM)
    assert (draft.name, draft.enabled, list(draft.endpoints.all())) == ("echo", True, [other])


def test_publishing_synced_rows_needs_the_endpoint_permission(
    client: Client, server: RunningUpstream, django_user_model: Any
) -> None:
    upstream = make_upstream(server.url)
    main = endpoint_create(slug="main")
    user = django_user_model.objects.create_user("syncer", password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["add_tool", "change_tool", "view_upstream", "manage_every_team"]
        )
    )
    client.force_login(user)

    page = client.get(sync_url(upstream))
    assert b'id="sync-endpoints"' not in page.content
    response = client.post(
        sync_url(upstream),
        {"add": ["echo"], "endpoint": [str(main.pk)], "enable": "on"},
        follow=True,
    )

    assert [str(m) for m in response.context["messages"]] == [
        "Publishing on endpoints needs the permission mcp_app.change_endpoint. Nothing was applied."
    ]
    assert not Tool.objects.exists()


def test_resync_shows_changed_and_removed_and_applies_the_ticked(
    admin_client: Client, server: RunningUpstream
) -> None:
    upstream = make_upstream(server.url)
    admin_client.post(sync_url(upstream), {"add": ["echo", "add"]})
    stale = Tool.objects.get(name="echo")
    stale.input_schema = {"type": "object"}
    stale.save()
    Tool.objects.create(
        name="gone",
        description="No longer upstream.",
        kind=Tool.Kind.MCP_UPSTREAM,
        config={"upstream": "up", "tool": "gone"},
    )

    plan = admin_client.get(sync_url(upstream)).context["plan"]
    assert [row.name for row, _remote in plan.changed] == ["echo"]
    assert [row.name for row in plan.removed] == ["gone"]
    assert [row.name for row in plan.unchanged] == ["add"]

    admin_client.post(sync_url(upstream), {"update": ["echo"], "remove": ["gone"]})
    stale.refresh_from_db()
    assert stale.input_schema["required"] == ["text"]
    assert not Tool.objects.get(name="gone").enabled
    assert not Tool.objects.filter(name="mixed").exists()  # not ticked: not created


def test_an_unreachable_upstream_is_reported_on_the_sync_page(admin_client: Client) -> None:
    upstream = make_upstream("http://127.0.0.1:9/mcp")
    response = admin_client.get(sync_url(upstream))
    assert b"Could not list what the upstream offers" in response.content


def test_an_imported_tool_is_enabled_and_edited_like_any_other(
    admin_client: Client, server: RunningUpstream
) -> None:
    upstream = make_upstream(server.url)
    admin_client.post(sync_url(upstream), {"add": ["add"]})
    tool = Tool.objects.get(name="add")
    payload = tool_payload(
        name="add",
        kind="mcp_upstream",
        template="",
        title="Adder",
        description="Adds, upstream.",
        input_schema=tool.input_schema,
        output_schema=tool.output_schema or "",
        # The kind's own fields, as the form shows them filled from the config.
        upstream_name="up",
        upstream_tool="add",
    )
    response = admin_client.post(reverse("admin:mcp_app_tool_change", args=[tool.pk]), payload)
    assert response.status_code == 302, response.context["adminform"].form.errors
    tool.refresh_from_db()
    assert (tool.title, tool.enabled) == ("Adder", True)
    assert tool.config == {"upstream": "up", "tool": "add"}


def test_a_tool_list_change_shows_until_the_next_sync(
    admin_client: Client, server: RunningUpstream
) -> None:
    upstream = make_upstream(server.url, tools_changed_at=timezone.now())
    listing = admin_client.get(reverse("admin:mcp_app_upstream_changelist"))
    assert b"out of sync" in listing.content
    assert b"tool list changed" in admin_client.get(sync_url(upstream)).content
    admin_client.post(sync_url(upstream), {})
    upstream.refresh_from_db()
    assert not upstream.tools_out_of_sync


def test_an_upstream_tool_is_made_from_its_form_fields(
    admin_client: Client, server: RunningUpstream
) -> None:
    make_upstream(server.url)
    payload = tool_payload(
        name="remote_add", kind="mcp_upstream", template="", upstream_name="up", upstream_tool="add"
    )
    response = admin_client.post(reverse("admin:mcp_app_tool_add"), payload)
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Tool.objects.get(name="remote_add").config == {"upstream": "up", "tool": "add"}


def test_an_upstream_tool_without_its_upstream_is_refused_and_not_saved(
    admin_client: Client,
) -> None:
    payload = tool_payload(name="remote_add", kind="mcp_upstream", template="", upstream_name="")
    response = admin_client.post(reverse("admin:mcp_app_tool_add"), payload)
    assert response.status_code == 200
    assert "upstream_name" in response.context["adminform"].form.errors
    assert not Tool.objects.filter(name="remote_add").exists()


def test_resources_and_prompts_are_imported_as_disabled_drafts_renamed_on_collision(
    admin_client: Client, server: RunningUpstream
) -> None:
    upstream = make_upstream(server.url)
    Resource.objects.create(uri="up://readme", name="ours", text="Ours.")
    page = admin_client.get(sync_url(upstream))
    assert {r["uri"] for r in page.context["resources"].added} == {"up://readme", "up://pixel.png"}
    assert [p["name"] for p in page.context["prompts"].added] == ["review"]

    admin_client.post(
        sync_url(upstream),
        {"add_resource": ["up://readme", "up://pixel.png"], "add_prompt": "review"},
    )

    renamed = Resource.objects.get(upstream=upstream, remote_uri="up://readme")
    assert renamed.uri == "mcp-upstream://up/up%3A%2F%2Freadme"
    pixel = Resource.objects.get(uri="up://pixel.png")
    assert (pixel.upstream, pixel.mime_type, pixel.enabled) == (upstream, "image/png", False)
    review = Prompt.objects.get(name="review")
    assert (review.upstream, review.enabled) == (upstream, False)
    assert [(a.name, a.required) for a in review.arguments.all()] == [
        ("code", True),
        ("language", False),
    ]
    again = admin_client.get(sync_url(upstream)).context
    assert not again["resources"].added and len(again["resources"].unchanged) == 2
    assert not again["prompts"].added and not again["prompts"].changed


def test_resource_templates_are_imported_renamed_on_collision_and_disabled_when_gone(
    admin_client: Client, server: RunningUpstream
) -> None:
    upstream = make_upstream(server.url)
    ResourceTemplate.objects.create(
        uri_template="up://notes/{topic}", name="ours", config={"template": "x"}
    )
    page = admin_client.get(sync_url(upstream))
    assert [t["uriTemplate"] for t in page.context["templates"].added] == ["up://notes/{topic}"]
    assert 'name="add_template"' in page.content.decode()

    admin_client.post(sync_url(upstream), {"add_template": "up://notes/{topic}"})

    imported = ResourceTemplate.objects.get(upstream=upstream)
    assert (imported.uri_template, imported.remote_uri_template) == (
        "mcp-upstream://up/up/notes/{topic}",
        "up://notes/{topic}",
    )
    assert (imported.kind, imported.mime_type, imported.enabled) == (
        "upstream",
        "text/plain",
        False,
    )
    assert imported.history.latest().history_change_reason == "upstream sync"
    gone = ResourceTemplate.objects.create(
        uri_template="up://gone/{x}", name="gone", kind="upstream", upstream=upstream
    )
    page = admin_client.get(sync_url(upstream)).context
    assert page["templates"].removed == [gone] and page["templates"].unchanged == [imported]

    admin_client.post(sync_url(upstream), {"remove_template": "up://gone/{x}"})

    gone.refresh_from_db()
    assert not gone.enabled


def test_a_prompt_whose_arguments_changed_takes_them_and_gone_rows_are_disabled(
    admin_client: Client, server: RunningUpstream
) -> None:
    upstream = make_upstream(server.url)
    admin_client.post(sync_url(upstream), {"add_prompt": "review"})
    review = Prompt.objects.get(name="review")
    review.arguments.filter(name="language").delete()
    gone = Resource.objects.create(uri="up://gone", name="gone", upstream=upstream, enabled=True)

    page = admin_client.get(sync_url(upstream)).context
    assert [row.name for row, _remote in page["prompts"].changed] == ["review"]
    assert page["resources"].removed == [gone]

    admin_client.post(
        sync_url(upstream), {"update_prompt": "review", "remove_resource": "up://gone"}
    )

    assert [a.name for a in review.arguments.all()] == ["code", "language"]
    gone.refresh_from_db()
    assert not gone.enabled


def test_what_a_sync_creates_is_recorded_as_an_upstream_sync(
    admin_client: Client, server: RunningUpstream
) -> None:
    upstream = make_upstream(server.url)

    admin_client.post(sync_url(upstream), {"add": "echo", "add_prompt": "review"})

    for row in (Tool.objects.get(name="echo"), Prompt.objects.get(name="review")):
        assert row.history.latest().history_change_reason == "upstream sync"


def test_import_keeps_meta_icons_and_task_support_and_tools_list_serves_them(
    admin_client: Client, server: RunningUpstream
) -> None:
    upstream = make_upstream(server.url)
    admin_client.post(sync_url(upstream), {"add": ["report"]})

    draft = Tool.objects.get(kind=Tool.Kind.MCP_UPSTREAM, name="report")
    icons = [{"src": "https://example.com/report.png", "mimeType": "image/png", "sizes": ["48x48"]}]
    assert draft.meta == {"com.example/owner": "reports"}
    assert draft.icons == icons
    # Optional task support: inline, unless the client asks for a task.
    assert (draft.execution_mode, draft.task_support) == ("auto", "optional")
    listed = shape_tool(tool_def(draft), "2025-11-25")
    assert listed["_meta"] == {"com.example/owner": "reports"}
    assert listed["icons"] == icons
    assert listed["execution"] == {"taskSupport": "optional"}


def test_a_resync_offers_what_the_upstream_changed_field_by_field(
    admin_client: Client, server: RunningUpstream, tmp_path: Any
) -> None:
    upstream = make_upstream(server.url)
    admin_client.post(sync_url(upstream), {"add": ["echo"]})
    with run_mcp_upstream(tmp_path, upgraded=True) as upgraded:
        Upstream.objects.filter(pk=upstream.pk).update(url=upgraded.url)
        page = admin_client.get(sync_url(upstream))
        text = page.content.decode()
        admin_client.post(sync_url(upstream), {"update": ["echo"]})

    [(row, _remote)] = page.context["plan"].changed
    assert set(page.context["plan"].fields["echo"]) == {
        "title", "description", "destructive_hint", "read_only_hint", "meta",
    }  # fmt: skip
    assert "destructive_hint" in text and "Returns the text, unchanged." in text
    row.refresh_from_db()
    assert (row.description, row.destructive_hint, row.read_only_hint) == (
        "Returns the text, unchanged.",
        False,
        True,
    )
    assert row.history.latest().history_change_reason == "upstream sync"


def test_a_resource_and_prompt_the_upstream_changed_show_field_by_field_and_apply(
    admin_client: Client, server: RunningUpstream, admin_user: Any
) -> None:
    upstream = make_upstream(server.url)
    admin_client.post(sync_url(upstream), {"add_resource": "up://readme", "add_prompt": "review"})
    readme = Resource.objects.get(uri="up://readme")
    review = Prompt.objects.get(name="review")
    # As if the upstream had changed both since that sync: our rows and what it took then
    # hold the older words; the operator's own title on the readme is no difference.
    upstream.refresh_from_db()
    synced = upstream.synced_items
    synced["resources"]["up://readme"]["description"] = "Old words."
    synced["prompts"]["review"]["description"] = "Old words."
    Upstream.objects.filter(pk=upstream.pk).update(synced_items=synced)
    Resource.objects.filter(pk=readme.pk).update(description="Old words.", title="Ours")
    Prompt.objects.filter(pk=review.pk).update(description="Old words.")

    page = admin_client.get(sync_url(upstream))
    assert [(key, list(fields)) for _row, key, fields in page.context["resources"].changes()] == [
        ("up://readme", ["description"])
    ]
    assert [(key, list(fields)) for _row, key, fields in page.context["prompts"].changes()] == [
        ("review", ["description"])
    ]
    assert b'name="update_resource" value="up://readme"' in page.content

    admin_client.post(sync_url(upstream), {"update_resource": "up://readme",
                                           "update_prompt": "review"})  # fmt: skip

    readme.refresh_from_db()
    review.refresh_from_db()
    assert (readme.title, readme.description) == ("Ours", "The upstream's readme.")
    assert review.description == "Asks for a review of some code."
    latest = readme.history.latest()
    assert (latest.history_change_reason, latest.history_user) == ("upstream sync", admin_user)
