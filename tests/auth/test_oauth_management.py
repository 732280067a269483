"""OAuth access tokens for the management API (issue #14): our authorization server issues
them for the resource ``PUBLIC_BASE_URL/api`` with the management scope only; the API accepts
them and every MCP endpoint refuses them, as the API refuses an endpoint's token
(tests/api/test_authentication.py)."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth.models import Permission
from django.test import Client
from oauth2_provider.models import AccessToken, Grant

from tests.auth.conftest import Catalog
from tests.auth.test_oauth_authorize import (
    approve,
    authorize_params,
    exchange,
    pkce,
    redirect_params,
    signed_in,
)
from tests.support.oauth import asgi_call, make_client

pytestmark = pytest.mark.django_db

API = f"{settings.PUBLIC_BASE_URL}/api"
JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def _management_token(catalog: Catalog) -> str:
    client = make_client()
    verifier, challenge = pkce()
    params = authorize_params(client, challenge, resource=API, scope=settings.API_OAUTH_SCOPE)
    answer = approve(signed_in(), params)
    tokens = json.loads(exchange(client, answer["code"], verifier).content)
    assert tokens["scope"] == settings.API_OAUTH_SCOPE
    return tokens["access_token"]


def test_a_management_token_is_issued_for_the_api_and_accepted_there(catalog: Catalog):
    catalog.bob.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_endpoint", "manage_every_team"])
    )

    token = _management_token(catalog)

    assert AccessToken.objects.get().resource == [API]
    listed = Client().get("/api/v1/endpoints/", headers={"authorization": f"Bearer {token}"})
    assert listed.status_code == 200
    assert {row["slug"] for row in listed.json()["results"]} == {"notes", "elsewhere"}


# The ASGI app runs its ORM calls on the thread pool: the rows must be committed.
@pytest.mark.django_db(transaction=True)
def test_an_mcp_endpoint_refuses_a_management_token(catalog: Catalog):
    token = _management_token(catalog)
    body = {"jsonrpc": "2.0", "id": 0, "method": "ping"}

    response = async_to_sync(asgi_call)(
        "POST",
        "/mcp/notes",
        headers={**JSON, "authorization": f"Bearer {token}"},
        body=json.dumps(body).encode(),
    )

    assert response.status == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


def test_without_a_scope_a_management_request_gets_the_management_scope(catalog: Catalog):
    client = make_client()
    verifier, challenge = pkce()
    params = authorize_params(client, challenge, resource=API, scope=None)

    answer = approve(signed_in(), params)

    tokens = json.loads(exchange(client, answer["code"], verifier).content)
    assert tokens["scope"] == settings.API_OAUTH_SCOPE


def test_the_management_api_takes_only_its_own_scope(catalog: Catalog):
    _verifier, challenge = pkce()
    params = authorize_params(make_client(), challenge, resource=API, scope="mcp:read")

    answer = redirect_params(signed_in().get(f"/o/authorize/?{urlencode(params)}"))

    assert answer["error"] == "invalid_scope"


def test_an_endpoint_request_cannot_get_the_management_scope(catalog: Catalog):
    _verifier, challenge = pkce()
    params = authorize_params(make_client(), challenge, scope=settings.API_OAUTH_SCOPE)

    answer = redirect_params(signed_in().get(f"/o/authorize/?{urlencode(params)}"))

    assert answer["error"] == "invalid_scope"
    assert not Grant.objects.exists()


def test_the_api_and_an_endpoint_in_one_request_is_invalid_target(catalog: Catalog):
    _verifier, challenge = pkce()
    params = authorize_params(make_client(), challenge, scope=settings.API_OAUTH_SCOPE)
    query = urlencode(params) + "&" + urlencode({"resource": API})

    answer = redirect_params(signed_in().get(f"/o/authorize/?{query}"))

    assert answer["error"] == "invalid_target"


def test_the_consent_page_names_the_management_api(catalog: Catalog):
    _verifier, challenge = pkce()
    params = authorize_params(make_client(), challenge, resource=API, scope="mcp:manage")

    page = signed_in().get(f"/o/authorize/?{urlencode(params)}").content.decode()

    assert "Management API" in page and API in page
    assert "Manage the catalog through the management API" in page
