"""Personal API tokens: issued in the admin, shown once, stored hashed, expiring."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from mcp_app.models import ApiToken
from mcp_app.services.api_tokens import api_token_authenticate, api_token_create
from tests.api.conftest import make_user


@pytest.mark.django_db
def test_a_token_is_found_by_its_key_and_only_while_it_lives() -> None:
    user = make_user("robot")
    token, key = api_token_create(user=user, name="ci", expires_at=timezone.now() + timedelta(1))
    expired, expired_key = api_token_create(
        user=user, name="old", expires_at=timezone.now() - timedelta(seconds=1)
    )

    found = api_token_authenticate(key=key)

    assert found == token and found.last_used_at is not None
    assert api_token_authenticate(key=expired_key) is None
    assert api_token_authenticate(key=key + "x") is None
    assert api_token_authenticate(key="not-ours") is None
    stored = ApiToken.objects.get(pk=token.pk)
    assert key not in (stored.key_hash, stored.prefix, str(stored))


@pytest.mark.django_db
def test_admin_creates_a_token_and_sees_it_once(admin_client: Client) -> None:
    user = make_user("robot")

    response = admin_client.post(
        reverse("admin:mcp_app_apitoken_add"),
        {"user": user.pk, "name": "ci", "expires_at_0": "", "expires_at_1": ""},
        follow=True,
    )

    shown = [str(m) for m in response.context["messages"] if "copy it now" in str(m)]
    assert len(shown) == 1
    found = re.search(r'<code class="mcp-token" id="new-api-token">([^<]+)</code>', shown[0])
    assert found is not None
    key = found.group(1)
    token = ApiToken.objects.get()
    assert key.startswith(token.prefix) and key not in token.key_hash
    page = admin_client.get(reverse("admin:mcp_app_apitoken_change", args=[token.pk]))
    assert key.encode() not in page.content
