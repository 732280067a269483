"""Prompt admin: arguments and messages edited inline, in position order; or an upstream's."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest

from mcp_app.admin.access import ACCESS_FIELDSET
from mcp_app.admin.bulk import CatalogItemAdmin
from mcp_app.admin.drafting import DraftableAdmin
from mcp_app.admin.forms import JSON_FORMFIELD
from mcp_app.admin.icons import ICON_FIELDSET, IconAdmin, IconRowForm
from mcp_app.executors.forms import CodeTextarea
from mcp_app.models import Prompt, PromptArgument, PromptMessage
from mcp_app.services import history
from mcp_app.services.catalog_writes import (
    prompt_messages_check,
    prompt_part_delete,
    prompt_part_save,
)


class PromptArgumentInline(admin.TabularInline):
    model = PromptArgument
    extra = 0
    ordering = ["position", "id"]
    fields = ["position", "name", "title", "description", "required", "completion_values"]
    formfield_overrides = {models.TextField: {"widget": CodeTextarea(attrs={"rows": 2})}}


class PromptMessageFormSet(BaseInlineFormSet):
    def clean(self) -> None:
        super().clean()
        deleted = self.deleted_forms if self.can_delete else []
        kept = [
            form
            for form in self.forms
            if (form.has_changed() or form.instance.pk is not None) and form not in deleted
        ]
        try:
            prompt_messages_check(self.instance, kept)
        except ValidationError as exc:
            raise ValidationError(exc.messages) from None


class PromptMessageInline(admin.StackedInline):
    model = PromptMessage
    formset = PromptMessageFormSet
    extra = 0
    ordering = ["position", "id"]
    fields = [("position", "role", "kind"), "text", ("file", "mime_type"), ("uri", "name")]
    formfield_overrides = {models.TextField: {"widget": CodeTextarea(attrs={"rows": 4})}}


@admin.register(Prompt)
class PromptAdmin(DraftableAdmin, IconAdmin, CatalogItemAdmin):
    form = IconRowForm
    list_display = ["name", "title", "enabled", "updated_at"]
    list_filter = ["enabled", "endpoints"]
    search_fields = ["name", "title", "description"]
    filter_horizontal = ["allowed_groups"]
    readonly_fields = ["icon_preview", "created_at", "updated_at"]
    formfield_overrides = {models.JSONField: JSON_FORMFIELD}
    inlines = [PromptArgumentInline, PromptMessageInline]
    fieldsets = [
        (None, {"fields": ["name", "team", "title", "description", "enabled"]}),
        (
            "From an upstream MCP server (instead of the messages below)",
            {"classes": ["collapse"], "fields": ["upstream", "remote_name"]},
        ),
        ACCESS_FIELDSET,
        ICON_FIELDSET,
        ("History", {"fields": ["created_at", "updated_at"]}),
    ]

    def history_form_view(
        self, request: HttpRequest, object_id: str, version_id: str, extra_context: Any = None
    ) -> Any:
        # A revert: the prompt's form is saved as for any version, and its arguments and
        # messages become that version's too, all or nothing.
        request.mcp_revert_to = int(version_id)  # type: ignore[attr-defined]
        with transaction.atomic():
            return super().history_form_view(request, object_id, version_id, extra_context)

    def save_model(self, request: HttpRequest, obj: Prompt, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        version = getattr(request, "mcp_revert_to", None)
        if version is not None and request.method == "POST":
            history.revert_prompt_parts(obj, version)

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        # The arguments and messages, each through the write path.
        parts = formset.save(commit=False)
        for part in formset.deleted_objects:
            prompt_part_delete(part, actor=request.user, source=history.ADMIN)
        for part in parts:
            prompt_part_save(part, actor=request.user, source=history.ADMIN)

    class Media:
        css = {"all": ["mcp_app/admin.css"]}
