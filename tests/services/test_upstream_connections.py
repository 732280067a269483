"""Users' upstream connections at rest: encrypted like credential secrets, rotated with them.

The connect flow, calls, refresh and revocation against a real authorization server are in
tests/e2e/test_upstream_user_oauth.py.
"""

from __future__ import annotations

import io
import json

from cryptography.fernet import Fernet
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import override_settings

from mcp_app.models import Upstream, UpstreamConnection
from mcp_app.services.catalog_io import catalog_export, catalog_import
from mcp_app.services.credentials import decrypt_value, encrypt_secret

OLD_KEY = Fernet.generate_key().decode()
NEW_KEY = Fernet.generate_key().decode()


def test_rotation_re_encrypts_connection_tokens_and_upstream_client_secrets(db: None) -> None:
    with override_settings(MCP_SECRET_KEYS=OLD_KEY):
        upstream = Upstream.objects.create(
            name="per-user",
            url="https://up.example/mcp",
            auth_mode=Upstream.AuthMode.USER_OAUTH,
            oauth_client_id="configured",
            oauth_client_secret_encrypted=encrypt_secret("client-secret"),
        )
        UpstreamConnection.objects.create(
            user=User.objects.create_user("alice"),
            upstream=upstream,
            issuer="https://as.example",
            token_endpoint="https://as.example/token",
            resource="https://up.example/mcp",
            client_id="configured",
            client_secret_encrypted=encrypt_secret("client-secret"),
            access_token_encrypted=encrypt_secret("access-1"),
            refresh_token_encrypted=encrypt_secret("refresh-1"),
        )

    with override_settings(MCP_SECRET_KEYS=f"{NEW_KEY},{OLD_KEY}"):
        call_command("rotate_credentials", stdout=io.StringIO())

    # The old key can now be dropped: everything decrypts with the new one alone.
    connection = UpstreamConnection.objects.get()
    upstream.refresh_from_db()
    with override_settings(MCP_SECRET_KEYS=NEW_KEY):
        assert [
            decrypt_value(value, "secret")
            for value in (
                connection.access_token_encrypted,
                connection.refresh_token_encrypted,
                connection.client_secret_encrypted,
                upstream.oauth_client_secret_encrypted,
            )
        ] == ["access-1", "refresh-1", "client-secret", "client-secret"]


def test_a_connection_names_its_user_and_upstream_only(db: None) -> None:
    upstream = Upstream.objects.create(name="per-user", url="https://up.example/mcp")
    connection = UpstreamConnection.objects.create(
        user=User.objects.create_user("alice"),
        upstream=upstream,
        issuer="https://as.example",
        token_endpoint="https://as.example/token",
        resource="https://up.example/mcp",
        client_id="c",
        access_token_encrypted=encrypt_secret("access-1"),
    )
    assert str(connection) == "alice at per-user"
    assert "access-1" not in connection.access_token_encrypted


def test_a_per_user_upstream_travels_in_the_catalog_without_its_secrets(db: None) -> None:
    upstream = Upstream.objects.create(
        name="per-user",
        url="https://up.example/mcp",
        auth_mode=Upstream.AuthMode.USER_OAUTH,
        oauth_client_id="configured",
        oauth_client_secret_encrypted=encrypt_secret("client-secret"),
        oauth_scopes="read",
        forward_headers="X-Tenant",
    )
    UpstreamConnection.objects.create(
        user=User.objects.create_user("alice"),
        upstream=upstream,
        issuer="https://as.example",
        token_endpoint="https://as.example/token",
        resource="https://up.example/mcp",
        client_id="configured",
        access_token_encrypted=encrypt_secret("access-1"),
    )
    document = catalog_export()
    text = json.dumps(document)
    for secret in ("client-secret", "access-1", upstream.oauth_client_secret_encrypted):
        assert secret not in text
    [entry] = document["upstreams"]
    fields = ("auth_mode", "oauth_client_id", "oauth_scopes", "forward_headers")
    assert [entry[name] for name in fields] == ["user_oauth", "configured", "read", "X-Tenant"]

    Upstream.objects.filter(pk=upstream.pk).update(
        auth_mode="credential", oauth_client_id="", oauth_scopes="", forward_headers=""
    )
    catalog_import(document=document)
    upstream.refresh_from_db()
    assert [getattr(upstream, name) for name in fields] == [
        "user_oauth", "configured", "read", "X-Tenant"
    ]  # fmt: skip
