"""Icons in the admin: upload beside the linked ones, preview, and refusals that save nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from pytest_django.fixtures import Settings

from mcp_app.models import Endpoint, IconImage, Prompt, Tool
from mcp_app.services.catalog_writes import endpoint_create
from mcp_app.services.icons import icon_check
from mcp_app.services.snapshots import build_snapshot
from tests.admin.conftest import tool_payload

pytestmark = pytest.mark.django_db

IMAGES = Path(__file__).parents[1] / "services" / "icon_images"
PNG = (IMAGES / "icon-16x16.png").read_bytes()
WEBP = (IMAGES / "icon-32x8-lossy.webp").read_bytes()
LINKED = {"src": "https://cdn.example.org/greet.svg", "mimeType": "image/svg+xml"}
SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'


def upload(name: str, data: bytes, content_type: str = "image/png") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type=content_type)


def test_a_tool_takes_an_uploaded_icon_beside_its_linked_ones(
    admin_client: Client, settings: Settings
) -> None:
    settings.PUBLIC_BASE_URL = "https://mcp.example.com"
    data = {
        **tool_payload(icons=json.dumps([LINKED]), icon_theme="dark"),
        "icon_file": upload("logo.png", PNG),
    }

    response = admin_client.post(reverse("admin:mcp_app_tool_add"), data)

    assert response.status_code == 302, response.content.decode()
    tool = Tool.objects.get()
    path = icon_check(PNG).path
    assert tool.icons == [
        LINKED,
        {"src": path, "mimeType": "image/png", "sizes": ["16x16"], "theme": "dark"},
    ]
    assert bytes(IconImage.objects.get().data) == PNG
    page = admin_client.get(reverse("admin:mcp_app_tool_change", args=[tool.pk])).content.decode()
    assert f'<img src="https://mcp.example.com{path}"' in page
    assert '<img src="https://cdn.example.org/greet.svg"' in page
    assert 'enctype="multipart/form-data"' in page


@pytest.mark.parametrize(
    ("file", "message"),
    [
        (upload("notes.png", b"plain text, not a picture", "text/plain"), "not a PNG, JPEG"),
        (upload("logo.svg", SVG, "image/svg+xml"), "SVG icons cannot be uploaded"),
        (upload("logo.jpg", PNG, "image/jpeg"), "named .jpg but holds a PNG image"),
        (upload("big.png", PNG + b"\0" * 200), "the largest allowed is 100 bytes"),
    ],
)
def test_a_bad_upload_is_an_error_beside_the_field_and_nothing_is_saved(
    admin_client: Client, settings: Settings, file: SimpleUploadedFile, message: str
) -> None:
    settings.MCP_MAX_ICON_BYTES = 100
    file.seek(0)

    response = admin_client.post(
        reverse("admin:mcp_app_tool_add"), {**tool_payload(), "icon_file": file}
    )

    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Tool.objects.exists()
    assert not IconImage.objects.exists()


def test_a_bad_upload_on_a_change_keeps_the_row_as_it_was(admin_client: Client) -> None:
    admin_client.post(reverse("admin:mcp_app_tool_add"), tool_payload(icons=json.dumps([LINKED])))
    tool = Tool.objects.get()

    response = admin_client.post(
        reverse("admin:mcp_app_tool_change", args=[tool.pk]),
        {**tool_payload(title="Changed", icons="[]"), "icon_file": upload("logo.png", SVG)},
    )

    assert response.status_code == 200
    tool.refresh_from_db()
    assert (tool.title, tool.icons) == ("", [LINKED])


def endpoint_payload(endpoint: Endpoint, **overrides: Any) -> dict[str, Any]:
    return {
        "slug": endpoint.slug, "title": endpoint.title, "description": "", "instructions": "",
        "enabled": "on", "icons": "[]", "allowed_origins": "", "auth_mode": "public",
        "scopes": endpoint.scopes, "base_scope": endpoint.base_scope, **overrides,
    }  # fmt: skip


def test_an_endpoint_upload_reaches_server_info_at_once(admin_client: Client) -> None:
    endpoint = endpoint_create(slug="pics", title="Pictures", auth_mode="public")
    before = build_snapshot(endpoint).endpoint.icons

    response = admin_client.post(
        reverse("admin:mcp_app_endpoint_change", args=[endpoint.pk]),
        endpoint_payload(endpoint, icon_file=upload("logo.webp", WEBP, "image/webp")),
    )

    assert response.status_code == 302, response.content.decode()
    endpoint.refresh_from_db()
    (icon,) = build_snapshot(endpoint).endpoint.icons
    assert before == ()
    assert icon["mimeType"] == "image/webp"
    assert icon["sizes"] == ["32x8"]
    assert str(icon["src"]).endswith(icon_check(WEBP).path)


def test_a_prompt_upload_of_an_icon_it_already_has_is_not_listed_twice(
    admin_client: Client,
) -> None:
    path = icon_check(PNG).path
    stored = {"src": path, "mimeType": "image/png", "sizes": ["16x16"]}
    data = {
        "name": "greet", "title": "", "description": "Greets.", "enabled": "on",
        "icons": [stored],
        "arguments-TOTAL_FORMS": "0", "arguments-INITIAL_FORMS": "0",
        "messages-TOTAL_FORMS": "1", "messages-INITIAL_FORMS": "0",
        "messages-0-position": "0", "messages-0-role": "user", "messages-0-kind": "text",
        "messages-0-text": "Hi", "icon_file": upload("logo.png", PNG),
    }  # fmt: skip
    data["icons"] = f'[{{"src": "{path}", "mimeType": "image/png", "sizes": ["16x16"]}}]'

    response = admin_client.post(reverse("admin:mcp_app_prompt_add"), data)

    assert response.status_code == 302, response.content.decode()
    assert Prompt.objects.get().icons == [stored]
