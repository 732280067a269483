"""Resource admin: text or an uploaded file, size computed on save; or an upstream's."""

from __future__ import annotations

from django.contrib import admin
from django.db import models

from mcp_app.admin.access import ACCESS_FIELDSET
from mcp_app.admin.bulk import CatalogItemAdmin
from mcp_app.admin.forms import JSON_FORMFIELD
from mcp_app.admin.writes import CatalogRowForm
from mcp_app.models import Resource


@admin.register(Resource)
class ResourceAdmin(CatalogItemAdmin):
    form = CatalogRowForm
    list_display = ["uri", "name", "mime_type", "size", "upstream", "enabled", "updated_at"]
    list_filter = ["enabled", "mime_type", "endpoints"]
    search_fields = ["uri", "name", "title", "description"]
    filter_horizontal = ["allowed_groups"]
    readonly_fields = ["size", "created_at", "updated_at"]
    formfield_overrides = {models.JSONField: JSON_FORMFIELD}
    fieldsets = [
        (None, {"fields": ["uri", "name", "team", "title", "description", "mime_type", "enabled"]}),
        ("Content (text or file)", {"fields": ["text", "file", "size"]}),
        (
            "Or read from an upstream MCP server",
            {"classes": ["collapse"], "fields": ["upstream", "remote_uri"]},
        ),
        ACCESS_FIELDSET,
        ("Advanced", {"classes": ["collapse"], "fields": ["icons"]}),
        ("History", {"fields": ["created_at", "updated_at"]}),
    ]

    class Media:
        css = {"all": ["mcp_app/admin.css"]}
