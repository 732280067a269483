"""Background call admin: watch calls and tasks run on workers, and cancel them.

Read-only like the sessions: rows are protocol state written by ``services.background``; the
one thing staff may do is cancel, which goes through the same service as a client's cancel.

The row keeps a call's arguments and result whole, for its worker; staff see them only with
the call log's payload permission, and then as the tool's capture policy keeps them (as its
call-log row does). Answers to its questions and the worker's continuation are never shown.
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from mcp_app.admin.selection import CheckedSelectionAdmin
from mcp_app.admin.teams import TeamScopedAdmin
from mcp_app.models import BackgroundCall
from mcp_app.services.background.calls import acancel_call
from mcp_app.services.calllog.capture import as_captured

PAYLOAD_PERMISSION = "mcp_app.view_call_payloads"
PAYLOADS = ("captured_arguments", "captured_result")


@admin.register(BackgroundCall)
class BackgroundCallAdmin(TeamScopedAdmin, CheckedSelectionAdmin):
    list_display = [
        "id", "tool_name", "endpoint", "status", "outcome", "is_task", "worker", "created_at",
        "finished_at",
    ]  # fmt: skip
    list_filter = ["status", "outcome", "is_task", "endpoint"]
    list_select_related = ["endpoint"]
    search_fields = ["id", "tool_name", "principal", "session_id"]
    date_hierarchy = "created_at"
    actions = ["cancel_calls"]
    exclude = ["arguments", "result", "input_responses", "continuation"]
    readonly_fields = PAYLOADS

    def get_queryset(self, request: HttpRequest) -> QuerySet[BackgroundCall]:
        return super().get_queryset(request).select_related("tool")

    def get_readonly_fields(
        self, request: HttpRequest, obj: BackgroundCall | None = None
    ) -> tuple[str, ...]:
        return PAYLOADS if request.user.has_perm(PAYLOAD_PERMISSION) else ()

    @admin.display(description="arguments")
    def captured_arguments(self, call: BackgroundCall) -> SafeString:
        return _json(as_captured(call.tool, call.arguments, call.result)[0])

    @admin.display(description="result")
    def captured_result(self, call: BackgroundCall) -> SafeString:
        return _json(as_captured(call.tool, call.arguments, call.result)[1])

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


def _json(value: Any) -> SafeString:
    if value is None:
        return format_html("<p>{}</p>", "Not kept (the tool's capture policy).")
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False))
