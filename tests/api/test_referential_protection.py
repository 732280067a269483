"""Deleting a row that others use is refused with 409 naming them (``services.references``):
credentials, upstreams, enabled endpoints with connected clients; and catalog import with
``prune`` refuses to delete what the rows it keeps still use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from mcp_app.models import BackgroundCall, Credential, Endpoint, Tool, Upstream
from mcp_app.services.catalog_io import catalog_export, catalog_import
from mcp_app.services.catalog_writes import endpoint_create, resource_create, tool_create
from mcp_app.services.credentials import credential_create
from mcp_app.services.sessions import session_open
from tests.api.conftest import CATALOG_PERMISSIONS

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(token_client: Callable[..., APIClient]) -> APIClient:
    return token_client(*CATALOG_PERMISSIONS)


@pytest.fixture
def github(db: None) -> Credential:
    return credential_create(name="github", kind="bearer", secret="s3cret-token-value")


def _upstream(name: str = "peer", **fields: Any) -> Upstream:
    upstream = Upstream(name=name, url="https://peer.example.com/mcp", **fields)
    upstream.full_clean()
    upstream.save()
    return upstream


def _assert_in_use(response: Any, *users: str) -> None:
    assert response.status_code == 409, response.json()
    body = response.json()
    assert body["type"] == "in_use"
    assert [error["message"] for error in body["errors"]] == list(users)
    assert {error["code"] for error in body["errors"]} == {"in_use"}
    for user in users:
        assert user in body["detail"]


def test_a_credential_an_http_tool_names_is_not_deleted(api: APIClient, github: Credential) -> None:
    tool_create(
        name="repos",
        kind="http",
        config={"method": "GET", "url": "https://api.example.com/repos", "credential": "github"},
        description="Lists repos.",
    )

    response = api.delete(f"/api/v1/credentials/{github.pk}/")

    _assert_in_use(response, "tool 'repos' (config.credential)")
    assert Credential.objects.filter(pk=github.pk).exists()


def test_a_credential_an_upstream_uses_is_not_deleted(api: APIClient, github: Credential) -> None:
    _upstream(credential=github)

    response = api.delete(f"/api/v1/credentials/{github.pk}/")

    _assert_in_use(response, "upstream 'peer' (credential)")
    assert Credential.objects.filter(pk=github.pk).exists()


def test_an_upstream_tools_and_resources_use_is_not_deleted(api: APIClient) -> None:
    peer = _upstream()
    tool_create(
        name="peer_echo",
        kind="mcp_upstream",
        config={"upstream": "peer", "tool": "echo"},
        description="The peer's echo.",
    )
    resource_create(uri="peer://readme", name="readme", upstream=peer, remote_uri="up://readme")

    response = api.delete(f"/api/v1/upstreams/{peer.pk}/")

    _assert_in_use(
        response, "tool 'peer_echo' (config.upstream)", "resource 'peer://readme' (upstream)"
    )
    assert Upstream.objects.filter(pk=peer.pk).exists()
    # What the site exports still imports: nothing points at a missing upstream.
    catalog_import(document=catalog_export(), dry_run=True)  # raises CatalogImportError if not


def test_rows_nothing_uses_are_deleted(api: APIClient, github: Credential) -> None:
    peer = _upstream(credential=github)

    assert api.delete(f"/api/v1/upstreams/{peer.pk}/").status_code == 204
    assert api.delete(f"/api/v1/credentials/{github.pk}/").status_code == 204
    assert not Upstream.objects.exists() and not Credential.objects.exists()


def test_an_enabled_endpoint_with_a_live_session_is_not_deleted(api: APIClient) -> None:
    endpoint = endpoint_create(slug="busy", auth_mode=Endpoint.AuthMode.PUBLIC)
    session_open(
        endpoint_id=endpoint.pk,
        protocol_version="2025-06-18",
        client_capabilities={},
        client_info={"name": "inspector", "version": "1.0"},
    )
    url = f"/api/v1/endpoints/{endpoint.pk}/"

    refused = api.delete(url)

    _assert_in_use(refused, "session 'inspector 1.0' (live session)")
    assert Endpoint.objects.filter(pk=endpoint.pk).exists()
    # Disabled, it serves nobody: deleting it is then allowed.
    assert api.post(f"{url}disable/").status_code == 200
    assert api.delete(url).status_code == 204
    assert not Endpoint.objects.filter(pk=endpoint.pk).exists()


def test_an_enabled_endpoint_with_a_running_background_call_is_not_deleted(
    api: APIClient,
) -> None:
    endpoint = endpoint_create(slug="busy", auth_mode=Endpoint.AuthMode.PUBLIC)
    BackgroundCall.objects.create(
        endpoint=endpoint, tool_name="countdown", protocol_version="2025-11-25",
        soft_time_limit=5, hard_time_limit=10, status=BackgroundCall.Status.WORKING,
    )  # fmt: skip
    finished = endpoint_create(slug="done", auth_mode=Endpoint.AuthMode.PUBLIC)
    BackgroundCall.objects.create(
        endpoint=finished, tool_name="countdown", protocol_version="2025-11-25",
        soft_time_limit=5, hard_time_limit=10, status=BackgroundCall.Status.COMPLETED,
    )  # fmt: skip

    refused = api.delete(f"/api/v1/endpoints/{endpoint.pk}/")

    _assert_in_use(refused, "background call 'countdown' (working background call)")
    assert api.delete(f"/api/v1/endpoints/{finished.pk}/").status_code == 204


def test_prune_refuses_to_delete_an_upstream_a_kept_tool_uses(api: APIClient) -> None:
    peer = _upstream()
    tool_create(
        name="peer_echo",
        kind="mcp_upstream",
        config={"upstream": "peer", "tool": "echo"},
        description="The peer's echo.",
    )
    document = catalog_export()
    # A document that keeps the tool but no longer lists its upstream.
    document["upstreams"] = []

    response = api.post(
        "/api/v1/catalog/import/", {"document": document, "prune": True}, format="json"
    )

    assert response.status_code == 400, response.json()
    (error,) = response.json()["errors"]
    assert error["path"] == "document.upstreams (peer)"
    assert "tool 'peer_echo' (config.upstream)" in error["message"]
    assert "prune" in error["message"]
    assert Upstream.objects.filter(pk=peer.pk).exists()
    assert Tool.objects.get(name="peer_echo").config["upstream"] == "peer"


def test_prune_still_deletes_an_upstream_only_pruned_rows_used(api: APIClient) -> None:
    _upstream()
    tool_create(
        name="peer_echo",
        kind="mcp_upstream",
        config={"upstream": "peer", "tool": "echo"},
        description="The peer's echo.",
    )
    document = catalog_export()
    document["upstreams"], document["tools"] = [], []

    response = api.post(
        "/api/v1/catalog/import/", {"document": document, "prune": True}, format="json"
    )

    assert response.status_code == 200, response.json()
    assert not Upstream.objects.exists() and not Tool.objects.exists()
