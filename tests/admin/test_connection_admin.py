"""The admin side of per-user OAuth upstreams: the upstream's client secret is write-only,
and users' connections are shown (never their tokens) and only revoked, never made here."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from mcp_app.models import Upstream, UpstreamConnection
from mcp_app.services.credentials import decrypt_value, encrypt_secret
from tests.support import admin_forms


def upstream_form(**overrides: str) -> dict[str, Any]:
    """The add form of the per-user OAuth upstream "per-user"."""
    per_user = {
        "name": "per-user",
        "url": "https://up.example/mcp",
        "auth_mode": "user_oauth",
        "oauth_client_id": "registered-by-hand",
        "oauth_scopes": "read write",
        "forward_headers": "X-Tenant",
    }
    return admin_forms.upstream_form(**{**per_user, **overrides})


def test_the_upstream_client_secret_is_write_only(admin_client: Client) -> None:
    response = admin_client.post(
        reverse("admin:mcp_app_upstream_add"), upstream_form(oauth_client_secret="s3cret-value")
    )
    assert response.status_code == 302, response.context["adminform"].form.errors
    upstream = Upstream.objects.get(name="per-user")
    assert decrypt_value(upstream.oauth_client_secret_encrypted, "secret") == "s3cret-value"

    change = reverse("admin:mcp_app_upstream_change", args=[upstream.pk])
    page = admin_client.get(change).content.decode()
    assert "s3cret-value" not in page
    assert upstream.oauth_client_secret_encrypted not in page
    # Saved again without a secret: the stored one stays.
    assert admin_client.post(change, upstream_form()).status_code == 302
    upstream.refresh_from_db()
    assert decrypt_value(upstream.oauth_client_secret_encrypted, "secret") == "s3cret-value"


def test_a_denied_forward_header_is_refused_with_its_reason(admin_client: Client) -> None:
    response = admin_client.post(
        reverse("admin:mcp_app_upstream_add"), upstream_form(forward_headers="X-Tenant\nCookie")
    )
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "Cookie is never forwarded" in errors["forward_headers"][0]
    assert not Upstream.objects.exists()


def test_connections_are_shown_without_tokens_and_never_made_here(admin_client: Client) -> None:
    upstream = Upstream.objects.create(
        name="per-user", url="https://up.example/mcp", auth_mode=Upstream.AuthMode.USER_OAUTH
    )
    connection = UpstreamConnection.objects.create(
        user=User.objects.create_user("alice"),
        upstream=upstream,
        issuer="https://as.example",
        token_endpoint="https://as.example/token",
        resource="https://up.example/mcp",
        client_id="c",
        access_token_encrypted=encrypt_secret("plain-access"),
        refresh_token_encrypted=encrypt_secret("plain-refresh"),
        scopes="read",
    )
    for name in ("changelist", "change"):
        args = [connection.pk] if name == "change" else []
        page = admin_client.get(reverse(f"admin:mcp_app_upstreamconnection_{name}", args=args))
        assert page.status_code == 200
        text = page.content.decode()
        assert "alice" in text
        for secret in (
            "plain-access",
            "plain-refresh",
            connection.access_token_encrypted,
            connection.refresh_token_encrypted,
        ):
            assert secret not in text
    assert admin_client.get(reverse("admin:mcp_app_upstreamconnection_add")).status_code == 403
