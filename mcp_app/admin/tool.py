"""Tool admin: schemas as JSON text, the kind's config through dedicated fields, plus the
OpenAPI import page (``admin/openapi.py``) and each tool's try-it page (``admin/try_it.py``)."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path

from mcp_app.admin.access import ACCESS_FIELDSET
from mcp_app.admin.figures import (
    FiguresChangeList,
    calls_cell,
    calls_url,
    error_cell,
    figures_of,
    figures_panel,
    window_start,
)
from mcp_app.admin.forms import ToolForm
from mcp_app.admin.history import CatalogHistoryAdmin
from mcp_app.admin.openapi import openapi_import_view
from mcp_app.admin.try_it import try_it_view
from mcp_app.audit.selectors import Figures, tool_figures
from mcp_app.executors.base import ConfigError
from mcp_app.executors.http import network_policy
from mcp_app.executors.netguard import normalise_host
from mcp_app.models import Endpoint, Tool
from mcp_app.protocol.results import ToolError


def tool_save_warnings(tool: Tool, endpoints: Sequence[Endpoint]) -> list[str]:
    """What will stop clients from using a tool that saved fine, said at save time."""
    warnings = []
    if not endpoints:
        warnings.append(
            f"{tool.name} is on no endpoint: no client can call it until you choose one "
            "under Endpoints."
        )
    if tool.kind == Tool.Kind.HTTP and (refused := refused_address(tool.config)):
        warnings.append(refused)
    return warnings


def refused_address(config: Mapping[str, Any]) -> str | None:
    """Why the SSRF guard will refuse the host of an HTTP tool's URL, if it will.

    Checked as a call would be (the tool's allow-list plus MCP_HTTP_ALLOWED_NETWORKS). A name
    that does not resolve here is not reported: it may resolve where the calls run.
    """
    host = normalise_host(urlsplit(str(config.get("url", ""))).hostname or "")
    if not host:
        return None
    try:
        policy = network_policy(config)
    except (ConfigError, ToolError):
        return None  # the form or the system check reports a malformed allow-list
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            return None
        addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))
    for address in addresses:
        if not policy.allows(host, address):
            shown = host if str(address) == host else f"{host} ({address})"
            return (
                f"Calls will be refused: {shown} is not a public address (loopback, private, "
                "link-local or a metadata service). Add it under Allowed private hosts or "
                "networks if the tool must reach it."
            )
    return None


@admin.register(Tool)
class ToolAdmin(CatalogHistoryAdmin):
    form = ToolForm
    list_display = [
        "name", "title", "kind", "execution_mode", "enabled", "endpoint_list", "calls_24h",
        "errors_24h", "p95_24h", "updated_at",
    ]  # fmt: skip
    list_filter = ["kind", "execution_mode", "enabled", "endpoints"]
    search_fields = ["name", "title", "description"]
    filter_horizontal = ["allowed_groups"]
    readonly_fields = ["created_at", "updated_at", "last_24_hours"]
    fieldsets = [
        (None, {"fields": ["name", "title", "description", "enabled", "endpoints"]}),
        ("Calls", {"fields": ["last_24_hours"]}),
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

    def save_related(
        self, request: HttpRequest, form: ModelForm, formsets: Any, change: bool
    ) -> None:
        super().save_related(request, form, formsets, change)
        endpoints = list(form.cleaned_data.get("endpoints") or [])
        for warning in tool_save_warnings(form.instance, endpoints):
            messages.warning(request, warning)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tool]:
        return super().get_queryset(request).prefetch_related("endpoints")

    def get_fieldsets(self, request: HttpRequest, obj: Tool | None = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        # A tool being added has no calls yet.
        return fieldsets if obj is not None else [f for f in fieldsets if f[0] != "Calls"]

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[FiguresChangeList]:
        return ToolChangeList

    @admin.display(description="calls and figures, last 24 h")
    def last_24_hours(self, tool: Tool) -> str:
        figures = tool_figures(names=[tool.name], since=window_start()).get(tool.name)
        return figures_panel(figures or Figures(), _tool_calls_url(tool))

    @admin.display(description="calls 24 h")
    def calls_24h(self, tool: Tool) -> str:
        return calls_cell(figures_of(tool), _tool_calls_url(tool))

    @admin.display(description="errors 24 h")
    def errors_24h(self, tool: Tool) -> str:
        return error_cell(figures_of(tool))

    @admin.display(description="p95 24 h")
    def p95_24h(self, tool: Tool) -> str:
        p95 = figures_of(tool).p95
        return "—" if p95 is None else f"{p95:,.0f} ms"

    @admin.display(description="endpoints")
    def endpoint_list(self, tool: Tool) -> str:
        return ", ".join(endpoint.slug for endpoint in tool.endpoints.all()) or "-"


def _tool_calls_url(tool: Tool) -> str:
    return calls_url(tool=tool.name, method="tools/call")


class ToolChangeList(FiguresChangeList):
    @staticmethod
    def figures_for(tools: list[Tool]) -> dict[str, Figures]:
        return tool_figures(names=[tool.name for tool in tools], since=window_start())

    @staticmethod
    def figures_key(tool: Tool) -> str:
        return tool.name
