"""Server cards and the site's AI Catalog (mcp_app/discovery.py), through Django's test client.

Every card is validated against the published Server Card schema and the catalog against the
AI Catalog rules (both bundled in tests/discovery/schemas, no network).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from mcp_app.models import Endpoint
from mcp_app.protocol.handlers.lifecycle import SERVER_VERSION
from mcp_app.protocol.versions import ALL_VERSIONS
from mcp_app.services.catalog_writes import endpoint_create
from tests.discovery.conftest import assert_valid_card, assert_valid_catalog

pytestmark = pytest.mark.django_db

CATALOG = "/.well-known/ai-catalog.json"


def listed(slug: str, **fields: Any) -> Endpoint:
    fields.setdefault("title", f"{slug.title()} tools")
    fields.setdefault("description", f"What {slug} offers.")
    return endpoint_create(slug=slug, listed=True, **fields)


def card_path(slug: str) -> str:
    return f"/mcp/{slug}/server-card"


def test_an_oauth_endpoint_card_is_valid_and_names_its_authorization(
    client: Client, site: str
) -> None:
    listed("shop", auth_mode="oauth")

    response = client.get(card_path("shop"), HTTP_ACCEPT="application/mcp-server-card+json")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/mcp-server-card+json"
    card = response.json()
    assert_valid_card(card)
    assert card["name"] == "com.example.mcp/shop"
    assert card["title"] == "Shop tools"
    assert card["description"] == "What shop offers."
    # The version a connected client reads in serverInfo.
    assert card["version"] == SERVER_VERSION
    assert card["remotes"] == [
        {
            "type": "streamable-http",
            "url": f"{site}/mcp/shop",
            "supportedProtocolVersions": list(ALL_VERSIONS),
            "headers": [
                {
                    "name": "Authorization",
                    "description": (
                        "An OAuth bearer token issued for this endpoint; its protected resource "
                        f"metadata is at {site}/.well-known/oauth-protected-resource/mcp/shop."
                    ),
                    "isRequired": True,
                    "isSecret": True,
                }
            ],
        }
    ]
    assert card["_meta"] == {
        "mcphost/authorization": {
            "type": "oauth2",
            "resource": f"{site}/mcp/shop",
            "resourceMetadata": f"{site}/.well-known/oauth-protected-resource/mcp/shop",
        }
    }


def test_the_metadata_url_a_card_names_serves_the_endpoints_resource(
    client: Client, site: str
) -> None:
    listed("shop", auth_mode="oauth")
    authorization = client.get(card_path("shop")).json()["_meta"]["mcphost/authorization"]

    metadata = client.get(authorization["resourceMetadata"].removeprefix(site))

    assert metadata.status_code == 200
    assert metadata.json()["resource"] == authorization["resource"]


def test_a_public_endpoint_card_asks_for_no_authorization(client: Client, site: str) -> None:
    listed("open", auth_mode="public")

    card = client.get(card_path("open")).json()

    assert_valid_card(card)
    assert "headers" not in card["remotes"][0]
    assert card["_meta"] == {"mcphost/authorization": {"type": "none"}}


def test_long_and_blank_texts_still_make_a_valid_card(client: Client, site: str) -> None:
    listed("long", title="T" * 200, description="A sentence that goes on.\n" * 20)
    listed("bare", title="", description="")

    long_card = client.get(card_path("long")).json()
    bare_card = client.get(card_path("bare")).json()

    assert_valid_card(long_card)
    assert_valid_card(bare_card)
    assert len(long_card["description"]) == 100
    assert long_card["description"].endswith("…")
    assert "\n" not in long_card["description"]
    assert long_card["title"] == "T" * 99 + "…"
    assert "title" not in bare_card
    assert bare_card["description"] == "MCP endpoint bare"


@pytest.mark.parametrize(
    ("base_url", "name"),
    [
        ("http://127.0.0.1:8000", "127.0.0.1/local"),
        ("http://localhost:8000", "localhost/local"),
        ("http://[::1]:8000", "--1/local"),
        ("https://Tools.Example.ORG/prefix", "org.example.tools/local"),
    ],
)
def test_the_name_comes_from_the_public_base_url_host(
    client: Client, settings: Any, base_url: str, name: str
) -> None:
    settings.PUBLIC_BASE_URL = base_url
    listed("local")

    card = client.get(card_path("local")).json()

    assert_valid_card(card)
    assert card["name"] == name
    assert card["remotes"][0]["url"] == f"{base_url}/mcp/local"


def test_the_catalog_lists_exactly_the_listed_enabled_endpoints(client: Client, site: str) -> None:
    listed("alpha")
    listed("beta", auth_mode="public", title="")
    listed("off", enabled=False)
    endpoint_create(slug="hidden", title="Hidden")

    response = client.get(CATALOG)

    assert response.status_code == 200
    assert response["Content-Type"] == "application/ai-catalog+json"
    catalog = response.json()
    assert_valid_catalog(catalog)
    assert catalog["host"] == {"displayName": "mcp.example.com", "identifier": "mcp.example.com"}
    assert catalog["entries"] == [
        {
            "identifier": "urn:air:mcp.example.com:mcp:alpha",
            "type": "application/mcp-server-card+json",
            "mediaType": "application/mcp-server-card+json",
            "displayName": "Alpha tools",
            "description": "What alpha offers.",
            "url": f"{site}/mcp/alpha/server-card",
        },
        {
            "identifier": "urn:air:mcp.example.com:mcp:beta",
            "type": "application/mcp-server-card+json",
            "mediaType": "application/mcp-server-card+json",
            "displayName": "beta",
            "description": "What beta offers.",
            "url": f"{site}/mcp/beta/server-card",
        },
    ]
    for entry in catalog["entries"]:
        card = client.get(entry["url"].removeprefix(site))
        assert card.status_code == 200
        assert_valid_card(card.json())


def test_an_empty_catalog_is_still_a_catalog(client: Client, site: str) -> None:
    endpoint_create(slug="hidden")

    catalog = client.get(CATALOG).json()

    assert_valid_catalog(catalog)
    assert catalog["entries"] == []


@pytest.mark.parametrize("slug", ["hidden", "off", "nobody"])
def test_unlisted_disabled_and_unknown_endpoints_have_no_card(
    client: Client, site: str, slug: str
) -> None:
    endpoint_create(slug="hidden")
    listed("off", enabled=False)

    response = client.get(card_path(slug))

    assert response.status_code == 404
    assert response.json() == {"error": "not_found"}
    assert response["Access-Control-Allow-Origin"] == "*"
    assert slug not in client.get(CATALOG).content.decode()


@pytest.mark.parametrize("path", [CATALOG, card_path("shop")])
def test_any_origin_may_read_without_credentials(client: Client, site: str, path: str) -> None:
    listed("shop")

    preflight = client.options(
        path,
        HTTP_ORIGIN="https://app.example.net",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="GET",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="if-none-match",
    )
    response = client.get(path, HTTP_ORIGIN="https://app.example.net")

    assert preflight.status_code == 204
    for answer in (preflight, response):
        assert answer["Access-Control-Allow-Origin"] == "*"
        assert answer["Access-Control-Allow-Methods"] == "GET"
        assert answer["Access-Control-Allow-Headers"] == "Content-Type, If-None-Match"
        assert answer["Access-Control-Expose-Headers"] == "ETag"
        assert "Access-Control-Allow-Credentials" not in answer
    assert response.status_code == 200


@pytest.mark.parametrize("path", [CATALOG, card_path("shop")])
def test_writes_are_refused_and_change_nothing(client: Client, site: str, path: str) -> None:
    shop = listed("shop")

    response = client.post(path, {"listed": "false"})

    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD, OPTIONS"
    shop.refresh_from_db()
    assert shop.listed


@pytest.mark.parametrize("path", [CATALOG, card_path("shop")])
def test_an_unchanged_document_revalidates_to_304(client: Client, site: str, path: str) -> None:
    listed("shop")
    first = client.get(path)
    etag = first["ETag"]

    again = client.get(path, HTTP_IF_NONE_MATCH=etag)
    weak = client.get(path, HTTP_IF_NONE_MATCH=f'"other", W/{etag}')
    stale = client.get(path, HTTP_IF_NONE_MATCH='"other"')
    head = client.head(path)

    assert first["Cache-Control"] == "public, no-cache"
    assert etag.startswith('"') and etag.endswith('"')
    assert (again.status_code, again.content) == (304, b"")
    assert again["ETag"] == etag
    assert again["Access-Control-Allow-Origin"] == "*"
    assert weak.status_code == 304
    assert (stale.status_code, stale.content) == (200, first.content)
    assert (head.status_code, head.content, head["ETag"]) == (200, b"", etag)


def endpoint_change_form(endpoint: Endpoint, **overrides: str) -> dict[str, Any]:
    """The endpoint's change form as the admin posts it (``listed`` only when checked)."""
    data: dict[str, Any] = {
        "slug": endpoint.slug,
        "title": endpoint.title,
        "description": endpoint.description,
        "instructions": endpoint.instructions,
        "enabled": "on",
        "allowed_origins": "",
        "tools": [],
        "resources": [],
        "resource_templates": [],
        "prompts": [],
        "auth_mode": endpoint.auth_mode,
        "scopes": endpoint.scopes,
        "base_scope": endpoint.base_scope,
    }
    if endpoint.listed:
        data["listed"] = "on"
    data.update(overrides)
    return data


def test_an_admin_edit_shows_in_the_next_fetch(
    client: Client, admin_client: Client, site: str
) -> None:
    shop = listed("shop")
    card = client.get(card_path("shop"))
    catalog = client.get(CATALOG)

    edited = admin_client.post(
        reverse("admin:mcp_app_endpoint_change", args=[shop.pk]),
        endpoint_change_form(shop, title="Shop, renamed"),
    )
    card_after = client.get(card_path("shop"), HTTP_IF_NONE_MATCH=card["ETag"])
    catalog_after = client.get(CATALOG, HTTP_IF_NONE_MATCH=catalog["ETag"])

    assert edited.status_code == 302
    assert card_after.status_code == 200
    assert card_after["ETag"] != card["ETag"]
    assert card_after.json()["title"] == "Shop, renamed"
    assert catalog_after.status_code == 200
    assert catalog_after.json()["entries"][0]["displayName"] == "Shop, renamed"


def test_unlisting_in_the_admin_removes_the_card_and_the_entry(
    client: Client, admin_client: Client, site: str
) -> None:
    shop = listed("shop")
    catalog = client.get(CATALOG)
    form = endpoint_change_form(shop)
    del form["listed"]  # an unchecked box is not posted

    edited = admin_client.post(reverse("admin:mcp_app_endpoint_change", args=[shop.pk]), form)
    catalog_after = client.get(CATALOG, HTTP_IF_NONE_MATCH=catalog["ETag"])

    assert edited.status_code == 302
    assert client.get(card_path("shop")).status_code == 404
    assert catalog_after.status_code == 200
    assert catalog_after.json()["entries"] == []


def test_disabling_removes_a_listed_endpoint(client: Client, site: str) -> None:
    shop = listed("shop")

    shop.enabled = False
    shop.save()

    assert client.get(card_path("shop")).status_code == 404
    assert client.get(CATALOG).json()["entries"] == []


def test_queries_do_not_grow_with_the_number_of_endpoints(
    client: Client, site: str, django_assert_num_queries: Any
) -> None:
    listed("first")
    with django_assert_num_queries(1):
        assert len(client.get(CATALOG).json()["entries"]) == 1
    for number in range(30):
        listed(f"more-{number}", auth_mode="public" if number % 2 else "oauth")

    with django_assert_num_queries(1):
        assert len(client.get(CATALOG).json()["entries"]) == 31
    with django_assert_num_queries(1):
        assert client.get(card_path("more-7")).status_code == 200
