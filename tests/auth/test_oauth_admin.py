"""Admin side of OAuth: endpoint auth settings and item access rules are validated; clients are
listed with where they came from."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from oauth2_provider.models import Application

from mcp_app.models import Endpoint, Tool
from tests.support.oauth import make_client

pytestmark = pytest.mark.django_db


def endpoint_form(**overrides: Any) -> dict[str, Any]:
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
        "scopes": "shop:read Browse the shop\nshop:buy Place orders",
        "base_scope": "shop:read",
        **overrides,
    }


def test_an_endpoint_is_saved_with_its_scopes(admin_client: Client):
    response = admin_client.post(reverse("admin:mcp_app_endpoint_add"), endpoint_form())

    assert response.status_code == 302
    endpoint = Endpoint.objects.get(slug="shop")
    assert endpoint.scope_list() == (
        ("shop:read", "Browse the shop"),
        ("shop:buy", "Place orders"),
    )


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"scopes": 'bad"scope Quotes are not allowed'}, "scopes", "is not a scope name"),
        ({"scopes": "a:read One\na:read Twice"}, "scopes", "only once"),
        ({"base_scope": "shop:admin"}, "base_scope", "must be one of the scopes"),
        ({"auth_mode": "sometimes"}, "auth_mode", "Select a valid choice"),
    ],
)
def test_invalid_auth_settings_are_explained_and_nothing_is_saved(
    admin_client: Client, overrides: dict[str, str], field: str, message: str
):
    response = admin_client.post(reverse("admin:mcp_app_endpoint_add"), endpoint_form(**overrides))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert message in " ".join(errors[field])
    assert not Endpoint.objects.exists()


def test_a_required_scope_must_be_a_scope_name():
    tool = Tool(
        name="t", description="d", kind="python", config={"function": "echo"},
        required_scope="two words",
    )  # fmt: skip

    with pytest.raises(Exception, match="is not a scope name"):
        tool.full_clean()


def test_the_tool_admin_offers_the_access_rules(admin_client: Client):
    Group.objects.create(name="staff")

    page = admin_client.get(reverse("admin:mcp_app_tool_add")).content.decode()

    assert 'name="required_scope"' in page
    assert 'name="allowed_groups"' in page
    assert "Who may use it (OAuth endpoints)" in page


def test_oauth_clients_are_listed_with_their_registration_source(admin_client: Client):
    make_client("Registered by hand")
    make_client("Came by DCR", registration_source=Application.RegistrationSource.DCR)

    page = admin_client.get("/admin/oauth2_provider/application/").content.decode()

    assert "Registration source" in page
    assert "Came by DCR" in page and "Dynamic Client Registration" in page
    assert "Registered by hand" in page and "Manual" in page
