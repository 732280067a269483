"""The staff connect page and endpoint index: URLs and ready-to-paste client configurations."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from mcp.client.auth import TokenStorage
from pytest_django.fixtures import Settings

from conformance import runner
from mcp_app.models import Endpoint
from mcp_app.services.catalog_writes import endpoint_create, tool_create

CONNECT = reverse("mcp_app:endpoint_connect", args=["test"])


@pytest.mark.django_db
def test_connect_page_shows_the_url_and_every_client_config(
    admin_client: Client, endpoint: Endpoint, settings: Settings
) -> None:
    settings.PUBLIC_BASE_URL = "https://mcp.example.com"
    tool_create(name="echo", kind="python", config={"function": "echo"}, endpoints=[endpoint])

    response = admin_client.get(CONNECT)

    assert response.status_code == 200
    url = "https://mcp.example.com/mcp/test"
    assert response.context["url"] == url
    configs = {config["id"]: config["code"] for config in response.context["configs"]}
    assert configs["inspector"].startswith("npx @modelcontextprotocol/inspector")
    assert configs["claude-code"] == f"claude mcp add --transport http test {url}"
    assert json.loads(configs["vscode"]) == {"servers": {"test": {"type": "http", "url": url}}}
    assert json.loads(configs["cursor"]) == {"mcpServers": {"test": {"url": url}}}
    assert f'async with Client("{url}") as client:' in configs["python"]
    assert 'await client.call_tool("echo", {"message": "hello"})' in configs["python"]
    compile(configs["python"], "<connect>", "exec")
    assert url.encode() in response.content
    assert b"mcp_app/copy.js" in response.content


@pytest.mark.django_db
def test_python_example_lists_tools_when_the_endpoint_has_none(
    admin_client: Client, endpoint: Endpoint
) -> None:
    response = admin_client.get(CONNECT)

    python = next(c["code"] for c in response.context["configs"] if c["id"] == "python")
    assert "await client.list_tools()" in python


@pytest.mark.django_db
def test_unknown_endpoint_is_404(admin_client: Client) -> None:
    assert admin_client.get(reverse("mcp_app:endpoint_connect", args=["nope"])).status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize("url", [CONNECT, reverse("mcp_app:endpoint_index")])
def test_non_staff_users_are_sent_to_the_login_page(
    client: Client, endpoint: Endpoint, url: str
) -> None:
    client.force_login(User.objects.create_user("visitor"))

    response = client.get(url)

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


@pytest.mark.django_db
def test_index_lists_endpoints_with_their_urls(admin_client: Client, endpoint: Endpoint) -> None:
    response = admin_client.get(reverse("mcp_app:endpoint_index"))

    assert response.status_code == 200
    assert b"http://127.0.0.1:8000/mcp/test" in response.content
    assert CONNECT.encode() in response.content


@pytest.mark.django_db
def test_the_page_says_how_clients_sign_in(admin_client: Client) -> None:
    protected = endpoint_create(slug="protected")
    public = endpoint_create(slug="open", auth_mode=Endpoint.AuthMode.PUBLIC)

    def page(endpoint: Endpoint) -> str:
        url = reverse("mcp_app:endpoint_connect", args=[endpoint.slug])
        return admin_client.get(url).content.decode()

    oauth_page, public_page = page(protected), page(public)

    assert "Sign-in: OAuth 2.1" in oauth_page
    assert "<code title=" in oauth_page and ">mcp:read</code>" in oauth_page
    assert "Public: anyone who can reach this URL" in public_page
    assert "Sign-in: OAuth" not in public_page


@pytest.mark.django_db
def test_an_oauth_endpoints_examples_sign_in_and_import(admin_client: Client) -> None:
    protected = endpoint_create(slug="protected")
    tool_create(name="echo", kind="python", config={"function": "echo"}, endpoints=[protected])

    response = admin_client.get(reverse("mcp_app:endpoint_connect", args=["protected"]))

    configs = {config["id"]: config["code"] for config in response.context["configs"]}
    python, typescript = configs["python"], configs["typescript"]
    assert "auth = OAuthClientProvider(" in python
    assert "httpx2.AsyncClient(auth=auth)" in python
    assert 'await client.call_tool("echo", {"message": "hello"})' in python
    # Complete as shown: it compiles, its imports resolve against the SDK we test with, and
    # its storage has every method the SDK's TokenStorage protocol asks for.
    code = compile(python, "<connect>", "exec")
    namespace: dict[str, Any] = {}
    exec(python.split("\nasyncio.run(main())")[0], namespace)  # noqa: S102  (our own example)
    assert code is not None
    storage = namespace["MemoryStorage"]
    assert all(hasattr(storage, name) for name in vars(TokenStorage) if not name.startswith("_"))
    assert "authProvider: signIn" in typescript and "transport.finishAuth(" in typescript
    assert 'client.callTool({ name: "echo", arguments: {"message": "hello"} })' in typescript


@pytest.mark.django_db
def test_a_public_endpoints_typescript_example_needs_no_sign_in(
    admin_client: Client, endpoint: Endpoint
) -> None:
    response = admin_client.get(CONNECT)

    typescript = next(c["code"] for c in response.context["configs"] if c["id"] == "typescript")
    assert "authProvider" not in typescript
    assert "console.log(await client.listTools());" in typescript


@pytest.mark.django_db
@pytest.mark.parametrize("auth_mode", ["public", "oauth"])
def test_the_typescript_example_is_an_es_module_and_the_inspector_is_pinned(
    admin_client: Client, auth_mode: str
) -> None:
    """Issue #28: saved as connect.ts (CommonJS where no package.json says "module"), tsx
    refused its top-level await; an unpinned old Inspector rewrote the path and got a 404."""
    endpoint_create(slug="pinned", auth_mode=auth_mode)

    response = admin_client.get(reverse("mcp_app:endpoint_connect", args=["pinned"]))

    configs = {config["id"]: config["code"] for config in response.context["configs"]}
    typescript = configs["typescript"]
    assert "run with: npx tsx connect.mts" in typescript
    assert "connect.ts" not in typescript.replace("connect.mts", "")
    # The version the conformance runs drive the Inspector with.
    assert configs["inspector"].split("\n")[0] == (
        f"npx @modelcontextprotocol/inspector@{runner.INSPECTOR_VERSION}"
    )
