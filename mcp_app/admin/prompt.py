"""Prompt admin: arguments and messages edited inline, in position order."""

from __future__ import annotations

from django.contrib import admin
from django.db import models

from mcp_app.admin.access import ACCESS_FIELDSET
from mcp_app.admin.forms import JSON_FORMFIELD, CodeTextarea
from mcp_app.admin.history import CatalogHistoryAdmin
from mcp_app.models import Prompt, PromptArgument, PromptMessage


class PromptArgumentInline(admin.TabularInline):
    model = PromptArgument
    extra = 0
    ordering = ["position", "id"]
    fields = ["position", "name", "title", "description", "required", "completion_values"]
    formfield_overrides = {models.TextField: {"widget": CodeTextarea(attrs={"rows": 2})}}


class PromptMessageInline(admin.StackedInline):
    model = PromptMessage
    extra = 0
    ordering = ["position", "id"]
    fields = [("position", "role", "kind"), "text", ("file", "mime_type"), ("uri", "name")]
    formfield_overrides = {models.TextField: {"widget": CodeTextarea(attrs={"rows": 4})}}


@admin.register(Prompt)
class PromptAdmin(CatalogHistoryAdmin):
    list_display = ["name", "title", "enabled", "updated_at"]
    list_filter = ["enabled", "endpoints"]
    search_fields = ["name", "title", "description"]
    filter_horizontal = ["allowed_groups"]
    readonly_fields = ["created_at", "updated_at"]
    formfield_overrides = {models.JSONField: JSON_FORMFIELD}
    inlines = [PromptArgumentInline, PromptMessageInline]
    fieldsets = [
        (None, {"fields": ["name", "title", "description", "enabled"]}),
        ACCESS_FIELDSET,
        ("Advanced", {"classes": ["collapse"], "fields": ["icons"]}),
        ("History", {"fields": ["created_at", "updated_at"]}),
    ]

    class Media:
        css = {"all": ["mcp_app/admin.css"]}
