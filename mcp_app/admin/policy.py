"""Policy admin: an endpoint's policies around calls, saved through the write path.

Edited on its own page; the endpoint's page lists its policies in order (``policy_list``).
The kind is chosen from the configured kinds (``MCP_POLICY_KINDS``); the form shows the
write path's errors (``services.policies.writes.policy_check``) beside the fields they name,
and saves and deletes with ``policy_save`` and ``policy_delete``.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from mcp_app.admin.history import CatalogHistoryAdmin
from mcp_app.models import Endpoint, Policy
from mcp_app.services import history
from mcp_app.services.policies import policy_kind_choices
from mcp_app.services.policies.writes import policy_check, policy_delete, policy_save


class PolicyForm(forms.ModelForm):
    kind = forms.ChoiceField(choices=policy_kind_choices)

    class Meta:
        model = Policy
        fields = ["endpoint", "name", "kind", "mode", "position", "target", "config"]

    def _post_clean(self) -> None:
        super()._post_clean()  # type: ignore[misc]  # ModelForm's private hook
        if self.errors:
            return  # the model's own checks already said what is wrong
        try:
            policy_check(self.instance)
        except ValidationError as exc:
            for name, messages in exc.message_dict.items():
                field = name if name in self.fields else None
                for message in messages:
                    self.add_error(field, message)


def policy_list(endpoint: Endpoint | None) -> str:
    """An endpoint's policies in order, each linked to its own page (where it is edited)."""
    if endpoint is None or endpoint.pk is None:
        return "—"
    rows = endpoint.policies.order_by("position", "id")
    items = format_html_join(
        "",
        '<li><a href="{}">{}</a> <span class="muted">{} · {}{}</span></li>',
        (
            (
                reverse("admin:mcp_app_policy_change", args=[policy.pk]),
                policy.name,
                policy.kind,
                policy.mode,
                f" · only {policy.target}" if policy.target else "",
            )
            for policy in rows
        ),
    )
    add = reverse("admin:mcp_app_policy_add") + f"?endpoint={endpoint.pk}"
    return format_html('<ol class="policies">{}</ol><a href="{}">Add a policy</a>', items, add)


@admin.register(Policy)
class PolicyAdmin(CatalogHistoryAdmin):
    form = PolicyForm
    list_display = ["name", "endpoint", "position", "kind", "mode", "target", "updated_at"]
    list_filter = ["mode", "kind", "endpoint"]
    list_select_related = ["endpoint"]
    search_fields = ["name", "target", "endpoint__slug"]
    ordering = ["endpoint__slug", "position", "id"]
    readonly_fields = ["created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["endpoint", "name", "kind", "mode", "position", "target"]}),
        ("Config", {"fields": ["config"]}),
        ("History", {"fields": ["created_at", "updated_at"]}),
    ]

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        policy_save(obj, actor=request.user, source=history.ADMIN)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        policy_delete(obj, actor=request.user, source=history.ADMIN)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        with transaction.atomic():
            for policy in queryset:
                policy_delete(policy, actor=request.user, source=history.ADMIN)
