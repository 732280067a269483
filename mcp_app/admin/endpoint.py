"""Endpoint admin: the list, the catalog pickers and a tools/list preview page."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.contrib import admin, messages
from django.core.handlers.asgi import ASGIRequest
from django.db.models import Count, Model, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from mcp_app.admin.drafting import DraftableAdmin
from mcp_app.admin.figures import (
    FiguresChangeList,
    calls_cell,
    calls_url,
    error_cell,
    figures_of,
    figures_panel,
    window_start,
)
from mcp_app.admin.forms import EndpointForm
from mcp_app.admin.history import recent_changes_view
from mcp_app.admin.icons import ICON_FIELDSET, IconAdmin
from mcp_app.admin.policy import policy_list
from mcp_app.admin.protection import InUseProtectedAdmin
from mcp_app.admin.writes import CatalogRowAdmin
from mcp_app.audit.selectors import Figures, endpoint_figures
from mcp_app.models import BackgroundCall, Endpoint, Policy, Session
from mcp_app.protocol.shaping import shape_tool
from mcp_app.protocol.versions import LATEST_LEGACY, LATEST_MODERN
from mcp_app.services import history
from mcp_app.services.catalog_io import (
    catalog_export_text,
    catalog_permissions,
    catalog_permissions_missing,
    catalog_text_async,
)
from mcp_app.services.snapshots import build_snapshot

# Request attribute holding the membership of the endpoint version being viewed.
_VERSION_MEMBERSHIP = "_mcp_version_membership"

# Revisions shown on the preview page: the newest of each era.
PREVIEW_VERSIONS = (LATEST_MODERN, LATEST_LEGACY)


@admin.register(Endpoint)
class EndpointAdmin(DraftableAdmin, IconAdmin, InUseProtectedAdmin, CatalogRowAdmin):
    form = EndpointForm
    list_display = [
        "slug", "title", "enabled", "listed", "auth_mode", "tool_count", "calls_24h", "errors_24h",
        "p95_24h", "catalog_version", "links",
    ]  # fmt: skip
    list_filter = ["enabled", "listed", "auth_mode"]
    search_fields = ["slug", "title", "description"]
    actions = ["export_yaml", "export_json"]
    filter_horizontal = ["tools", "resources", "resource_templates", "prompts"]
    readonly_fields = [
        "mcp_url", "catalog_version", "created_at", "updated_at", "last_24_hours", "policies",
        "icon_preview",
    ]  # fmt: skip
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "slug",
                    "team",
                    "mcp_url",
                    "title",
                    "description",
                    "instructions",
                    "enabled",
                ]
            },
        ),
        ("Calls", {"fields": ["last_24_hours"]}),
        ("Catalog", {"fields": ["tools", "resources", "resource_templates", "prompts"]}),
        ("Access", {"fields": ["allowed_origins"]}),
        ("Discovery", {"fields": ["listed"]}),
        ("Review", {"fields": ["require_review"]}),
        ICON_FIELDSET,
        ("Policies around calls", {"fields": ["policies"]}),
        ("Authorization", {"fields": ["auth_mode", "scopes", "base_scope"]}),
        ("History", {"fields": ["catalog_version", "created_at", "updated_at"]}),
    ]

    class Media:
        css = {"all": ["mcp_app/admin.css"]}

    @admin.action(description="Export selected endpoints (YAML)", permissions=["view"])
    def export_yaml(
        self, request: HttpRequest, queryset: QuerySet[Endpoint]
    ) -> HttpResponseBase | None:
        return self._export(request, queryset, "yaml")

    @admin.action(description="Export selected endpoints (JSON)", permissions=["view"])
    def export_json(
        self, request: HttpRequest, queryset: QuerySet[Endpoint]
    ) -> HttpResponseBase | None:
        return self._export(request, queryset, "json")

    def _export(
        self, request: HttpRequest, queryset: QuerySet[Endpoint], fmt: str
    ) -> HttpResponseBase | None:
        # Refused as the API refuses it, without view on every model the file holds: the
        # list comes back naming the missing permissions.
        missing = catalog_permissions_missing(request.user, catalog_permissions())
        if missing:
            self.message_user(
                request,
                f"Exporting the catalog needs permissions you do not have: {', '.join(missing)}.",
                messages.ERROR,
            )
            return None
        return _export_download(request, queryset, fmt)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Endpoint]:
        return super().get_queryset(request).annotate(_tool_count=Count("tools", distinct=True))

    def get_deleted_objects(
        self, objs: Sequence[Model] | QuerySet[Model], request: HttpRequest
    ) -> tuple[Any, dict[Any, Any], set[Any], list[Any]]:
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        # Sessions and background calls are the endpoint's own state, read-only in the admin
        # and deleted with it: whether they block the delete is services.references' rule
        # (live ones of an enabled endpoint do), not the admin's delete permission. Its
        # policies are part of it too, and go with it.
        own = {
            str(Session._meta.verbose_name),
            str(BackgroundCall._meta.verbose_name),
            str(Policy._meta.verbose_name),
        }
        perms_needed = {name for name in perms_needed if str(name) not in own}
        return deleted, counts, perms_needed, protected

    def get_fieldsets(self, request: HttpRequest, obj: Endpoint | None = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        # An endpoint being added has no calls yet.
        return fieldsets if obj is not None else [f for f in fieldsets if f[0] != "Calls"]

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[FiguresChangeList]:
        return EndpointChangeList

    @admin.display(description="requests and figures, last 24 h")
    def last_24_hours(self, endpoint: Endpoint) -> str:
        figures = endpoint_figures(endpoint_ids=[endpoint.pk], since=window_start())
        return figures_panel(
            figures.get(endpoint.pk) or Figures(), calls_url(endpoint=endpoint.slug)
        )

    @admin.display(description="requests 24 h")
    def calls_24h(self, endpoint: Endpoint) -> str:
        return calls_cell(figures_of(endpoint), calls_url(endpoint=endpoint.slug))

    @admin.display(description="errors 24 h")
    def errors_24h(self, endpoint: Endpoint) -> str:
        return error_cell(figures_of(endpoint))

    @admin.display(description="p95 24 h")
    def p95_24h(self, endpoint: Endpoint) -> str:
        p95 = figures_of(endpoint).p95
        return "—" if p95 is None else f"{p95:,.0f} ms"

    def get_urls(self) -> list[URLPattern]:
        preview = path(
            "<int:object_id>/preview/",
            self.admin_site.admin_view(self.preview_view),
            name="mcp_app_endpoint_preview",
        )
        recent = path(
            "recent-changes/",
            self.admin_site.admin_view(self.recent_changes_view),
            name="mcp_app_recent_changes",
        )
        return [preview, recent, *super().get_urls()]

    def recent_changes_view(self, request: HttpRequest) -> HttpResponse:
        return recent_changes_view(self, request)

    def preview_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """Show tools/list as the newest revisions of each era see it."""
        endpoint = get_object_or_404(Endpoint, pk=object_id)
        if not self.has_view_permission(request, endpoint):
            # The change view's own answer to a missing object; private, so not in django-stubs.
            return self._get_obj_does_not_exist_redirect(request, self.opts, str(object_id))
        snapshot = build_snapshot(endpoint)
        previews = [
            {
                "version": version,
                "json": json.dumps(
                    {"tools": [shape_tool(tool, version) for tool in snapshot.tools]},
                    indent=2,
                    ensure_ascii=False,
                ),
            }
            for version in PREVIEW_VERSIONS
        ]
        context = {
            **self.admin_site.each_context(request),
            "title": f"tools/list of {endpoint.slug}",
            "opts": self.opts,
            "original": endpoint,
            "endpoint": endpoint,
            "tool_count": len(snapshot.tools),
            "previews": previews,
        }
        return TemplateResponse(request, "admin/mcp_app/endpoint/preview.html", context)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        extra = {
            "preview_url": reverse("admin:mcp_app_endpoint_preview", args=[object_id]),
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, extra)

    def history_form_view(
        self,
        request: HttpRequest,
        object_id: str,
        version_id: str,
        extra_context: dict[str, Any] | None = None,
    ) -> Any:
        # The version page fills the catalog pickers with what the endpoint published at that
        # version (the library would show today's membership); submitting it reverts both.
        record = get_object_or_404(Endpoint.history, id=object_id, history_id=version_id)
        request.__dict__[_VERSION_MEMBERSHIP] = history.membership_at(
            int(object_id), history.version_end(record)
        )
        return super().history_form_view(request, object_id, version_id, extra_context)

    def get_form(
        self, request: HttpRequest, obj: Endpoint | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        found = request.__dict__.get(_VERSION_MEMBERSHIP)
        if found is None:
            return form
        membership: dict[str, list[int]] = found

        class VersionForm(form):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **form_kwargs: Any) -> None:
                form_kwargs["initial"] = {**membership, **(form_kwargs.get("initial") or {})}
                super().__init__(*args, **form_kwargs)

        return VersionForm

    @admin.display(description="tools", ordering="_tool_count")
    def tool_count(self, endpoint: Endpoint) -> int:
        return endpoint._tool_count  # type: ignore[attr-defined]  # annotated in get_queryset

    @admin.display(description="policies")
    def policies(self, endpoint: Endpoint | None) -> str:
        return policy_list(endpoint)

    @admin.display(description="MCP URL")
    def mcp_url(self, endpoint: Endpoint) -> str:
        return endpoint.public_url() if endpoint.slug else "-"

    @admin.display(description="links")
    def links(self, endpoint: Endpoint) -> str:
        return format_html(
            '<a href="{}">Connect</a> · <a href="{}">tools/list preview</a>',
            reverse("mcp_app:endpoint_connect", args=[endpoint.slug]),
            reverse("admin:mcp_app_endpoint_preview", args=[endpoint.pk]),
        )


def _export_download(
    request: HttpRequest, queryset: QuerySet[Endpoint], fmt: str
) -> StreamingHttpResponse:
    """The file ``mcp_export --endpoint`` writes for these endpoints, as a download (of the
    rows the user's teams see), streamed as ``catalog_export_text`` writes it."""
    slugs = sorted(queryset.values_list("slug", flat=True))
    pieces = catalog_export_text(endpoint_slugs=slugs, user=request.user, fmt=fmt)
    content_type = "application/json" if fmt == "json" else "application/yaml"
    body = catalog_text_async(pieces) if isinstance(request, ASGIRequest) else pieces
    response = StreamingHttpResponse(body, content_type=f"{content_type}; charset=utf-8")
    name = slugs[0] if len(slugs) == 1 else "endpoints"
    response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    return response


class EndpointChangeList(FiguresChangeList):
    @staticmethod
    def figures_for(endpoints: list[Endpoint]) -> dict[int, Figures]:
        return endpoint_figures(endpoint_ids=[e.pk for e in endpoints], since=window_start())

    @staticmethod
    def figures_key(endpoint: Endpoint) -> int:
        return endpoint.pk
