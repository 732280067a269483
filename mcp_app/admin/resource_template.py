"""ResourceTemplate admin: the resolver is a python resource function, a text template, or an
upstream MCP server the matching URIs are read from."""

from __future__ import annotations

from django.contrib import admin

from mcp_app.admin.access import ACCESS_FIELDSET
from mcp_app.admin.bulk import CatalogItemAdmin
from mcp_app.admin.forms import ResourceTemplateForm
from mcp_app.models import ResourceTemplate


@admin.register(ResourceTemplate)
class ResourceTemplateAdmin(CatalogItemAdmin):
    form = ResourceTemplateForm
    list_display = ["uri_template", "name", "kind", "mime_type", "enabled", "updated_at"]
    list_filter = ["kind", "enabled", "upstream", "endpoints"]
    search_fields = ["uri_template", "name", "title", "description"]
    filter_horizontal = ["allowed_groups"]
    readonly_fields = ["created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["uri_template", "name", "team", "title", "description", "mime_type"]}),
        (
            "Resolver",
            {"fields": ["kind", "function", "template", "upstream", "remote_uri_template"]},
        ),
        (None, {"fields": ["completions", "enabled"]}),
        ACCESS_FIELDSET,
        ("Advanced", {"classes": ["collapse"], "fields": ["icons"]}),
        ("History", {"fields": ["created_at", "updated_at"]}),
    ]

    class Media:
        css = {"all": ["mcp_app/admin.css"]}
