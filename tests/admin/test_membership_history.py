"""What an endpoint publishes, in its history: every attach and detach from either side, at a
cost set by the change and not the endpoint's size, shown in diffs and restored by a revert."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from mcp_app.models import Endpoint, MembershipChange, Prompt, Resource, Tool
from mcp_app.services import history
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from tests.admin.test_endpoint_admin import endpoint_payload

pytestmark = pytest.mark.django_db

ADDED, REMOVED = MembershipChange.Action.ADDED, MembershipChange.Action.REMOVED


def make_tool(name: str) -> Tool:
    return tool_create(name=name, kind="python", config={"function": "echo"})


@pytest.fixture
def endpoint(db: None) -> Endpoint:
    return endpoint_create(slug="shop")


def changes_of(endpoint: Endpoint) -> list[tuple[str, str, str]]:
    """(kind, name, action) of the endpoint's recorded changes, oldest first."""
    rows = MembershipChange.objects.filter(endpoint_id=endpoint.pk).order_by("changed_at", "id")
    return [(row.kind, row.item_name, row.action) for row in rows]


def save_endpoint(client: Client, endpoint: Endpoint, tools: list[Tool]) -> None:
    response = client.post(
        reverse("admin:mcp_app_endpoint_change", args=[endpoint.pk]),
        endpoint_payload(slug=endpoint.slug, tools=[str(tool.pk) for tool in tools]),
    )
    assert response.status_code == 302, response.context and response.context["errors"]


def test_attaches_and_detaches_from_either_side_are_recorded(
    endpoint: Endpoint, admin_client: Client, admin_user: User
) -> None:
    echo, add, gone = make_tool("echo"), make_tool("add"), make_tool("gone")
    prompt = Prompt.objects.create(name="review")
    resource = Resource.objects.create(uri="file:///readme", name="readme", text="hi")

    endpoint.tools.add(echo, gone)
    add.endpoints.add(endpoint)  # the other side
    endpoint.prompts.add(prompt)
    resource.endpoints.add(endpoint)
    endpoint.tools.remove(echo, echo)
    endpoint.tools.remove(echo)  # no longer attached: nothing to record
    gone.delete()  # its attachment goes with it
    endpoint.prompts.clear()
    save_endpoint(admin_client, endpoint, [echo, add])  # the admin form: echo back

    assert changes_of(endpoint) == [
        ("tool", "echo", ADDED),
        ("tool", "gone", ADDED),
        ("tool", "add", ADDED),
        ("prompt", "review", ADDED),
        ("resource", "file:///readme", ADDED),
        ("tool", "echo", REMOVED),
        ("tool", "gone", REMOVED),
        ("prompt", "review", REMOVED),
        ("tool", "echo", ADDED),
        ("resource", "file:///readme", REMOVED),  # the form's resources were empty
    ]
    last = MembershipChange.objects.filter(endpoint_id=endpoint.pk).first()
    assert last is not None
    assert (last.changed_by, last.source) == (admin_user, history.ADMIN)


def test_recording_costs_the_change_not_the_size_of_the_endpoint(endpoint: Endpoint) -> None:
    small = endpoint_create(slug="small")
    small.tools.add(make_tool("s1"))
    big = Tool.objects.bulk_create(
        Tool(name=f"t{n}", kind="python", config={"function": "echo"}) for n in range(300)
    )
    endpoint.tools.add(*big)  # one add: one insert for all of them
    assert MembershipChange.objects.filter(endpoint_id=endpoint.pk).count() == 300

    def queries_to_attach_and_detach(target: Endpoint, tool: Tool) -> int:
        before = MembershipChange.objects.count()
        with CaptureQueriesContext(connection) as queries:
            target.tools.add(tool)
            target.tools.remove(tool)
        assert MembershipChange.objects.count() == before + 2
        return len(queries)

    assert queries_to_attach_and_detach(endpoint, make_tool("one")) == (
        queries_to_attach_and_detach(small, make_tool("two"))
    )


def test_a_diff_of_two_endpoint_versions_names_the_rows_that_moved(
    endpoint: Endpoint, admin_client: Client
) -> None:
    echo, add, search = make_tool("echo"), make_tool("add"), make_tool("search")
    save_endpoint(admin_client, endpoint, [echo, add])
    first = endpoint.history.latest().history_id
    save_endpoint(admin_client, endpoint, [add])
    search.endpoints.add(endpoint)  # between two endpoint saves, from the tool's side
    save_endpoint(admin_client, endpoint, [add, search])
    last = endpoint.history.latest().history_id

    compare = reverse("admin:mcp_app_endpoint_history_compare", args=[endpoint.pk])
    page = admin_client.get(compare, {"a": first, "b": last})

    assert page.status_code == 200
    changes = {change.field: change for change in page.context["changes"]}
    assert (changes["tools"].old, changes["tools"].new) == ("echo", "search")
    assert "<del>echo</del>" in page.content.decode()
    # The same version with itself: nothing moved.
    same = admin_client.get(compare, {"a": last, "b": last})
    assert "tools" not in {change.field for change in same.context["changes"]}


def test_reverting_an_endpoint_restores_what_it_published(
    endpoint: Endpoint, admin_client: Client, django_capture_on_commit_callbacks: Any
) -> None:
    echo, add, search = make_tool("echo"), make_tool("add"), make_tool("search")
    save_endpoint(admin_client, endpoint, [echo, add])
    version = endpoint.history.latest().history_id
    save_endpoint(admin_client, endpoint, [search])
    catalog_version = Endpoint.objects.get(pk=endpoint.pk).catalog_version
    page_url = reverse("admin:mcp_app_endpoint_simple_history", args=[endpoint.pk, version])

    # The version page shows that version's tools, not today's.
    page = admin_client.get(page_url)
    assert page.status_code == 200
    assert page.context["adminform"].form.initial["tools"] == sorted([echo.pk, add.pk])
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            page_url, endpoint_payload(slug=endpoint.slug, tools=[str(echo.pk), str(add.pk)])
        )

    assert response.status_code == 302
    assert set(endpoint.tools.all()) == {echo, add}
    assert Endpoint.objects.get(pk=endpoint.pk).catalog_version > catalog_version
    reverted = changes_of(endpoint)[-3:]
    assert reverted[0] == ("tool", "search", REMOVED)
    assert sorted(reverted[1:]) == [("tool", "add", ADDED), ("tool", "echo", ADDED)]


def test_a_version_page_leaves_out_rows_deleted_since(
    endpoint: Endpoint, admin_client: Client
) -> None:
    echo, gone = make_tool("echo"), make_tool("gone")
    save_endpoint(admin_client, endpoint, [echo, gone])
    version = endpoint.history.latest().history_id
    save_endpoint(admin_client, endpoint, [])
    gone.delete()

    page = admin_client.get(
        reverse("admin:mcp_app_endpoint_simple_history", args=[endpoint.pk, version])
    )

    assert page.context["adminform"].form.initial["tools"] == [echo.pk]


def test_the_history_page_and_recent_changes_list_attaches(
    endpoint: Endpoint, admin_client: Client, admin_user: User
) -> None:
    echo = make_tool("echo")
    save_endpoint(admin_client, endpoint, [echo])

    page = admin_client.get(reverse("admin:mcp_app_endpoint_history", args=[endpoint.pk]))
    assert page.status_code == 200
    assert [str(change) for change in page.context["membership_history"]] == ["tool echo"]
    assert 'id="membership-history"' in page.content.decode()

    recent = admin_client.get(
        reverse("admin:mcp_app_recent_changes"),
        {"endpoint": endpoint.pk, "user": admin_user.pk},
    )
    attached = [
        row["change"] for row in recent.context["rows"] if row["change"].model is MembershipChange
    ]
    assert [(change.what, change.change) for change in attached] == [
        ("tool echo on endpoint shop", "Attached")
    ]
    assert attached[0].owner_id == endpoint.pk
    assert "tool echo on endpoint shop" in recent.content.decode()
