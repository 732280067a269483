"""Background call admin: watch calls and tasks run on workers, and cancel them.

Read-only like the sessions: rows are protocol state written by ``services.background``; the
one thing staff may do is cancel, which goes through the same service as a client's cancel.
"""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from mcp_app.admin.teams import TeamScopedAdmin
from mcp_app.models import BackgroundCall
from mcp_app.services.background.calls import acancel_call


@admin.register(BackgroundCall)
class BackgroundCallAdmin(TeamScopedAdmin, admin.ModelAdmin):
    list_display = [
        "id", "tool_name", "endpoint", "status", "outcome", "is_task", "worker", "created_at",
        "finished_at",
    ]  # fmt: skip
    list_filter = ["status", "outcome", "is_task", "endpoint"]
    list_select_related = ["endpoint"]
    search_fields = ["id", "tool_name", "principal", "session_id"]
    date_hierarchy = "created_at"
    actions = ["cancel_calls"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: BackgroundCall | None = None
    ) -> bool:
        return False

    def has_delete_permission(
        self, request: HttpRequest, obj: BackgroundCall | None = None
    ) -> bool:
        return False

    @admin.action(description="Cancel the selected calls that are still running")
    def cancel_calls(self, request: HttpRequest, queryset: QuerySet[BackgroundCall]) -> None:
        cancel = async_to_sync(acancel_call)
        cancelled = sum(
            cancel(call_id, "Cancelled by an operator.")
            for call_id in queryset.values_list("id", flat=True)
        )
        messages.info(request, f"Cancelled {cancelled} running call(s).")
