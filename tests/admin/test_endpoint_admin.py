"""Endpoint admin: catalog pickers, tool-name clashes, and the tools/list preview page."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from mcp_app.models import Endpoint, Tool
from mcp_app.services.catalog_io import (
    catalog_dump,
    catalog_export,
    catalog_parse,
    catalog_with_end,
)
from mcp_app.services.catalog_writes import tool_create


def endpoint_payload(**overrides: Any) -> dict[str, Any]:
    return {
        "slug": "shop",
        "title": "Shop",
        "description": "",
        "instructions": "",
        "enabled": "on",
        "allowed_origins": "",
        "tools": [],
        "resources": [],
        "resource_templates": [],
        "prompts": [],
        "auth_mode": "oauth",
        "scopes": "mcp:read Use the endpoint",
        "base_scope": "mcp:read",
        **overrides,
    }


def make_tool(name: str, function: str = "echo", **fields: Any) -> Tool:
    return tool_create(name=name, kind="python", config={"function": function}, **fields)


@pytest.mark.django_db
def test_endpoint_with_tools_is_created(admin_client: Client) -> None:
    echo, add = make_tool("echo"), make_tool("add", "add")

    response = admin_client.post(
        reverse("admin:mcp_app_endpoint_add"),
        endpoint_payload(tools=[str(echo.pk), str(add.pk)], allowed_origins="https://a.example"),
    )

    assert response.status_code == 302
    endpoint = Endpoint.objects.get(slug="shop")
    assert sorted(endpoint.tools.values_list("name", flat=True)) == ["add", "echo"]
    assert endpoint.origin_list() == ("https://a.example",)


@pytest.mark.django_db
def test_two_tools_with_one_name_cannot_share_an_endpoint(admin_client: Client) -> None:
    first, second = make_tool("search"), make_tool("search", "add")

    response = admin_client.post(
        reverse("admin:mcp_app_endpoint_add"),
        endpoint_payload(tools=[str(first.pk), str(second.pk)]),
    )

    assert response.status_code == 200
    form = response.context["adminform"].form
    assert form.errors["tools"] == ["Two of the selected tools are named 'search'."]
    assert not Endpoint.objects.exists()


@pytest.mark.django_db
def test_allowed_origins_must_be_origins(admin_client: Client) -> None:
    response = admin_client.post(
        reverse("admin:mcp_app_endpoint_add"),
        endpoint_payload(allowed_origins="https://ok.example\nhttps://x.example/path"),
    )

    form = response.context["adminform"].form
    assert form.errors["allowed_origins"][0].startswith(
        "Line 2: 'https://x.example/path' is not an origin"
    )


@pytest.mark.django_db
def test_preview_shows_tools_list_for_the_newest_revision_of_each_era(
    admin_client: Client, endpoint: Endpoint
) -> None:
    make_tool("add", "add", endpoints=[endpoint])
    make_tool("hidden", enabled=False, endpoints=[endpoint])

    response = admin_client.get(reverse("admin:mcp_app_endpoint_preview", args=[endpoint.pk]))

    assert response.status_code == 200
    previews = {p["version"]: json.loads(p["json"]) for p in response.context["previews"]}
    assert list(previews) == ["2026-07-28", "2025-11-25"]
    for listed in previews.values():
        (tool,) = listed["tools"]
        assert tool["name"] == "add"
        assert tool["outputSchema"]["type"] == "object"
    assert b"tools/list preview" in response.content


@pytest.mark.django_db
def test_change_page_and_list_link_to_connect_and_preview(
    admin_client: Client, endpoint: Endpoint
) -> None:
    connect = reverse("mcp_app:endpoint_connect", args=["test"]).encode()
    preview = reverse("admin:mcp_app_endpoint_preview", args=[endpoint.pk]).encode()

    change = admin_client.get(reverse("admin:mcp_app_endpoint_change", args=[endpoint.pk]))
    listing = admin_client.get(reverse("admin:mcp_app_endpoint_changelist"))

    for response in (change, listing):
        assert response.status_code == 200
        assert connect in response.content
        assert preview in response.content
    assert b"http://127.0.0.1:8000/mcp/test" in change.content


@pytest.mark.django_db
def test_preview_requires_staff(client: Client, endpoint: Endpoint) -> None:
    response = client.get(reverse("admin:mcp_app_endpoint_preview", args=[endpoint.pk]))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_selected_endpoints_are_exported_as_the_import_file(admin_client: Client, fmt: str):
    shop = Endpoint.objects.create(slug="shop", title="Shop")
    cafe = Endpoint.objects.create(slug="cafe", title="Cafe")
    Endpoint.objects.create(slug="left-out", title="Not selected")
    make_tool("echo", endpoints=[shop])

    response = admin_client.post(
        reverse("admin:mcp_app_endpoint_changelist"),
        {"action": f"export_{fmt}", "_selected_action": [shop.pk, cafe.pk]},
    )

    assert response.status_code == 200
    assert response["Content-Disposition"] == f'attachment; filename="endpoints.{fmt}"'
    body = response.getvalue().decode()
    expected = catalog_with_end(catalog_export(endpoint_slugs=["cafe", "shop"]))
    assert body == catalog_dump(expected, fmt=fmt)
    document = catalog_parse(body)
    assert [endpoint["slug"] for endpoint in document["endpoints"]] == ["cafe", "shop"]
    assert [tool["name"] for tool in document["tools"]] == ["echo"]
