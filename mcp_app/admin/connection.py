"""Users' connections to per-user OAuth upstreams in the admin, and the upstream's own OAuth
client secret field.

An operator sees who is connected where (never a token: the encrypted fields are not
displayed, searched or exported) and revokes a connection by deleting it or with the
action; both go through ``services.connections.connection_revoke``, which tells the
upstream's authorization server first. Connections are made by their users only: nothing
here adds or edits one.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from mcp_app.admin.selection import CheckedSelectionAdmin
from mcp_app.models import Upstream, UpstreamConnection
from mcp_app.services.connections import connection_revoke
from mcp_app.services.credentials import encrypt_secret


class UpstreamForm(forms.ModelForm):
    """Edits an upstream; its OAuth client secret is write-only (empty keeps the stored one)."""

    oauth_client_secret = forms.CharField(
        label="OAuth client secret",
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=(
            "Per-user OAuth with a configured client id: its secret, if the client has one. "
            "Stored encrypted and never shown again; leave empty to keep the stored one."
        ),
    )

    class Meta:
        model = Upstream
        # The admin replaces these with its fieldsets' fields.
        fields = ["auth_mode", "oauth_client_id", "oauth_scopes", "forward_headers"]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        secret = (data or {}).get("oauth_client_secret", "")
        if secret:
            self.instance.oauth_client_secret_encrypted = encrypt_secret(secret)
        return data or {}


# What an operator sees of a connection: never a token or the client secret.
_SHOWN: list[str] = [
    "user", "upstream", "scopes", "expires_at", "refreshed_at", "issuer", "resource",
    "client_id", "created_at", "updated_at",
]  # fmt: skip


@admin.register(UpstreamConnection)
class UpstreamConnectionAdmin(CheckedSelectionAdmin):
    list_display = ["user", "upstream", "scopes", "expires_at", "refreshed_at", "created_at"]
    list_filter = ["upstream"]
    list_select_related = ["user", "upstream"]
    # Names only: searching must never match on (or reveal) anything secret.
    search_fields = ["user__username", "upstream__name"]
    fields = [*_SHOWN]
    readonly_fields = [*_SHOWN]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A connection is a user's own authorization: only that user makes one.
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        # Deleting is revoking: the action below does it, never the bulk delete.
        actions.pop("delete_selected", None)
        return actions

    @admin.action(description="Revoke the selected connections", permissions=["delete"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[UpstreamConnection]) -> None:
        count = 0
        for connection in queryset:
            connection_revoke(connection)
            count += 1
        messages.success(request, f"{count} connection(s) revoked.")

    def delete_model(self, request: HttpRequest, obj: UpstreamConnection) -> None:
        connection_revoke(obj)
