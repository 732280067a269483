"""Upstream MCP servers in the admin: settings, health and breaker, and the tool sync page.

The sync page ("Import tools") lists what the upstream offers now against the tools that call
it: new tools, tools the upstream changed (each field, ours against theirs), tools the upstream
no longer has, and the same for its resources, templates and prompts. The operator ticks what
to apply, the endpoints that publish new rows (with the change permission on endpoints) and
whether they start enabled, so "enable and publish eleven synced tools" is one submit;
``services.upstream_sync.upstream_offer_apply`` does it. The list is fetched again on apply, so the
server keeps no state between the two steps.
A stdio upstream's fields are checked against the administrator's allow-list by the model
(``Upstream.clean``), so the form shows what is not allowed next to the field.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html

from mcp_app.admin.bulk import ENDPOINT_PERMISSION
from mcp_app.admin.connection import UpstreamForm
from mcp_app.admin.protection import InUseProtectedAdmin
from mcp_app.admin.writes import SettingRowAdmin
from mcp_app.executors.mcp_upstream import close_sessions
from mcp_app.models import Endpoint, Tool, Upstream
from mcp_app.protocol.results import ToolError
from mcp_app.services import teams
from mcp_app.services.upstream_sync import (
    SyncChoice,
    UpstreamOffer,
    upstream_offer_apply,
    upstream_prompts_plan,
    upstream_resources_plan,
    upstream_sync_plan,
    upstream_templates_plan,
)
from mcp_app.services.upstream_targets import (
    upstream_list_offer,
    upstream_refused_address,
    upstream_reset_breaker,
)


@admin.register(Upstream)
class UpstreamAdmin(InUseProtectedAdmin, SettingRowAdmin):
    form = UpstreamForm
    list_display = [
        "name", "transport", "url", "enabled", "probe_state", "health", "tools_state",
        "last_probe_at", "last_success_at", "protocol_version",
    ]  # fmt: skip
    list_filter = ["enabled", "transport", "probe_state"]
    # Django 5.2 warns that a scheme-less URL will mean https in 6.0: say so now.
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    search_fields = ["name", "url", "description"]
    readonly_fields = [
        "health", "last_success_at", "last_error_at", "last_error", "protocol_version",
        "consecutive_failures", "circuit_open_until", "sync_link", "tools_state",
        "tools_changed_at", "tools_synced_at", "probe_state", "last_probe_at", "probe_failures",
        "created_at", "updated_at",
    ]  # fmt: skip
    actions = ["reset_breaker"]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "name",
                    "team",
                    "description",
                    "transport",
                    "url",
                    "credential",
                    "enabled",
                ]
            },
        ),
        (
            "stdio (an allow-listed program, run by the stdio bridge)",
            {"fields": ["stdio_server", "stdio_args", "stdio_cwd", "stdio_env"]},
        ),
        (
            "Authorization and headers",
            {
                "fields": [
                    "auth_mode",
                    "oauth_client_id",
                    "oauth_client_secret",
                    "oauth_scopes",
                    "forward_headers",
                ]  # fmt: skip
            },
        ),
        (
            "Tools",
            {
                "fields": [
                    "sync_link",
                    "sync_policy",
                    "tools_state",
                    "tools_changed_at",
                    "tools_synced_at",
                ]
            },
        ),
        ("Limits", {"fields": ["connect_timeout", "call_timeout", "allow_networks"]}),
        ("Sessions", {"fields": ["stateless", "session_idle_seconds", "max_sessions"]}),
        ("Circuit breaker", {"fields": ["failure_threshold", "cooldown_seconds"]}),
        (
            "Health probe",
            {
                "fields": [
                    "probe_interval_seconds",
                    "probe_timeout",
                    "unhealthy_threshold",
                    "probe_state",
                    "last_probe_at",
                    "probe_failures",
                ]  # fmt: skip
            },
        ),
        (
            "Health",
            {
                "fields": [
                    "health",
                    "last_success_at",
                    "last_error_at",
                    "last_error",
                    "protocol_version",
                    "consecutive_failures",
                    "circuit_open_until",
                ]  # fmt: skip
            },
        ),
        ("History", {"fields": ["created_at", "updated_at"]}),
    ]

    def save_model(self, request: HttpRequest, obj: Upstream, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        # Saved all the same (the network may be allow-listed later, or the name resolve
        # elsewhere), but said now rather than at the first call, as for an HTTP tool.
        refused = upstream_refused_address(obj)
        if refused:
            messages.warning(request, refused)

    @admin.display(description="tools", boolean=False)
    def tools_state(self, upstream: Upstream) -> str:
        if upstream.tools_out_of_sync:
            return "out of sync: the upstream's tool list changed; re-sync"
        return "in sync" if upstream.tools_synced_at else "never synced"

    @admin.display(description="health")
    def health(self, upstream: Upstream) -> str:
        if upstream.circuit_open:
            until = timezone.localtime(upstream.circuit_open_until)
            return f"breaker open until {until:%H:%M:%S} (failing fast)"
        if upstream.consecutive_failures:
            return f"failing ({upstream.consecutive_failures} in a row)"
        if upstream.last_success_at is None:
            return "not contacted yet"
        return "ok"

    @admin.display(description="tools")
    def sync_link(self, upstream: Upstream) -> str:
        if upstream.pk is None:
            return "Save first, then import its tools."
        url = reverse("admin:mcp_app_upstream_sync", args=[upstream.pk])
        return format_html(
            '<a class="button" href="{}">Import / re-sync tools, resources and prompts</a>', url
        )

    @admin.action(description="Close the circuit breaker (try again now)")
    def reset_breaker(self, request: HttpRequest, queryset: QuerySet[Upstream]) -> None:
        for upstream in queryset:
            upstream_reset_breaker(upstream)
        messages.success(request, f"Breaker closed for {queryset.count()} upstream(s).")

    def get_urls(self) -> list[URLPattern]:
        pages = [
            path(
                "<int:object_id>/sync/",
                self.admin_site.admin_view(self.sync_view),
                name="mcp_app_upstream_sync",
            )
        ]
        return [*pages, *super().get_urls()]

    def sync_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """List the upstream's tools against ours; apply the ticked changes on POST."""
        if not (
            request.user.has_perm("mcp_app.add_tool")
            and request.user.has_perm("mcp_app.change_tool")
        ):
            raise PermissionDenied(
                "Syncing an upstream needs the permissions “Can add tool” (mcp_app.add_tool)"
                " and “Can change tool” (mcp_app.change_tool)."
            )
        upstream = get_object_or_404(Upstream, pk=object_id)
        error = ""
        try:
            # A per-user upstream is listed with the operator's own connection.
            offer = async_to_sync(_list_offer)(upstream.name, f"user:{request.user.pk}")
        except ToolError as exc:
            offer, error = UpstreamOffer(), exc.message
        # Resources and prompts are imported only by whoever may add and change them.
        items = {
            kind: request.user.has_perm(f"mcp_app.add_{kind}")
            and request.user.has_perm(f"mcp_app.change_{kind}")
            for kind in ("resource", "resourcetemplate", "prompt")
        }
        if request.method == "POST" and not error:
            ticked = {key: frozenset(request.POST.getlist(key)) for key in request.POST}

            def chosen(key: str, kind: str | None = None) -> frozenset[str]:
                # Resources and prompts only for whoever may add and change them.
                return ticked.get(key, frozenset()) if kind is None or items[kind] else frozenset()

            choice = SyncChoice(
                add=chosen("add"),
                update=chosen("update"),
                remove=chosen("remove"),
                add_resources=chosen("add_resource", "resource"),
                update_resources=chosen("update_resource", "resource"),
                remove_resources=chosen("remove_resource", "resource"),
                add_templates=chosen("add_template", "resourcetemplate"),
                update_templates=chosen("update_template", "resourcetemplate"),
                remove_templates=chosen("remove_template", "resourcetemplate"),
                add_prompts=chosen("add_prompt", "prompt"),
                update_prompts=chosen("update_prompt", "prompt"),
                remove_prompts=chosen("remove_prompt", "prompt"),
            )
            endpoints = list(
                teams.visible(Endpoint.objects.all(), request.user).filter(
                    pk__in=[v for v in ticked.get("endpoint", ()) if v.isdigit()]
                )
            )
            if endpoints and not request.user.has_perm(ENDPOINT_PERMISSION):
                # Publishing changes what the endpoints serve, as the lists' action does.
                messages.error(
                    request,
                    f"Publishing on endpoints needs the permission {ENDPOINT_PERMISSION}. "
                    "Nothing was applied.",
                )
                return HttpResponseRedirect(request.path)
            outcome, items_outcome = upstream_offer_apply(
                upstream,
                offer,
                choice=choice,
                endpoints=endpoints,
                enabled=request.POST.get("enable") == "on",
                actor=request.user,
            )
            for label, done in (
                ("tools", outcome),
                ("resources, templates and prompts", items_outcome),
            ):
                parts = [
                    f"{len(done.created)} created",
                    f"{len(done.updated)} updated",
                    f"{len(done.disabled)} disabled",
                ]
                messages.success(request, f"{upstream.name}, {label}: {', '.join(parts)}.")
                for skipped in done.skipped:
                    messages.warning(request, f"Skipped {skipped}")
            return HttpResponseRedirect(request.path)
        plan = upstream_sync_plan(upstream, offer.tools) if not error else None
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "title": f"What upstream {upstream.name} offers",
            "opts": self.opts,
            "upstream": upstream,
            "error": error,
            "plan": plan,
            "changed_tools": [
                (row, remote, plan.fields[str(remote["name"])]) for row, remote in plan.changed
            ]
            if plan is not None
            else [],
            "resources": upstream_resources_plan(upstream, offer.resources)
            if not error and items["resource"]
            else None,
            "templates": upstream_templates_plan(upstream, offer.resource_templates)
            if not error and items["resourcetemplate"]
            else None,
            "prompts": upstream_prompts_plan(upstream, offer.prompts)
            if not error and items["prompt"]
            else None,
            "tool_opts": Tool._meta,
            "endpoints": teams.visible(Endpoint.objects.order_by("slug"), request.user)
            if request.user.has_perm(ENDPOINT_PERMISSION)
            else None,
        }
        return TemplateResponse(request, "admin/mcp_app/upstream/sync.html", context)


async def _list_offer(name: str, caller: str) -> UpstreamOffer:
    # async_to_sync runs this on a loop of its own: close its upstream client before leaving.
    try:
        return await upstream_list_offer(name, caller=caller)
    finally:
        await close_sessions()
