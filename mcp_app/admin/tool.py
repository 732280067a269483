"""Tool admin: schemas as JSON text, the kind's config through the fields its executor
supplies, plus the OpenAPI import page (``admin/openapi.py``) and each tool's try-it page
(``admin/try_it.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path

from mcp_app.admin.access import ACCESS_FIELDSET
from mcp_app.admin.bulk import CatalogItemAdmin
from mcp_app.admin.drafting import DraftableAdmin
from mcp_app.admin.figures import (
    FiguresChangeList,
    calls_cell,
    calls_url,
    error_cell,
    figures_of,
    figures_panel,
    per_endpoint_panel,
    window_start,
)
from mcp_app.admin.forms import ToolForm, kind_config_fields
from mcp_app.admin.icons import ICON_FIELDSET, IconAdmin
from mcp_app.admin.openapi import openapi_import_view
from mcp_app.admin.try_it import try_it_view, try_it_view_document
from mcp_app.audit.selectors import Figures, tool_endpoint_figures, tool_figures
from mcp_app.executors import get_executors
from mcp_app.models import Endpoint, Tool


def tool_save_warnings(tool: Tool, endpoints: Sequence[Endpoint]) -> list[str]:
    """What will stop clients from using a tool that saved fine, said at save time."""
    warnings = []
    if not endpoints:
        warnings.append(
            f"{tool.name} is on no endpoint: no client can call it until you choose one "
            "under Endpoints."
        )
    if executor := get_executors().get(tool.kind):
        warnings.extend(executor.save_warnings(tool.config or {}))
    return warnings


@admin.register(Tool)
class ToolAdmin(DraftableAdmin, IconAdmin, CatalogItemAdmin):
    form = ToolForm
    # What fits beside the navigation and the filters at 1366 px: the title and the last
    # change are on the tool's page; kind and mode by their short values.
    list_display = [
        "name", "kind_value", "mode_value", "enabled", "endpoint_list", "calls_24h",
        "errors_24h", "p95_24h",
    ]  # fmt: skip
    list_filter = ["kind", "execution_mode", "enabled", "endpoints"]
    search_fields = ["name", "title", "description"]
    filter_horizontal = ["allowed_groups"]
    readonly_fields = ["icon_preview", "created_at", "updated_at", "last_24_hours"]
    fieldsets = [
        (None, {"fields": ["name", "team", "title", "description", "enabled", "endpoints"]}),
        ("Calls", {"fields": ["last_24_hours"]}),
        # The kinds' config fields follow "kind" (get_fieldsets): their executors supply them.
        ("Implementation", {"fields": ["kind"]}),
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
        ("View (MCP Apps)", {"classes": ["collapse"], "fields": ["ui_resource_uri"]}),
        ACCESS_FIELDSET,
        ICON_FIELDSET,
        ("Advanced", {"classes": ["collapse"], "fields": ["meta"]}),
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
            path(
                "<int:object_id>/try/view/",
                self.admin_site.admin_view(self.try_it_view_document),
                name="mcp_app_tool_try_view",
            ),
        ]
        return [*pages, *super().get_urls()]

    def openapi_import_view(self, request: HttpRequest) -> HttpResponse:
        return openapi_import_view(self, request)

    def try_it_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        return try_it_view(self, request, object_id)

    def try_it_view_document(self, request: HttpRequest, object_id: int) -> HttpResponse:
        return try_it_view_document(self, request, object_id)

    def save_related(
        self, request: HttpRequest, form: ModelForm, formsets: Any, change: bool
    ) -> None:
        super().save_related(request, form, formsets, change)
        endpoints = list(form.cleaned_data.get("endpoints") or [])
        for warning in tool_save_warnings(form.instance, endpoints):
            messages.warning(request, warning)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tool]:
        return super().get_queryset(request).prefetch_related("endpoints")

    def get_form(
        self, request: HttpRequest, obj: Tool | None = None, change: bool = False, **kwargs: Any
    ) -> type[ModelForm]:
        # The kinds' config fields are added by ToolForm itself: a ModelForm class built from
        # the fieldsets would refuse them as unknown fields of Tool.
        fields = kwargs.get("fields", flatten_fieldsets(self.get_fieldsets(request, obj)))
        if fields is not None:
            kind_fields = {name for names in kind_config_fields().values() for name in names}
            kwargs["fields"] = [name for name in fields if name not in kind_fields]
        return super().get_form(request, obj, change, **kwargs)

    def get_fieldsets(self, request: HttpRequest, obj: Tool | None = None) -> Any:
        kind_fields = [name for names in kind_config_fields().values() for name in names]
        fieldsets = [
            (name, {**options, "fields": [*options["fields"], *kind_fields]})
            if name == "Implementation"
            else (name, options)
            for name, options in super().get_fieldsets(request, obj)
        ]
        # A tool being added has no calls yet.
        return fieldsets if obj is not None else [f for f in fieldsets if f[0] != "Calls"]

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[FiguresChangeList]:
        return ToolChangeList

    @admin.display(description="calls and figures, last 24 h")
    def last_24_hours(self, tool: Tool) -> str:
        since = window_start()
        figures = tool_figures(tools=[tool], since=since).get(tool.pk) or Figures()
        panel = figures_panel(figures, _tool_calls_url(tool))
        endpoints = list(tool.endpoints.all())
        if len(endpoints) < 2:
            return panel
        # On several endpoints the total hides which one's clients call it, or fail.
        found = tool_endpoint_figures(tool=tool, since=since)
        return per_endpoint_panel(
            panel,
            [
                (
                    endpoint.slug,
                    found.get(endpoint.pk) or Figures(),
                    calls_url(tool=tool.name, method="tools/call", endpoint=endpoint.slug),
                )
                for endpoint in endpoints
            ],
        )

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

    @admin.display(description="kind", ordering="kind")
    def kind_value(self, tool: Tool) -> str:
        return tool.kind

    @admin.display(description="mode", ordering="execution_mode")
    def mode_value(self, tool: Tool) -> str:
        return tool.execution_mode

    @admin.display(description="endpoints")
    def endpoint_list(self, tool: Tool) -> str:
        return ", ".join(endpoint.slug for endpoint in tool.endpoints.all()) or "-"


def _tool_calls_url(tool: Tool) -> str:
    # The list filters by one endpoint at most: a tool on several links to its name's calls.
    endpoints = [endpoint.slug for endpoint in tool.endpoints.all()]
    if len(endpoints) == 1:
        return calls_url(tool=tool.name, method="tools/call", endpoint=endpoints[0])
    return calls_url(tool=tool.name, method="tools/call")


class ToolChangeList(FiguresChangeList):
    @staticmethod
    def figures_for(tools: list[Tool]) -> dict[int, Figures]:
        return tool_figures(tools=tools, since=window_start())

    @staticmethod
    def figures_key(tool: Tool) -> int:
        return tool.pk
