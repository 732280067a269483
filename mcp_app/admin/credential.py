"""Credential admin: the secret is write-only; pages show only whether one is set."""

from __future__ import annotations

from django.contrib import admin

from mcp_app.admin.forms import CredentialForm
from mcp_app.admin.protection import InUseProtectedAdmin
from mcp_app.admin.writes import SettingRowAdmin
from mcp_app.models import Credential


@admin.register(Credential)
class CredentialAdmin(InUseProtectedAdmin, SettingRowAdmin):
    form = CredentialForm
    list_display = ["name", "kind", "secret_status", "updated_at"]
    list_filter = ["kind"]
    # The name only: searching must never match on (or reveal) anything secret-related.
    search_fields = ["name"]
    readonly_fields = ["secret_status", "created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["name", "team", "kind", "description"]}),
        ("Secret", {"fields": ["secret_status", "secret"]}),
        (
            "Kind-specific settings",
            {
                "fields": [
                    "header_name",
                    "query_param",
                    "username",
                    "token_url",
                    "client_id",
                    "scopes",
                ]  # fmt: skip
            },
        ),
        ("History", {"fields": ["created_at", "updated_at"]}),
    ]

    @admin.display(description="secret")
    def secret_status(self, credential: Credential) -> str:
        return "•••• set" if credential.has_secret else "not set"
