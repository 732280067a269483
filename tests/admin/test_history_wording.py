"""What the history pages say (issue #28): every breadcrumb level links."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from mcp_app.models import Endpoint, Tool
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from tests.admin.conftest import tool_payload

pytestmark = pytest.mark.django_db


@pytest.fixture
def endpoint(db: None) -> Endpoint:
    return endpoint_create(slug="wording")


@pytest.fixture
def greet(endpoint: Endpoint) -> Tool:
    return tool_create(
        name="greet",
        kind=Tool.Kind.TEMPLATE,
        config={"template": "Hello {{ name }}!", "output": "text"},
        description="Greets someone.",
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        endpoints=[endpoint],
    )


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
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename="view_tool"))
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
