"""Tool admin: schemas as JSON text, the kind's config through dedicated fields, plus the
OpenAPI import page (``admin/openapi.py``) and each tool's try-it page (``admin/try_it.py``)."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path

from mcp_app.admin.access import ACCESS_FIELDSET
from mcp_app.admin.forms import ToolForm
from mcp_app.admin.openapi import openapi_import_view
from mcp_app.admin.try_it import try_it_view
from mcp_app.models import Tool


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin):
    form = ToolForm
    list_display = [
        "name", "title", "kind", "execution_mode", "enabled", "endpoint_list", "updated_at"
    ]  # fmt: skip
    list_filter = ["kind", "execution_mode", "enabled", "endpoints"]
    search_fields = ["name", "title", "description"]
    filter_horizontal = ["allowed_groups"]
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
            "Execution",
            {
                "fields": [
                    "execution_mode",
                    "task_support",
                    "soft_time_limit",
                    "hard_time_limit",
                ]
            },
        ),
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
        ACCESS_FIELDSET,
        ("Advanced", {"classes": ["collapse"], "fields": ["icons", "meta"]}),
        ("History", {"fields": ["created_at", "updated_at"]}),
    ]

    class Media:
        css = {"all": ["mcp_app/admin.css"]}
        js = ["mcp_app/tool_form.js"]

    def get_urls(self) -> list[URLPattern]:
        pages = [
            path(
                "import-openapi/",
                self.admin_site.admin_view(self.openapi_import_view),
                name="mcp_app_tool_openapi_import",
            ),
            path(
                "<int:object_id>/try/",
                self.admin_site.admin_view(self.try_it_view),
                name="mcp_app_tool_try",
            ),
        ]
        return [*pages, *super().get_urls()]

    def openapi_import_view(self, request: HttpRequest) -> HttpResponse:
        return openapi_import_view(self, request)

    def try_it_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        return try_it_view(self, request, object_id)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tool]:
        return super().get_queryset(request).prefetch_related("endpoints")

    @admin.display(description="endpoints")
    def endpoint_list(self, tool: Tool) -> str:
        return ", ".join(endpoint.slug for endpoint in tool.endpoints.all()) or "-"
