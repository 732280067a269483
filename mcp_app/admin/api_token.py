"""API token admin: an admin creates a token for a user and sees the key once, on saving,
with a button that copies it (static/mcp_app/copy.js) and in an element a click selects
whole (admin_lists.css)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.forms import ModelForm
from django.http import HttpRequest
from django.utils.html import format_html

from mcp_app.admin.selection import CheckedSelectionAdmin
from mcp_app.models import ApiToken
from mcp_app.services.api_tokens import api_token_issue


@admin.register(ApiToken)
class ApiTokenAdmin(CheckedSelectionAdmin):
    list_display = ["name", "user", "prefix", "created_at", "expires_at", "last_used_at"]
    list_select_related = ["user"]
    list_filter = ["expires_at"]
    search_fields = ["name", "user__username", "prefix"]
    autocomplete_fields = ["user"]
    readonly_fields = ["prefix", "created_at", "last_used_at"]
    fields = ["user", "name", "expires_at", "prefix", "created_at", "last_used_at"]

    class Media:
        js = ["mcp_app/copy.js"]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> Any:
        # A token keeps its user: a new one is issued for another user.
        return [*self.readonly_fields, "user"] if obj is not None else self.readonly_fields

    def save_model(
        self, request: HttpRequest, obj: ApiToken, form: ModelForm, change: bool
    ) -> None:
        key = None if change else api_token_issue(token=obj)
        super().save_model(request, obj, form, change)
        if key is not None:
            messages.warning(
                request,
                format_html(
                    'The token is <code class="mcp-token" id="new-api-token">{}</code> '
                    '<button type="button" class="copy" data-copy-target="new-api-token">'
                    "Copy</button> - copy it now: it is stored hashed and never shown again.",
                    key,
                ),
            )
