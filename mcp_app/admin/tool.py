"""Tool admin: schemas as JSON text, the kind's config through dedicated fields."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from mcp_app.admin.forms import ToolForm
from mcp_app.models import Tool


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin):
    form = ToolForm
    list_display = ["name", "title", "kind", "enabled", "endpoint_list", "updated_at"]
    list_filter = ["kind", "enabled", "endpoints"]
    search_fields = ["name", "title", "description"]
    readonly_fields = ["created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["name", "title", "description", "enabled", "endpoints"]}),
        (
            "Implementation",
            {
                "fields": [
                    "kind",
                    "function",
                    "template",
                    "template_output",
                    "http_method",
                    "http_url",
                    "http_query",
                    "http_headers",
                    "http_body",
                    "http_body_template",
                    "http_timeout",
                    "http_retries",
                    "http_expected_status",
                    "http_select",
                    "http_credential",
                    "http_allow_hosts",
                    "http_allow_networks",
                ]  # fmt: skip
            },
        ),
        ("Schemas", {"fields": ["input_schema", "output_schema"]}),
        (
            "Behaviour hints (empty = not stated)",
            {
                "fields": [
                    "read_only_hint",
                    "destructive_hint",
                    "idempotent_hint",
                    "open_world_hint",
                ]
            },
        ),
        ("Call log", {"fields": ["capture_mode", "capture_max_bytes", "capture_redact"]}),
        ("Advanced", {"classes": ["collapse"], "fields": ["icons", "meta"]}),
        ("History", {"fields": ["created_at", "updated_at"]}),
    ]

    class Media:
        css = {"all": ["mcp_app/admin.css"]}
        js = ["mcp_app/tool_form.js"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tool]:
        return super().get_queryset(request).prefetch_related("endpoints")

    @admin.display(description="endpoints")
    def endpoint_list(self, tool: Tool) -> str:
        return ", ".join(endpoint.slug for endpoint in tool.endpoints.all()) or "-"
