"""Upstream MCP servers in the admin: settings, health and breaker, and the tool sync page.

The sync page ("Import tools") lists what the upstream offers now against the tools that call
it: new tools, tools whose schema changed, tools the upstream no longer has. The operator ticks
what to apply; ``services.upstreams.upstream_sync_apply`` does it (new tools as disabled drafts).
The list is fetched again on apply, so the server keeps no state between the two steps.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html

from mcp_app.executors.mcp_upstream import close_sessions
from mcp_app.models import Tool, Upstream
from mcp_app.protocol.results import ToolError
from mcp_app.services.upstreams import (
    upstream_list_tools,
    upstream_reset_breaker,
    upstream_sync_apply,
    upstream_sync_plan,
)


@admin.register(Upstream)
class UpstreamAdmin(admin.ModelAdmin):
    list_display = [
        "name", "url", "enabled", "health", "tools_state", "last_success_at", "protocol_version",
    ]  # fmt: skip
    list_filter = ["enabled"]
    search_fields = ["name", "url", "description"]
    readonly_fields = [
        "health", "last_success_at", "last_error_at", "last_error", "protocol_version",
        "consecutive_failures", "circuit_open_until", "sync_link", "tools_state",
        "tools_changed_at", "tools_synced_at", "created_at", "updated_at",
    ]  # fmt: skip
    actions = ["reset_breaker"]
    fieldsets = [
        (None, {"fields": ["name", "description", "url", "credential", "enabled"]}),
        ("Tools", {"fields": ["sync_link", "tools_state", "tools_changed_at", "tools_synced_at"]}),
        ("Limits", {"fields": ["connect_timeout", "call_timeout", "allow_networks"]}),
        ("Circuit breaker", {"fields": ["failure_threshold", "cooldown_seconds"]}),
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
        return format_html('<a class="button" href="{}">Import / re-sync tools</a>', url)

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
            raise PermissionDenied
        upstream = get_object_or_404(Upstream, pk=object_id)
        error = ""
        try:
            remote = async_to_sync(_list_tools)(upstream.name)
        except ToolError as exc:
            remote, error = [], exc.message
        if request.method == "POST" and not error:
            outcome = upstream_sync_apply(
                upstream,
                remote,
                add=set(request.POST.getlist("add")),
                update=set(request.POST.getlist("update")),
                remove=set(request.POST.getlist("remove")),
            )
            parts = [
                f"{len(outcome.created)} created (disabled)",
                f"{len(outcome.updated)} updated",
                f"{len(outcome.disabled)} disabled",
            ]
            messages.success(request, f"{upstream.name}: {', '.join(parts)}.")
            for skipped in outcome.skipped:
                messages.warning(request, f"Skipped {skipped}")
            return HttpResponseRedirect(request.path)
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "title": f"Tools of upstream {upstream.name}",
            "opts": self.opts,
            "upstream": upstream,
            "error": error,
            "plan": upstream_sync_plan(upstream, remote) if not error else None,
            "tool_opts": Tool._meta,
        }
        return TemplateResponse(request, "admin/mcp_app/upstream/sync.html", context)


async def _list_tools(name: str) -> list[dict[str, Any]]:
    # async_to_sync runs this on a loop of its own: close its upstream client before leaving.
    try:
        return await upstream_list_tools(name)
    finally:
        await close_sessions()
