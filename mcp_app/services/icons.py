"""Uploaded icons: what an upload may hold, storing it, and the URL clients are given.

An uploaded icon is checked by its bytes alone: the type comes from the magic numbers (PNG,
JPEG, WebP or GIF; never the file name or the browser's word), the size from the image
header (read by hand: no imaging library is installed, and no pixel is decoded), within
``MCP_MAX_ICON_BYTES``. SVG is refused on upload: it can carry scripts, and this site would
serve it from its own origin; an SVG icon can still be linked by https URL, where a client
applies the spec's precautions (2025-11-25 basic/index, "Icons": "Consumers SHOULD take
appropriate precautions when consuming SVGs").

A stored icon is named in a row's ``icons`` list by its path ``/icons/<sha256>.<ext>``
(``models.fields.UPLOADED_ICON_PATH``) and served by ``mcp_app/icons.py``; what clients see
is that path under ``PUBLIC_BASE_URL`` (``public_icons``), so the site can move without a
row changing.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

from mcp_app.conf import get_conf, get_site
from mcp_app.models import IconImage
from mcp_app.models.fields import UPLOADED_ICON_PATH

ICON_PATH_PREFIX = "/icons/"
# Media type -> the extension of its URL, and the file-name extensions an upload may carry.
EXTENSIONS: dict[str, str] = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/webp": "webp",
    "image/gif": "gif",
}
_NAMED: dict[str, str] = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "jpe": "image/jpeg",
    "webp": "image/webp",
    "gif": "image/gif",
}
_KINDS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/webp": "WebP", "image/gif": "GIF"}
_CODE = "invalid_icon"


@dataclass(frozen=True, slots=True)
class UploadedIcon:
    """An upload that passed the checks, not yet stored."""

    data: bytes
    mime_type: str
    width: int
    height: int

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def path(self) -> str:
        return f"{ICON_PATH_PREFIX}{self.sha256}.{EXTENSIONS[self.mime_type]}"

    def icon(self, *, theme: str = "") -> dict[str, Any]:
        """The MCP ``Icon`` a row stores for it (``src`` is the site-relative path)."""
        icon: dict[str, Any] = {
            "src": self.path,
            "mimeType": self.mime_type,
            "sizes": [f"{self.width}x{self.height}"],
        }
        if theme:
            icon["theme"] = theme
        return icon


def icon_check(data: bytes, *, filename: str = "") -> UploadedIcon:
    """Return the upload ``data`` as an icon, or say why it cannot be one.

    Raises:
        ValidationError: larger than ``MCP_MAX_ICON_BYTES``, empty, SVG, not a PNG, JPEG,
            WebP or GIF image, a header too short to give the size, or a file name whose
            extension names another type than the bytes hold.
    """
    limit = get_conf().MCP_MAX_ICON_BYTES
    if len(data) > limit:
        raise ValidationError(
            f"The icon is {len(data)} bytes; the largest allowed is {limit} bytes.", code=_CODE
        )
    if not data:
        raise ValidationError("The icon file is empty.", code=_CODE)
    # The magic numbers decide: an image whose text chunks mention "<svg" is still an image,
    # served as one, with nosniff.
    mime_type = _sniff(data)
    if mime_type is None and _looks_like_svg(data):
        raise ValidationError(
            "SVG icons cannot be uploaded (an SVG can carry scripts); upload a PNG, JPEG, WebP "
            "or GIF image, or link the SVG by its https URL.",
            code=_CODE,
        )
    if mime_type is None:
        raise ValidationError("The file is not a PNG, JPEG, WebP or GIF image.", code=_CODE)
    _, dot, extension = filename.rpartition(".")
    named = _NAMED.get(extension.lower()) if dot else mime_type
    if named != mime_type:
        raise ValidationError(
            f"The file is named .{extension} but holds a {_KINDS[mime_type]} image; rename it "
            f"to .{EXTENSIONS[mime_type]}.",
            code=_CODE,
        )
    size = _dimensions(data, mime_type)
    if size is None or 0 in size:
        raise ValidationError(
            f"The {_KINDS[mime_type]} image is damaged or cut short: its size cannot be read.",
            code=_CODE,
        )
    return UploadedIcon(data=data, mime_type=mime_type, width=size[0], height=size[1])


def icon_store(*, icon: UploadedIcon) -> IconImage:
    """Store ``icon`` (once: the same bytes uploaded again reuse the row)."""
    image, _ = IconImage.objects.get_or_create(
        sha256=icon.sha256,
        defaults={
            "mime_type": icon.mime_type,
            "width": icon.width,
            "height": icon.height,
            "data": icon.data,
        },
    )
    return image


def icon_for_path(path: str) -> IconImage | None:
    """The stored icon ``path`` (``/icons/<sha256>.<ext>``) names, or None."""
    if not UPLOADED_ICON_PATH.fullmatch(path):
        return None
    sha256, _, extension = path.removeprefix(ICON_PATH_PREFIX).partition(".")
    image = IconImage.objects.filter(sha256=sha256).first()
    if image is None or EXTENSIONS.get(image.mime_type) != extension:
        return None
    return image


def public_icons(icons: Iterable[Mapping[str, Any]] | None) -> tuple[dict[str, Any], ...]:
    """``icons`` as clients get them: an uploaded icon's path under ``PUBLIC_BASE_URL``."""
    base = get_site().PUBLIC_BASE_URL.rstrip("/")
    shown = []
    for icon in icons or ():
        src = icon.get("src")
        if isinstance(src, str) and UPLOADED_ICON_PATH.fullmatch(src):
            icon = {**icon, "src": base + src}
        shown.append(dict(icon))
    return tuple(shown)


def stored_icons(icons: Any) -> Any:
    """``icons`` as a row keeps them: this site's uploaded-icon URLs back to their paths
    (what ``public_icons`` gave a client comes back as it was stored). Anything else is
    returned as given, for the field's validator to judge."""
    if not isinstance(icons, list):
        return icons
    prefix = get_site().PUBLIC_BASE_URL.rstrip("/")
    stored = []
    for icon in icons:
        src = icon.get("src") if isinstance(icon, dict) else None
        if isinstance(src, str) and UPLOADED_ICON_PATH.fullmatch(src.removeprefix(prefix)):
            icon = {**icon, "src": src.removeprefix(prefix)}
        stored.append(icon)
    return stored


def uploaded_paths(icons: Iterable[Mapping[str, Any]] | None) -> list[str]:
    """The uploaded icons ``icons`` names, as paths."""
    return [
        icon["src"]
        for icon in icons or ()
        if isinstance(icon.get("src"), str) and UPLOADED_ICON_PATH.fullmatch(icon["src"])
    ]


# -- reading the bytes


def _looks_like_svg(data: bytes) -> bool:
    head = data[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    return head.startswith((b"<?xml", b"<svg", b"<!doctype svg")) or b"<svg" in head


def _sniff(data: bytes) -> str | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    return None


def _dimensions(data: bytes, mime_type: str) -> tuple[int, int] | None:
    """(width, height) from the image header, or None when the header is cut short."""
    try:
        if mime_type == "image/png":
            # The first chunk is IHDR: width and height, 4 bytes each, big-endian.
            if data[12:16] != b"IHDR":
                return None
            width, height = struct.unpack(">II", data[16:24])
            return width, height
        if mime_type == "image/gif":
            width, height = struct.unpack("<HH", data[6:10])
            return width, height
        if mime_type == "image/webp":
            return _webp_dimensions(data)
        return _jpeg_dimensions(data)
    except struct.error:
        return None


def _webp_dimensions(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 ":  # lossy: after a 3-byte frame tag and the 9d 01 2a start code
        if data[23:26] != b"\x9d\x01\x2a":
            return None
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L":  # lossless: 14-bit width-1 and height-1 after the 0x2f signature
        if data[20:21] != b"\x2f":
            return None
        (bits,) = struct.unpack("<I", data[21:25])
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":  # extended: 24-bit canvas width-1 and height-1
        if len(data) < 30:
            return None
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    return None


# JPEG start-of-frame markers (baseline, progressive, lossless, arithmetic): not DHT (c4),
# JPG (c8) or DAC (cc), which share the range.
_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_dimensions(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            at += 2
            continue
        if marker in (0xD9, 0xDA):  # end of image, start of scan: no frame header before
            return None
        (length,) = struct.unpack(">H", data[at + 2 : at + 4])
        if marker in _JPEG_FRAMES:
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return width, height
        at += 2 + length
    return None
