"""Resource admin: text or an uploaded file, size computed on save; or an upstream's."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db import models
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from mcp_app.admin.access import ACCESS_FIELDSET
from mcp_app.admin.bulk import CatalogItemAdmin
from mcp_app.admin.drafting import DraftableAdmin
from mcp_app.admin.forms import JSON_FORMFIELD
from mcp_app.admin.icons import ICON_FIELDSET, IconAdmin, IconRowForm
from mcp_app.admin.protection import InUseProtectedAdmin
from mcp_app.models import Resource
from mcp_app.protocol import apps

# MIME types the form offers (any other may be typed): the MCP Apps view type among them.
OFFERED_MIME_TYPES = ("text/plain", "text/markdown", "application/json", apps.MIME_TYPE)


@admin.register(Resource)
class ResourceAdmin(DraftableAdmin, IconAdmin, InUseProtectedAdmin, CatalogItemAdmin):
    form = IconRowForm
    list_display = ["uri", "name", "mime_type", "size", "upstream", "enabled", "updated_at"]
    list_filter = ["enabled", "mime_type", "endpoints"]
    search_fields = ["uri", "name", "title", "description"]
    filter_horizontal = ["allowed_groups"]
    readonly_fields = ["icon_preview", "size", "created_at", "updated_at"]
    formfield_overrides = {models.JSONField: JSON_FORMFIELD}
    fieldsets = [
        (None, {"fields": ["uri", "name", "team", "title", "description", "mime_type", "enabled"]}),
        ("Content (text or file)", {"fields": ["text", "file", "size"]}),
        (
            "Or read from an upstream MCP server",
            {"classes": ["collapse"], "fields": ["upstream", "remote_uri"]},
        ),
        ACCESS_FIELDSET,
        (
            "View (MCP Apps)",
            {
                "classes": ["collapse"],
                "description": (
                    f"An interactive view a tool can link: a {apps.URI_SCHEME} URI, MIME type "
                    f"{apps.MIME_TYPE} and an HTML document as its text or file."
                ),
                "fields": ["ui_meta"],
            },
        ),
        ICON_FIELDSET,
        ("History", {"fields": ["created_at", "updated_at"]}),
    ]

    def formfield_for_dbfield(
        self, db_field: models.Field[Any, Any], request: HttpRequest, **kwargs: Any
    ) -> forms.Field | None:
        if db_field.name == "mime_type":
            kwargs["widget"] = OfferedTextInput(OFFERED_MIME_TYPES)
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    class Media:
        css = {"all": ["mcp_app/admin.css"]}


class OfferedTextInput(forms.TextInput):
    """A text input with suggestions (an HTML datalist): any other value may be typed."""

    def __init__(self, offered: tuple[str, ...]) -> None:
        super().__init__()
        self.offered = offered

    def render(self, name: str, value: Any, attrs: Any = None, renderer: Any = None) -> Any:
        list_id = f"{name}-offered"
        html = super().render(name, value, {**(attrs or {}), "list": list_id}, renderer)
        options = format_html_join("", '<option value="{}">', ((item,) for item in self.offered))
        return format_html('{}<datalist id="{}">{}</datalist>', html, list_id, options)
