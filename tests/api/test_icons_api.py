"""Icons through the API: written as links (or an uploaded icon's path), read as clients get
them, and a read value written back stores what it was."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from mcp_app.models import Endpoint
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
