"""Uploaded icons (services/icons.py): what an upload may hold, and catalog import/export.

The images in ``icon_images/`` are real: the JPEG and WebP files were drawn on a canvas by
headless Chromium, the PNG and GIF written by hand, and Chromium decodes every one of them
to the size its name gives (checked when they were made).
"""

from __future__ import annotations

import base64
import zlib
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from pytest_django.fixtures import Settings

from mcp_app.models import Endpoint, IconImage, Tool
from mcp_app.models.fields import validate_icons
from mcp_app.services import history
from mcp_app.services.catalog_io import CatalogImportError, catalog_export, catalog_import
from mcp_app.services.catalog_writes import catalog_row_save, endpoint_create, tool_create
from mcp_app.services.history import version_diff
from mcp_app.services.icons import icon_check, icon_store, public_icons, stored_icons

IMAGES = Path(__file__).parent / "icon_images"
PNG = (IMAGES / "icon-16x16.png").read_bytes()
SVG_WITH_SCRIPT = (
    b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16">'
    b"<script>alert(document.cookie)</script><rect width='16' height='16'/></svg>"
)


@pytest.mark.parametrize(
    ("name", "mime_type", "size"),
    [
        ("icon-16x16.png", "image/png", "16x16"),
        ("icon-24x12.jpg", "image/jpeg", "24x12"),
        ("icon-32x8-lossy.webp", "image/webp", "32x8"),
        ("icon-30x7-lossless.webp", "image/webp", "30x7"),
        ("icon-33x9-extended.webp", "image/webp", "33x9"),
        ("icon-40x20.gif", "image/gif", "40x20"),
    ],
)
def test_an_upload_gets_its_type_from_its_bytes_and_its_size_from_its_header(
    name: str, mime_type: str, size: str
) -> None:
    icon = icon_check((IMAGES / name).read_bytes(), filename=name)

    extension = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp"}.get(
        mime_type, "gif"
    )
    assert icon.icon() == {
        "src": f"/icons/{icon.sha256}.{extension}",
        "mimeType": mime_type,
        "sizes": [size],
    }


@pytest.mark.parametrize(
    ("data", "filename", "message"),
    [
        (b"just some text, not an image", "notes.png", "not a PNG, JPEG, WebP or GIF image"),
        (SVG_WITH_SCRIPT, "logo.svg", "SVG icons cannot be uploaded"),
        (b"\xef\xbb\xbf  <svg><script>x()</script></svg>", "logo.png", "SVG icons cannot"),
        (PNG, "icon.jpg", "named .jpg but holds a PNG image"),
        (PNG, "icon.txt", "named .txt but holds a PNG image"),
        (PNG[:20], "icon.png", "damaged or cut short"),
        (b"", "icon.png", "empty"),
    ],
)
def test_a_bad_upload_is_refused_with_the_reason(data: bytes, filename: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        icon_check(data, filename=filename)


def test_an_image_whose_text_mentions_svg_is_still_that_image() -> None:
    # A PNG tEXt chunk (before the image data) saying "<svg ...>": the magic numbers decide.
    text = b"Comment\0<svg onload=alert(1)>"
    chunk = len(text).to_bytes(4, "big") + b"tEXt" + text
    chunk += zlib.crc32(b"tEXt" + text).to_bytes(4, "big")
    polyglot = PNG[:33] + chunk + PNG[33:]

    icon = icon_check(polyglot, filename="icon.png")

    assert (icon.mime_type, icon.width, icon.height) == ("image/png", 16, 16)


def test_an_upload_over_the_size_limit_is_refused(settings: Settings) -> None:
    settings.MCP_MAX_ICON_BYTES = len(PNG) - 1

    with pytest.raises(ValidationError, match=f"{len(PNG)} bytes; the largest allowed is"):
        icon_check(PNG, filename="icon.png")


def test_a_data_uri_link_is_held_to_the_upload_limit(settings: Settings) -> None:
    settings.MCP_MAX_ICON_BYTES = 1024
    small = "data:image/png;base64," + base64.b64encode(b"x" * 1000).decode()
    large = "data:image/png;base64," + base64.b64encode(b"x" * 1200).decode()

    validate_icons([{"src": small}])
    with pytest.raises(ValidationError, match="at most 1024 bytes; upload the image"):
        validate_icons([{"src": large}])


def test_an_icons_list_takes_an_uploaded_path_but_no_other_path() -> None:
    validate_icons([{"src": "/icons/" + "a" * 64 + ".png"}])
    for src in ("/icons/../etc/passwd", "/static/logo.png", "/icons/" + "a" * 64 + ".svg"):
        with pytest.raises(ValidationError, match="src must be"):
            validate_icons([{"src": src}])


def test_clients_get_uploaded_icons_under_the_public_base_url(settings: Settings) -> None:
    settings.PUBLIC_BASE_URL = "https://mcp.example.com"
    path = "/icons/" + "b" * 64 + ".gif"
    icons: list[dict[str, Any]] = [
        {"src": path, "sizes": ["40x20"]},
        {"src": "https://cdn.example.org/a.png"},
    ]

    shown = public_icons(icons)

    assert shown == (
        {"src": "https://mcp.example.com" + path, "sizes": ["40x20"]},
        {"src": "https://cdn.example.org/a.png"},
    )
    assert stored_icons(list(shown)) == icons


# -- catalog export and import


@pytest.fixture
def catalog_with_an_uploaded_icon(db: None) -> str:
    icon = icon_check(PNG, filename="icon.png")
    icon_store(icon=icon)
    endpoint = endpoint_create(slug="pics", icons=[icon.icon(theme="dark")])
    tool_create(
        name="shout",
        description="Shouts.",
        kind="template",
        config={"template": "hi"},
        icons=[icon.icon(), {"src": "https://cdn.example.org/shout.png", "mimeType": "image/png"}],
        endpoints=[endpoint],
    )
    return icon.path


def test_an_export_carries_the_uploaded_icons_and_an_import_restores_them(
    catalog_with_an_uploaded_icon: str,
) -> None:
    path = catalog_with_an_uploaded_icon
    document = catalog_export()
    assert document["icon_images"] == [{"path": path, "base64": base64.b64encode(PNG).decode()}]
    endpoint_icons = Endpoint.objects.get().icons
    tool_icons = Tool.objects.get().icons
    Tool.objects.all().delete()
    Endpoint.objects.all().delete()
    IconImage.objects.all().delete()

    catalog_import(document=document)

    assert Endpoint.objects.get().icons == endpoint_icons
    assert Tool.objects.get().icons == tool_icons
    assert bytes(IconImage.objects.get().data) == PNG
    # The same document again changes nothing.
    assert not catalog_import(document=document).changed


def test_an_import_whose_icon_bytes_do_not_match_their_path_changes_nothing(
    catalog_with_an_uploaded_icon: str,
) -> None:
    document = catalog_export()
    other = (IMAGES / "icon-40x20.gif").read_bytes()
    document["icon_images"][0]["base64"] = base64.b64encode(other).decode()
    document["endpoints"][0]["title"] = "Changed"
    IconImage.objects.all().delete()

    with pytest.raises(CatalogImportError) as caught:
        catalog_import(document=document)

    messages = [str(error) for error in caught.value.errors]
    assert any(m.startswith("icon_images[0].path: The bytes are those of") for m in messages)
    assert any(m.startswith("endpoints[0].icons: /icons/") for m in messages)
    assert Endpoint.objects.get().title == ""
    assert not IconImage.objects.exists()


def test_an_import_refuses_icon_bytes_an_upload_would_refuse(
    catalog_with_an_uploaded_icon: str,
) -> None:
    document = catalog_export()
    document["icon_images"][0]["base64"] = base64.b64encode(SVG_WITH_SCRIPT).decode()

    with pytest.raises(CatalogImportError, match="SVG icons cannot be uploaded"):
        catalog_import(document=document)


def test_an_endpoints_icon_change_is_in_its_history(db: None) -> None:
    endpoint = endpoint_create(slug="pics")
    icon = icon_check(PNG, filename="logo.png")
    icon_store(icon=icon)
    endpoint.icons = [icon.icon()]
    catalog_row_save(endpoint, actor=None, source=history.ADMIN)

    newer, older = endpoint.history.order_by("-history_id")[:2]
    changes = version_diff(older, newer)

    assert [change.field for change in changes] == ["icons"]
    assert icon.path in changes[0].new
