"""stdio upstreams through the management API: the same allow-list checks as the admin."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from mcp_app.models import Credential, Upstream
from tests.api.conftest import CATALOG_PERMISSIONS

SERVERS = {
    "files": {"command": ["server-files"], "args": ["--root=*"], "credential_env": ["TOKEN"]}
}


@pytest.fixture
def api(token_client: Callable[..., APIClient], settings: Settings) -> APIClient:
    settings.MCP_STDIO_SERVERS = json.dumps(SERVERS)
    return token_client(*CATALOG_PERMISSIONS)


def test_a_stdio_upstream_is_created_with_its_extras(api: APIClient) -> None:
    api.post("/api/v1/credentials/", {"name": "files-token", "kind": "bearer", "secret": "k"})
    created = api.post(
        "/api/v1/upstreams/",
        {"name": "files", "transport": "stdio", "stdio_server": "files",
         "stdio_args": ["--root=/a b"], "stdio_env": {"TOKEN": "files-token"}},
        format="json",
    )  # fmt: skip
    assert created.status_code == 201, created.json()
    body = created.json()
    assert (body["transport"], body["url"], body["stdio_args"]) == ("stdio", "", ["--root=/a b"])
    assert body["stdio_env"] == {"TOKEN": "files-token"}


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"stdio_server": "bash"}, "stdio_server"),
        ({"stdio_args": ["--root=/a", "-c"]}, "stdio_args"),
        ({"stdio_env": {"PATH": "x"}}, "stdio_env"),
        ({"url": "https://peer.example.com/mcp"}, "url"),
    ],
)
def test_what_the_allow_list_does_not_offer_is_refused(
    api: APIClient, body: dict[str, Any], path: str
) -> None:
    response = api.post(
        "/api/v1/upstreams/",
        {"name": "files", "transport": "stdio", "stdio_server": "files", **body},
        format="json",
    )
    assert response.status_code == 400, response.json()
    assert path in {error["path"] for error in response.json()["errors"]}
    assert not Upstream.objects.exists()


def test_a_credential_a_stdio_upstream_uses_is_not_deleted(api: APIClient) -> None:
    made = api.post(
        "/api/v1/credentials/", {"name": "files-token", "kind": "bearer", "secret": "k"}
    )
    api.post(
        "/api/v1/upstreams/",
        {"name": "files", "transport": "stdio", "stdio_server": "files",
         "stdio_env": {"TOKEN": "files-token"}},
        format="json",
    )  # fmt: skip
    response = api.delete(f"/api/v1/credentials/{made.json()['id']}/")
    assert response.status_code == 409
    assert "upstream 'files' (stdio_env.TOKEN)" in response.json()["detail"]
    assert Credential.objects.filter(name="files-token").exists()
