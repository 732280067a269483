"""Call log admin: read-only. The audit UI (/audit/) is the place to search and chart it."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from mcp_app.admin.teams import TeamScopedAdmin
from mcp_app.models import CallLog

PAYLOAD_PERMISSION = "mcp_app.view_call_payloads"
PAYLOADS = ("arguments", "result")


@admin.register(CallLog)
class CallLogAdmin(TeamScopedAdmin, admin.ModelAdmin):
    list_display = [
        "id", "created_at", "endpoint_slug", "client_name", "rpc_method", "target", "status",
        "http_status", "duration_ms",
    ]  # fmt: skip
    list_filter = ["status", "era", "http_method"]
    list_select_related = ["endpoint"]
    search_fields = ["=id", "=session_id", "=rpc_id", "target"]
    ordering = ["-id"]
    # COUNT(*) over millions of rows on every page view is the slow part of a changelist.
    show_full_result_count = False
    readonly_fields = [field.name for field in CallLog._meta.fields]

    # As /audit/: recorded arguments and results need their own permission.
    def get_exclude(self, request: HttpRequest, obj: CallLog | None = None) -> tuple[str, ...]:
        return () if request.user.has_perm(PAYLOAD_PERMISSION) else PAYLOADS

    def get_readonly_fields(self, request: HttpRequest, obj: CallLog | None = None) -> list[str]:
        hidden = self.get_exclude(request, obj)
        return [name for name in self.readonly_fields if name not in hidden]

    # A call log is evidence: a record that an operator could edit or delete proves nothing,
    # so the admin can neither add, change nor delete one (retention is purge_call_logs).
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: CallLog | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: CallLog | None = None) -> bool:
        return False
