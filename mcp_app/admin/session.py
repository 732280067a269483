"""Session admin: read-only; sessions are opened and closed by MCP clients, not by staff."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from mcp_app.admin.selection import CheckedSelectionAdmin
from mcp_app.admin.teams import TeamScopedAdmin
from mcp_app.models import Session


@admin.register(Session)
class SessionAdmin(TeamScopedAdmin, CheckedSelectionAdmin):
    list_display = [
        "id", "endpoint", "protocol_version", "client_name", "log_level", "created_at",
        "last_seen_at", "closed_at",
    ]  # fmt: skip
    list_filter = ["endpoint", "protocol_version", ("closed_at", admin.EmptyFieldListFilter)]
    list_select_related = ["endpoint"]
    search_fields = ["id"]
    date_hierarchy = "last_seen_at"

    # Rows mirror live protocol state written by services.sessions; an edit or delete here
    # would desynchronise a connected client, so staff only look.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Session | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Session | None = None) -> bool:
        return False
