"""Credentials: encryption at rest, key rotation, and HTTP tools authenticating with them.

Tools run through the real ``CatalogToolRunner`` (which resolves the credential on a worker
thread, hence committed rows: ``transactional_db``) against the local upstream.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.utils import timezone

from mcp_app.checks import check_credential_keys
from mcp_app.models import Credential, Endpoint, Tool
from mcp_app.protocol.context import RequestContext, ToolCallContext
from mcp_app.protocol.results import ToolError, ToolResult
from mcp_app.services.catalog_writes import tool_create
from mcp_app.services.credentials import (
    CredentialError,
    clear_token_cache,
    credential_create,
    decrypt_secret,
)
from mcp_app.services.resources import CatalogResourceReader
from mcp_app.services.runner import CatalogToolRunner
from mcp_app.services.snapshots import build_snapshot
from tests.support.upstream import OAUTH_CLIENT_ID, OAUTH_CLIENT_SECRET, Upstream, run_upstream

OLD_KEY = Fernet.generate_key().decode()
NEW_KEY = Fernet.generate_key().decode()
LOCAL = ["127.0.0.1/32"]


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    with run_upstream() as server:
        yield server


@pytest.fixture(autouse=True)
def _no_cached_tokens() -> Iterator[None]:
    clear_token_cache()
    yield
    clear_token_cache()


def call_tool(endpoint: Endpoint, config: Mapping[str, Any], **arguments: Any) -> ToolResult:
    """Publish an http tool with ``config`` on ``endpoint`` and call it through the runner."""
    name = f"t{Endpoint.objects.get(pk=endpoint.pk).tools.count()}"
    tool_create(
        name=name,
        kind="http",
        config={"allow_networks": LOCAL, **config},
        endpoints=[endpoint],
        description="Calls the upstream.",
    )
    return run_tool(endpoint, name, **arguments)


def run_tool(endpoint: Endpoint, name: str, **arguments: Any) -> ToolResult:
    """Call the tool ``name`` of ``endpoint`` through the runner, as a client would."""
    snapshot = build_snapshot(Endpoint.objects.get(pk=endpoint.pk))
    tool = snapshot.tool(name)
    assert tool is not None
    runner = CatalogToolRunner()
    request = RequestContext(
        version="2026-07-28",
        catalog=snapshot,
        tools=runner,
        resources=CatalogResourceReader(),
        server_info={"name": "test", "version": "0"},
    )
    return async_to_sync(runner.run_tool)(tool, arguments, ToolCallContext(request, name))


def echoed_headers(result: ToolResult) -> dict[str, str]:
    assert not result.is_error, result.content
    return result.structured["headers"]


# Encryption and rotation


def test_the_secret_is_stored_encrypted_and_decrypts(db: None) -> None:
    credential = credential_create(name="api", kind="bearer", secret="tok-123")

    stored = Credential.objects.get(pk=credential.pk)
    assert "tok-123" not in stored.secret_encrypted
    assert decrypt_secret(stored) == "tok-123"
    assert str(stored) == "api"


def test_rotation_re_encrypts_with_the_new_key_and_old_rows_decrypt_before(db: None) -> None:
    with override_settings(MCP_SECRET_KEYS=OLD_KEY):
        credential_create(name="api", kind="bearer", secret="tok-old")
    row = Credential.objects.get(name="api")

    with override_settings(MCP_SECRET_KEYS=f"{NEW_KEY},{OLD_KEY}"):
        assert decrypt_secret(row) == "tok-old"  # before rotation: the old key still decrypts
        call_command("rotate_credentials", stdout=(out := io.StringIO()))
    assert out.getvalue() == "Re-encrypted 1 credential secret(s) with the first key.\n"

    rotated = Credential.objects.get(name="api")
    assert rotated.secret_encrypted != row.secret_encrypted
    assert rotated.updated_at == row.updated_at
    with override_settings(MCP_SECRET_KEYS=NEW_KEY):
        assert decrypt_secret(rotated) == "tok-old"  # the old key can now be dropped


def test_rotation_without_the_old_key_fails_and_changes_nothing(db: None) -> None:
    with override_settings(MCP_SECRET_KEYS=OLD_KEY):
        credential_create(name="api", kind="bearer", secret="tok-old")
    before = Credential.objects.get(name="api").secret_encrypted

    with override_settings(MCP_SECRET_KEYS=NEW_KEY), pytest.raises(CommandError) as caught:
        call_command("rotate_credentials")

    assert "'api'" in str(caught.value) and "tok-old" not in str(caught.value)
    assert Credential.objects.get(name="api").secret_encrypted == before
    with override_settings(MCP_SECRET_KEYS=NEW_KEY), pytest.raises(CredentialError):
        decrypt_secret(Credential.objects.get(name="api"))


def test_without_secret_keys_the_check_warns_about_the_derived_key() -> None:
    with override_settings(MCP_SECRET_KEYS=""):
        (warning,) = check_credential_keys()
    with override_settings(MCP_SECRET_KEYS=NEW_KEY):
        assert check_credential_keys() == []

    assert warning.id == "mcp_app.W003"


@override_settings(MCP_SECRET_KEYS="not-a-key")
def test_an_invalid_secret_key_is_a_check_error() -> None:
    assert [message.id for message in check_credential_keys()] == ["mcp_app.E003"]


@override_settings(MCP_HTTP_ALLOWED_NETWORKS="10.0.0.0/33", MCP_SECRET_KEYS=NEW_KEY)
def test_a_malformed_allowed_networks_setting_is_a_check_error() -> None:
    assert [message.id for message in check_credential_keys()] == ["mcp_app.E004"]


# Each kind on the wire. The echo comes back redacted (executors/redaction.py): redaction goes by
# the exact secret values, so "[redacted]" in a slot means the slot held the secret.


def test_bearer_credential_sends_an_authorization_header(
    transactional_db: None, endpoint: Endpoint, upstream: Upstream
) -> None:
    credential_create(name="api", kind="bearer", secret="tok-1")

    result = call_tool(endpoint, {"url": upstream.url("/echo"), "credential": "api"})

    assert echoed_headers(result)["authorization"] == "Bearer [redacted]"


def test_basic_credential_sends_user_and_password(
    transactional_db: None, endpoint: Endpoint, upstream: Upstream
) -> None:
    credential_create(name="api", kind="basic", username="ann", secret="pw:1")

    result = call_tool(endpoint, {"url": upstream.url("/echo"), "credential": "api"})

    assert echoed_headers(result)["authorization"] == "Basic [redacted]"


def test_api_key_header_credential_sends_its_header(
    transactional_db: None, endpoint: Endpoint, upstream: Upstream
) -> None:
    credential_create(name="api", kind="api_key_header", header_name="X-API-Key", secret="k-1")

    result = call_tool(endpoint, {"url": upstream.url("/echo"), "credential": "api"})

    assert echoed_headers(result)["x-api-key"] == "[redacted]"


def test_api_key_query_credential_adds_its_parameter(
    transactional_db: None, endpoint: Endpoint, upstream: Upstream
) -> None:
    credential_create(name="api", kind="api_key_query", query_param="key", secret="k&2")

    result = call_tool(endpoint, {"url": upstream.url("/echo?a=1"), "credential": "api"})

    assert result.structured["query"] == {"a": ["1"], "key": ["[redacted]"]}


def test_oauth_client_credentials_fetch_one_token_and_reuse_it(
    transactional_db: None, endpoint: Endpoint, upstream: Upstream
) -> None:
    credential_create(
        name="api", kind="oauth_client_credentials", token_url=upstream.url("/token"),
        client_id=OAUTH_CLIENT_ID, scopes="read  write", secret=OAUTH_CLIENT_SECRET,
    )  # fmt: skip
    config = {"url": upstream.url("/echo"), "credential": "api"}
    issued = upstream.tokens_issued

    first = call_tool(endpoint, config)
    second = call_tool(endpoint, config)

    assert echoed_headers(first)["authorization"] == "Bearer [redacted]"
    assert echoed_headers(second)["authorization"] == "Bearer [redacted]"
    assert upstream.tokens_issued == issued + 1


def test_an_oauth_token_endpoint_refusal_is_a_tool_error_without_the_secret(
    transactional_db: None, endpoint: Endpoint, upstream: Upstream
) -> None:
    credential_create(
        name="api", kind="oauth_client_credentials", token_url=upstream.url("/token"),
        client_id=OAUTH_CLIENT_ID, secret="wrong-secret",
    )  # fmt: skip

    with pytest.raises(ToolError) as caught:
        call_tool(endpoint, {"url": upstream.url("/echo"), "credential": "api"})

    assert caught.value.message == (
        'The token endpoint of credential \'api\' answered HTTP 401: {"error": "invalid_client"}'
    )


def test_an_oauth_token_url_is_held_to_the_ssrf_guard(
    transactional_db: None, endpoint: Endpoint, upstream: Upstream
) -> None:
    credential_create(
        name="api", kind="oauth_client_credentials", token_url="http://169.254.169.254/token",
        client_id="c", secret="s",
    )  # fmt: skip

    with pytest.raises(ToolError, match="169.254.169.254 are not allowed"):
        call_tool(endpoint, {"url": upstream.url("/echo"), "credential": "api"})


def test_a_missing_credential_is_a_tool_error(
    transactional_db: None, endpoint: Endpoint, upstream: Upstream
) -> None:
    # The write path refuses a tool naming a missing credential; a row changed around it (a
    # shell, a database restore) still fails at call time with a clear error.
    credential_create(name="api", kind="bearer", secret="tok")
    call_tool(endpoint, {"url": upstream.url("/echo"), "credential": "api"})
    Tool.objects.filter(name="t0").update(
        config={"allow_networks": LOCAL, "url": upstream.url("/echo"), "credential": "gone"},
        updated_at=timezone.now(),
    )
    with pytest.raises(ToolError, match="The credential 'gone' does not exist"):
        run_tool(endpoint, "t0")


def test_an_undecryptable_credential_is_a_tool_error_and_logged_without_secret(
    transactional_db: None,
    endpoint: Endpoint,
    upstream: Upstream,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with override_settings(MCP_SECRET_KEYS=OLD_KEY):
        credential_create(name="api", kind="bearer", secret="tok-lost")
    caplog.set_level(logging.DEBUG)

    with override_settings(MCP_SECRET_KEYS=NEW_KEY), pytest.raises(ToolError) as caught:
        call_tool(endpoint, {"url": upstream.url("/echo"), "credential": "api"})

    assert "cannot be decrypted" in caught.value.message
    assert "Credential 'api' cannot be decrypted" in caplog.text


def test_secrets_of_every_kind_stay_out_of_errors_and_logs(
    transactional_db: None,
    endpoint: Endpoint,
    upstream: Upstream,
    caplog: pytest.LogCaptureFixture,
) -> None:
    credential_create(name="bearer", kind="bearer", secret="bearer-secret-1")
    credential_create(name="basic", kind="basic", username="u", secret="basic-secret-2")
    caplog.set_level(logging.DEBUG)

    results = [
        call_tool(endpoint, {"url": upstream.url("/status/500"), "credential": name})
        for name in ("bearer", "basic")
    ]

    texts = [result.content[0]["text"] for result in results]
    assert texts[0].endswith("you sent 'Bearer [redacted]'")
    assert texts[1].endswith("you sent 'Basic [redacted]'")
    for secret in ("bearer-secret-1", "basic-secret-2", "dTpiYXNpYy1zZWNyZXQtMg=="):
        assert secret not in caplog.text
