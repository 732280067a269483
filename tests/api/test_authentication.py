"""Who may call the management API: API tokens, OAuth tokens for the API, sessions."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from mcp_app.models import ApiToken
from mcp_app.services.api_tokens import api_token_create
from mcp_app.services.catalog_writes import endpoint_create
from tests.api.conftest import make_user
from tests.support.oauth import issue_token

API_RESOURCE = "http://127.0.0.1:8000/api"


def bearer(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.mark.django_db
def test_api_token_is_stored_hashed_and_records_its_last_use() -> None:
    user = make_user("robot", ["mcp_app.view_endpoint"])
    token, key = api_token_create(user=user, name="ci")

    response = bearer(key).get("/api/v1/endpoints/")

    assert response.status_code == 200
    stored = ApiToken.objects.get()
    assert key not in (stored.key_hash, stored.prefix) and key.startswith(stored.prefix)
    assert stored.last_used_at is not None
    assert token.last_used_at is None


@pytest.mark.django_db
def test_expired_unknown_and_inactive_tokens_are_refused() -> None:
    user = make_user("robot", ["mcp_app.view_endpoint"])
    _expired, expired_key = api_token_create(
        user=user, name="old", expires_at=timezone.now() - timedelta(seconds=1)
    )
    gone = make_user("gone", ["mcp_app.view_endpoint"])
    _token, gone_key = api_token_create(user=gone, name="gone")
    User.objects.filter(pk=gone.pk).update(is_active=False)

    responses = [
        bearer(key).get("/api/v1/endpoints/")
        for key in (expired_key, gone_key, "mcpk_not-a-real-token")
    ]

    assert [response.status_code for response in responses] == [401, 401, 401]
    assert responses[0]["WWW-Authenticate"] == 'Bearer realm="api"'
    assert responses[0].json()["type"] == "authentication_failed"


@pytest.mark.django_db
def test_model_permissions_decide_each_action(
    token_client: Callable[..., APIClient],
) -> None:
    reader = token_client("mcp_app.view_endpoint")

    listed = reader.get("/api/v1/endpoints/")
    created = reader.post("/api/v1/endpoints/", {"slug": "new"})
    tools = reader.get("/api/v1/tools/")

    assert listed.status_code == 200
    assert created.status_code == 403
    assert tools.status_code == 403


@pytest.mark.django_db
def test_oauth_token_for_the_api_with_the_management_scope_is_accepted() -> None:
    user = make_user("robot", ["mcp_app.view_endpoint"])
    key = issue_token(user, resource=[API_RESOURCE], scope="mcp:manage")

    response = bearer(key).get("/api/v1/endpoints/")

    assert response.status_code == 200


@pytest.mark.django_db
def test_mcp_endpoint_tokens_and_tokens_without_the_scope_are_refused() -> None:
    endpoint_create(slug="tools")
    user = make_user("robot", ["mcp_app.view_endpoint"])
    endpoint_token = issue_token(
        user, resource=["http://127.0.0.1:8000/mcp/tools"], scope="mcp:manage"
    )
    both = issue_token(
        user, resource=[API_RESOURCE, "http://127.0.0.1:8000/mcp/tools"], scope="mcp:manage"
    )
    unscoped = issue_token(user, resource=[API_RESOURCE], scope="mcp:read")
    expired = issue_token(user, resource=[API_RESOURCE], scope="mcp:manage", expires_in=-1)

    statuses = [
        bearer(key).get("/api/v1/endpoints/").status_code
        for key in (endpoint_token, both, unscoped, expired)
    ]

    assert statuses == [401, 401, 403, 401]


@pytest.mark.django_db
def test_session_auth_serves_the_browsable_api(admin_client: Client) -> None:
    response = admin_client.get("/api/v1/endpoints/", HTTP_ACCEPT="text/html")

    assert response.status_code == 200
    assert b"Endpoint List" in response.content
