"""What the history pages say (issue #28): every breadcrumb level links, the source column is
called Source, a version names who made it and where, compared fields by their labels, no
revert offered to whoever cannot change the row, and a revert says which version it restored."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from mcp_app.models import Endpoint, Tool
from tests.admin.conftest import tool_payload

pytestmark = pytest.mark.django_db


def edit(client: Client, tool: Tool, endpoint: Endpoint, description: str) -> int:
    response = client.post(
        reverse("admin:mcp_app_tool_change", args=[tool.pk]),
        tool_payload(description=description, endpoints=[str(endpoint.pk)]),
    )
    assert response.status_code == 302, response.context and response.context["errors"]
    return int(tool.history.latest().history_id)


def compare(client: Client, tool: Tool, a: int, b: int) -> str:
    response = client.get(
        reverse("admin:mcp_app_tool_history_compare", args=[tool.pk]), {"a": a, "b": b}
    )
    assert response.status_code == 200
    return str(response.content.decode())


def viewer() -> Client:
    """A staff user who may view tools, of no team (so every team's rows), but change none."""
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_tool", "manage_every_team"])
    )
    client = Client()
    client.force_login(user)
    return client


def test_the_compare_breadcrumbs_link_every_level(
    admin_client: Client, greet: Tool, endpoint: Endpoint
) -> None:
    first = greet.history.latest().history_id
    last = edit(admin_client, greet, endpoint, "Says hello.")

    page = compare(admin_client, greet, first, last)

    crumbs = re.search(r'<div class="breadcrumbs">(.*?)</div>', page, re.S)
    assert crumbs is not None
    links = re.findall(r'<a href="([^"]+)">([^<]+)</a>', crumbs.group(1))
    assert links == [
        (reverse("admin:index"), "Home"),
        (reverse("admin:app_list", args=["mcp_app"]), "MCP endpoints"),
        (reverse("admin:mcp_app_tool_changelist"), "Tools"),
        (reverse("admin:mcp_app_tool_change", args=[greet.pk]), "greet"),
        (reverse("admin:mcp_app_tool_history", args=[greet.pk]), "History"),
    ]
    assert crumbs.group(1).rstrip().endswith("&rsaquo; Compare")


def test_a_version_names_who_made_it_and_where(
    admin_client: Client, greet: Tool, endpoint: Endpoint
) -> None:
    last = edit(admin_client, greet, endpoint, "Says hello.")

    page = admin_client.get(reverse("admin:mcp_app_tool_history", args=[greet.pk]))
    text = page.content.decode()

    assert '<th scope="col">Source</th>' in text
    assert "Change reason" not in text
    option = re.search(rf'<option value="{last}" selected>([^<]+)</option>', text)
    assert option is not None
    assert re.fullmatch(
        rf"Version #{last} \(\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC, by admin via the admin\)",
        option.group(1),
    ), option.group(1)


def test_compared_fields_are_named_by_their_labels(
    admin_client: Client, greet: Tool, endpoint: Endpoint
) -> None:
    first = greet.history.latest().history_id
    last = edit(admin_client, greet, endpoint, "Says hello.")

    page = compare(admin_client, greet, first, last)

    row = re.search(r'<tr data-field="description">\s*<th>([^<]+)</th>', page)
    assert row is not None and row.group(1) == "Description"
    assert "by admin via the admin" in page


def test_no_revert_is_offered_to_a_user_who_cannot_change_the_row(
    admin_client: Client, greet: Tool, endpoint: Endpoint
) -> None:
    first = greet.history.latest().history_id
    last = edit(admin_client, greet, endpoint, "Says hello.")

    shown = compare(viewer(), greet, first, last)
    offered = compare(admin_client, greet, first, last)

    assert "revert" not in shown.lower()
    assert "to revert to it" in offered


def test_a_revert_says_which_version_it_restored(
    admin_client: Client, greet: Tool, endpoint: Endpoint
) -> None:
    edit(admin_client, greet, endpoint, "Says hello.")
    middle = edit(admin_client, greet, endpoint, "Says hello twice.")
    edit(admin_client, greet, endpoint, "Says hello thrice.")

    response = admin_client.post(
        reverse("admin:mcp_app_tool_simple_history", args=[greet.pk, middle]),
        tool_payload(description="Says hello twice.", endpoints=[str(endpoint.pk)]),
    )

    assert response.status_code == 302
    assert response["Location"] == reverse("admin:mcp_app_tool_history", args=[greet.pk])
    # The edits' own messages are still queued: the revert's is the last.
    message = [str(m) for m in get_messages(response.wsgi_request)][-1]
    assert message.startswith(f"The tool \u201cgreet\u201d was reverted to version #{middle} (")
    assert "by admin via the admin)" in message
    assert "changed successfully" not in message
    greet.refresh_from_db()
    assert greet.description == "Says hello twice."
