"""Who may list an endpoint: the ``listed`` field through the admin and the API, both of which
write through services/catalog_writes.py, against model permissions.

A user lacking ``change_endpoint`` is refused and the endpoint stays as it was (absent from
the catalog); one holding it lists the endpoint and the catalog shows it in the next fetch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from mcp_app.models import Endpoint
from mcp_app.services.catalog_io import catalog_export, catalog_import
from mcp_app.services.catalog_writes import endpoint_create
from tests.discovery.test_server_cards import CATALOG, endpoint_change_form

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop(site: str) -> Endpoint:
    return endpoint_create(slug="shop", title="Shop")


def catalog_slugs(client: Client) -> list[str]:
    return [entry["url"].split("/")[-2] for entry in client.get(CATALOG).json()["entries"]]


def staff(*permissions: str) -> Client:
    user = User.objects.create_user("operator", password="unused-password-123", is_staff=True)
    for name in [*permissions, "mcp_app.manage_every_team"]:  # an operator of every team
        app_label, codename = name.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    client = Client()
    client.force_login(user)
    return client


def test_a_new_endpoint_is_not_listed(shop: Endpoint, client: Client) -> None:
    assert shop.listed is False
    assert catalog_slugs(client) == []


@pytest.mark.parametrize(
    ("permissions", "allowed"),
    [
        (["mcp_app.view_endpoint"], False),
        (["mcp_app.view_endpoint", "mcp_app.add_endpoint"], False),
        (["mcp_app.view_endpoint", "mcp_app.change_endpoint"], True),
    ],
)
def test_listing_in_the_admin_needs_the_change_permission(
    shop: Endpoint, client: Client, permissions: list[str], allowed: bool
) -> None:
    operator = staff(*permissions)

    response = operator.post(
        reverse("admin:mcp_app_endpoint_change", args=[shop.pk]),
        endpoint_change_form(shop, listed="on"),
    )

    shop.refresh_from_db()
    assert (response.status_code, shop.listed) == ((302, True) if allowed else (403, False))
    assert catalog_slugs(client) == (["shop"] if allowed else [])


def test_the_admin_list_filters_by_listed(shop: Endpoint, admin_client: Client) -> None:
    endpoint_create(slug="shown", listed=True)

    page = admin_client.get(reverse("admin:mcp_app_endpoint_changelist"), {"listed__exact": "1"})

    assert page.status_code == 200
    assert [endpoint.slug for endpoint in page.context["cl"].result_list] == ["shown"]


@pytest.mark.parametrize(
    ("permissions", "status"),
    [
        (["mcp_app.view_endpoint"], 403),
        (["mcp_app.view_endpoint", "mcp_app.add_endpoint"], 403),
        (["mcp_app.view_endpoint", "mcp_app.change_endpoint"], 200),
    ],
)
def test_listing_through_the_api_needs_the_change_permission(
    shop: Endpoint,
    client: Client,
    token_client: Callable[..., APIClient],
    permissions: list[str],
    status: int,
) -> None:
    api = token_client(*permissions)

    response = api.patch(f"/api/v1/endpoints/{shop.pk}/", {"listed": True}, format="json")

    shop.refresh_from_db()
    assert response.status_code == status
    assert shop.listed is (status == 200)
    assert catalog_slugs(client) == (["shop"] if status == 200 else [])
    if status == 200:
        assert response.json()["listed"] is True


def test_the_api_reads_creates_and_unlists(
    shop: Endpoint, client: Client, token_client: Callable[..., APIClient]
) -> None:
    api = token_client("mcp_app.view_endpoint", "mcp_app.add_endpoint", "mcp_app.change_endpoint")

    read = api.get(f"/api/v1/endpoints/{shop.pk}/")
    created = api.post("/api/v1/endpoints/", {"slug": "news", "listed": True}, format="json")
    listed_now = catalog_slugs(client)
    unlisted = api.patch(f"/api/v1/endpoints/{created.json()['id']}/", {"listed": False})

    assert read.json()["listed"] is False
    assert created.status_code == 201
    assert listed_now == ["news"]
    assert unlisted.status_code == 200
    assert catalog_slugs(client) == []


@pytest.mark.parametrize("value", ["maybe", None, [True]])
def test_a_listed_value_that_is_not_a_boolean_is_refused(
    shop: Endpoint, token_client: Callable[..., APIClient], value: Any
) -> None:
    api = token_client("mcp_app.view_endpoint", "mcp_app.change_endpoint")

    response = api.patch(f"/api/v1/endpoints/{shop.pk}/", {"listed": value}, format="json")

    shop.refresh_from_db()
    assert response.status_code == 400
    assert [error["path"] for error in response.json()["errors"]] == ["listed"]
    assert shop.listed is False


def test_listing_is_recorded_in_the_endpoints_history(
    shop: Endpoint, token_client: Callable[..., APIClient]
) -> None:
    api = token_client("mcp_app.view_endpoint", "mcp_app.change_endpoint")

    api.patch(f"/api/v1/endpoints/{shop.pk}/", {"listed": True}, format="json")

    newest = shop.history.first()
    assert newest is not None
    assert newest.listed is True
    assert newest.history_user is not None
    assert newest.history_user.username == "robot"


def test_listing_travels_with_export_and_import(shop: Endpoint, client: Client) -> None:
    endpoint_create(slug="shown", listed=True)
    document = catalog_export()
    Endpoint.objects.update(listed=False)

    catalog_import(document=document)
    after_import = catalog_slugs(client)
    # A document written before the field existed leaves an endpoint's listing as it is.
    catalog_import(
        document={
            **document,
            "endpoints": [
                {name: value for name, value in entry.items() if name != "listed"}
                for entry in document["endpoints"]
            ],
        }
    )

    assert {entry["slug"]: entry["listed"] for entry in document["endpoints"]} == {
        "shop": False,
        "shown": True,
    }
    assert after_import == ["shown"]
    assert catalog_slugs(client) == ["shown"]
