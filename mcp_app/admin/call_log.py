"""Call log admin: read-only. The audit UI (/audit/) is the place to search and chart it."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from mcp_app.admin.teams import TeamScopedAdmin
from mcp_app.models import CallLog


@admin.register(CallLog)
class CallLogAdmin(TeamScopedAdmin, admin.ModelAdmin):
    list_display = [
        "id", "created_at", "endpoint_slug", "rpc_method", "target", "status", "http_status",
        "duration_ms",
    ]  # fmt: skip
    list_filter = ["status", "era", "http_method"]
    list_select_related = ["endpoint"]
    search_fields = ["=id", "=session_id", "=rpc_id", "target"]
    ordering = ["-id"]
    # COUNT(*) over millions of rows on every page view is the slow part of a changelist.
    show_full_result_count = False
    readonly_fields = [field.name for field in CallLog._meta.fields]

    # A call log is evidence: a record that an operator could edit or delete proves nothing,
    # so the admin can neither add, change nor delete one (retention is purge_call_logs).
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: CallLog | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: CallLog | None = None) -> bool:
        return False
