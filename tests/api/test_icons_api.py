"""Icons through the API: written as links (or an uploaded icon's path), read as clients get
them, and a read value written back stores what it was."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

import pytest
from django.test import Client
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from mcp_app.models import Endpoint, IconImage
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from mcp_app.services.icons import icon_check, icon_store
from tests.api.conftest import CATALOG_PERMISSIONS

pytestmark = pytest.mark.django_db

PNG = (Path(__file__).parents[1] / "services" / "icon_images" / "icon-16x16.png").read_bytes()
LINKED = {"src": "https://cdn.example.org/main.png", "mimeType": "image/png", "theme": "dark"}


@pytest.fixture
def api(token_client: Callable[..., APIClient], settings: Settings) -> APIClient:
    settings.PUBLIC_BASE_URL = "https://mcp.example.com"
    return token_client(*CATALOG_PERMISSIONS)


def test_an_endpoint_takes_linked_icons(api: APIClient) -> None:
    endpoint = endpoint_create(slug="main", auth_mode="public")

    changed = api.patch(f"/api/v1/endpoints/{endpoint.pk}/", {"icons": [LINKED]}, format="json")

    assert changed.status_code == 200, changed.json()
    assert changed.json()["icons"] == [LINKED]
    endpoint.refresh_from_db()
    assert endpoint.icons == [LINKED]


def test_an_uploaded_icon_reads_as_its_public_url_and_writes_back_as_its_path(
    api: APIClient,
) -> None:
    icon = icon_check(PNG, filename="logo.png")
    icon_store(icon=icon)
    tool = tool_create(
        name="shout", description="Shouts.", kind="template", config={"template": "HI"}
    )
    url = f"/api/v1/tools/{tool.pk}/"

    api.patch(url, {"icons": [icon.icon(), LINKED]}, format="json")
    read = api.get(url).json()["icons"]
    written_back = api.patch(url, {"icons": read}, format="json")

    assert read == [{**icon.icon(), "src": f"https://mcp.example.com{icon.path}"}, LINKED]
    assert written_back.status_code == 200
    tool.refresh_from_db()
    assert tool.icons == [icon.icon(), LINKED]


@pytest.mark.parametrize(
    "icons",
    [
        [{"src": "javascript:alert(1)"}],
        [{"src": "/icons/../../etc/passwd"}],
        [{"src": "https://cdn.example.org/a.png", "theme": "purple"}],
        {"src": "https://cdn.example.org/a.png"},
    ],
)
def test_a_bad_icon_is_refused_and_nothing_changes(api: APIClient, icons: object) -> None:
    endpoint = endpoint_create(slug="main", auth_mode="public", icons=[LINKED])

    refused = api.patch(
        f"/api/v1/endpoints/{endpoint.pk}/", {"icons": icons, "title": "New"}, format="json"
    )

    assert refused.status_code == 400
    assert "icons" in str(refused.json())
    endpoint = Endpoint.objects.get()
    assert (endpoint.title, endpoint.icons) == ("", [LINKED])


def test_an_icon_uploaded_through_the_api_is_stored_served_and_usable(
    token_client: Callable[..., APIClient], settings: Settings, client: Client
) -> None:
    settings.PUBLIC_BASE_URL = "https://mcp.example.com"
    api = token_client(*CATALOG_PERMISSIONS, "mcp_app.add_iconimage")
    endpoint = endpoint_create(slug="main", auth_mode="public")

    created = api.post(
        "/api/v1/icons/",
        {"base64": base64.b64encode(PNG).decode(), "filename": "logo.png", "theme": "dark"},
        format="json",
    )
    icon = created.json()
    used = api.patch(f"/api/v1/endpoints/{endpoint.pk}/", {"icons": [icon]}, format="json")
    served = client.get(icon["src"].removeprefix("https://mcp.example.com"))

    assert created.status_code == 201
    path = icon_check(PNG).path
    assert icon == {
        "src": f"https://mcp.example.com{path}",
        "mimeType": "image/png",
        "sizes": ["16x16"],
        "theme": "dark",
    }
    assert used.status_code == 200
    endpoint.refresh_from_db()
    assert endpoint.icons == [{**icon, "src": path}]
    assert served.status_code == 200
    assert served.content == PNG
    assert served["Content-Type"] == "image/png"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"base64": base64.b64encode(b"<svg><script>x()</script></svg>").decode()}, "SVG icons"),
        ({"base64": base64.b64encode(PNG).decode(), "filename": "logo.gif"}, "named .gif"),
        ({"base64": "not base64!"}, "Not valid base64."),
        ({"base64": base64.b64encode(PNG * 10).decode()}, "larger than the 100 bytes"),
    ],
)
def test_a_bad_api_upload_is_a_400_and_nothing_is_stored(
    token_client: Callable[..., APIClient], settings: Settings, body: dict[str, str], message: str
) -> None:
    settings.MCP_MAX_ICON_BYTES = 100
    api = token_client("mcp_app.add_iconimage")

    refused = api.post("/api/v1/icons/", body, format="json")

    assert refused.status_code == 400
    errors = refused.json()["errors"]
    assert [error["path"] for error in errors] == ["base64"]
    assert message in errors[0]["message"]
    assert not IconImage.objects.exists()


def test_an_api_upload_needs_the_add_icon_permission(
    token_client: Callable[..., APIClient],
) -> None:
    api = token_client(*CATALOG_PERMISSIONS)

    refused = api.post("/api/v1/icons/", {"base64": base64.b64encode(PNG).decode()}, format="json")

    assert refused.status_code == 403
    assert "mcp_app.add_iconimage" in str(refused.json())
    assert not IconImage.objects.exists()
