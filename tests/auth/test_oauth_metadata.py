"""Discovery documents: authorization server metadata (RFC 8414) and per-endpoint protected
resource metadata (RFC 9728), as clients read them, CORS included."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client

from tests.auth.conftest import SLUG, Catalog

pytestmark = pytest.mark.django_db


def test_server_metadata_names_the_issuer_exactly_and_only_code_with_s256(catalog: Catalog):
    response = Client().get("/.well-known/oauth-authorization-server")

    data = response.json()
    base = settings.PUBLIC_BASE_URL
    assert data["issuer"] == base
    assert data["authorization_endpoint"] == f"{base}/o/authorize/"
    assert data["token_endpoint"] == f"{base}/o/token/"
    assert data["registration_endpoint"] == f"{base}/o/register/"
    assert data["revocation_endpoint"] == f"{base}/o/revoke_token/"
    assert data["response_types_supported"] == ["code"]
    assert data["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert data["code_challenge_methods_supported"] == ["S256"]
    assert "none" in data["token_endpoint_auth_methods_supported"]
    assert data["client_id_metadata_document_supported"] is True
    assert data["authorization_response_iss_parameter_supported"] is True
    # The management API's scope too: the server issues tokens for it (docs/api.md).
    assert set(data["scopes_supported"]) == {"mcp:read", "mcp:write", "mcp:manage"}
    assert "introspection_endpoint" not in data
    assert response["Access-Control-Allow-Origin"] == "*"


def test_protected_resource_metadata_names_the_endpoint_our_issuer_and_its_scopes(
    catalog: Catalog,
):
    response = Client().get(f"/.well-known/oauth-protected-resource/mcp/{SLUG}")

    assert response.status_code == 200
    assert response.json() == {
        "resource": f"{settings.PUBLIC_BASE_URL}/mcp/{SLUG}",
        "authorization_servers": [settings.PUBLIC_BASE_URL],
        "scopes_supported": ["mcp:read", "mcp:write"],
        "bearer_methods_supported": ["header"],
        "resource_name": "Notes",
    }
    assert response["Access-Control-Allow-Origin"] == "*"


@pytest.mark.parametrize("slug", ["no-such-endpoint", "open"])
def test_protected_resource_metadata_is_404_for_unknown_and_public_endpoints(catalog, slug):
    from tests.support.catalog import make_endpoint

    make_endpoint("open")  # public

    response = Client().get(f"/.well-known/oauth-protected-resource/mcp/{slug}")

    assert response.status_code == 404


@pytest.mark.parametrize("path", ["/o/token/", "/o/register/", "/o/revoke_token/"])
def test_browser_clients_may_preflight_the_token_and_registration_endpoints(path):
    response = Client().options(
        path,
        HTTP_ORIGIN="https://inspector.example",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
    )

    assert response.status_code == 204
    assert response["Access-Control-Allow-Origin"] == "*"
    assert "Content-Type" in response["Access-Control-Allow-Headers"]
    assert "POST" in response["Access-Control-Allow-Methods"]


@pytest.mark.parametrize("path", ["/o/device-authorization/", "/o/introspect/", "/o/applications/"])
def test_flows_mcp_clients_do_not_use_are_not_published(path):
    assert Client().get(path).status_code == 404
