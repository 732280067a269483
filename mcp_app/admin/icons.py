"""Icons on the endpoint, tool, resource, template and prompt admins: upload, link, preview.

The ``icons`` field holds the row's MCP ``Icon`` list as JSON (links: https URLs, data: URIs).
An image chosen under "Upload an icon" is checked by ``services.icons.icon_check`` while the
form is cleaned, so a bad file is an error beside the field and nothing is saved; a good one
is added to the list and stored with the row (``IconAdmin.save_model``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldOpts

from mcp_app.admin.writes import CatalogRowForm
from mcp_app.conf import get_conf
from mcp_app.services.icons import (
    UploadedIcon,
    icon_check,
    icon_store,
    public_icons,
    stored_icons,
)

ICON_FIELDS = ("icons", "icon_file", "icon_theme", "icon_preview")
ICON_FIELDSET: tuple[str, _FieldOpts] = ("Icons", {"fields": ICON_FIELDS})


class IconRowForm(CatalogRowForm):
    """A catalog row's form with an icon upload beside its ``icons`` JSON."""

    icon_file = forms.FileField(
        required=False,
        label="Upload an icon",
        help_text=(
            "A PNG, JPEG, WebP or GIF image, added to the icons above when you save. SVG: link "
            "it by https URL in the icons instead (an uploaded SVG could carry scripts)."
        ),
        widget=forms.ClearableFileInput(
            attrs={"accept": "image/png,image/jpeg,image/webp,image/gif"}
        ),
    )
    icon_theme = forms.ChoiceField(
        required=False,
        label="Uploaded icon's theme",
        choices=[
            ("", "any background"),
            ("light", "light backgrounds"),
            ("dark", "dark backgrounds"),
        ],
    )

    uploaded_icon: UploadedIcon | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        limit = get_conf().MCP_MAX_ICON_BYTES
        self.fields["icon_file"].help_text += f" At most {limit} bytes."
        if "icons" in self.fields:
            self.fields["icons"].help_text = (
                'A JSON list of icons, e.g. [{"src": "https://example.com/logo.png", '
                '"mimeType": "image/png", "sizes": ["48x48"]}]; an uploaded icon appears here '
                "by its /icons/ path. Sent to clients of 2025-11-25 and later."
            )

    def clean_icon_file(self) -> Any:
        upload = self.cleaned_data.get("icon_file")
        if not upload:
            return upload
        limit = get_conf().MCP_MAX_ICON_BYTES
        if upload.size > limit:  # refused before it is read
            raise ValidationError(
                f"The icon is {upload.size} bytes; the largest allowed is {limit} bytes."
            )
        self.uploaded_icon = icon_check(upload.read(), filename=upload.name or "")
        return upload

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if "icons" in data:
            data["icons"] = stored_icons(data["icons"])
            if self.uploaded_icon is not None and isinstance(data["icons"], list):
                icon = self.uploaded_icon.icon(theme=data.get("icon_theme") or "")
                kept = [old for old in data["icons"] if old.get("src") != icon["src"]]
                data["icons"] = [*kept, icon]
        return data


class IconAdmin:
    """Mixin for the admins of rows with icons: the preview, and storing an upload."""

    @admin.display(description="Preview")
    def icon_preview(self, obj: Any) -> str:
        icons = public_icons(getattr(obj, "icons", None))
        if not icons:
            return "No icons."
        # An <img> runs no script, whatever the image; no referrer leaves for a linked one.
        return format_html_join(
            "",
            '<img src="{}" alt="{}" title="{}" referrerpolicy="no-referrer" '
            'style="max-width:64px;max-height:64px;margin-right:8px;{}">',
            (
                (
                    icon["src"],
                    icon.get("mimeType", "icon"),
                    " ".join([icon.get("mimeType", ""), *icon.get("sizes", [])]).strip(),
                    "background:#222;" if icon.get("theme") == "dark" else "",
                )
                for icon in icons
            ),
        ) or format_html("")

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if (icon := getattr(form, "uploaded_icon", None)) is not None:
            icon_store(icon=icon)
        super().save_model(request, obj, form, change)  # type: ignore[misc]
