"""ResourceTemplate admin: the resolver is chosen by kind (``executors/resource_kinds``), whose
config fields its resolver supplies; a kind read from an upstream names the upstream MCP server
the matching URIs are read from."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.forms import ModelForm
from django.http import HttpRequest

from mcp_app.admin.access import ACCESS_FIELDSET
from mcp_app.admin.bulk import CatalogItemAdmin
from mcp_app.admin.drafting import DraftableAdmin
from mcp_app.admin.forms import ResourceTemplateForm, template_kind_config_fields
from mcp_app.admin.icons import ICON_FIELDSET, IconAdmin
from mcp_app.models import ResourceTemplate


@admin.register(ResourceTemplate)
class ResourceTemplateAdmin(DraftableAdmin, IconAdmin, CatalogItemAdmin):
    form = ResourceTemplateForm
    list_display = ["uri_template", "name", "kind", "mime_type", "enabled", "updated_at"]
    list_filter = ["kind", "enabled", "upstream", "endpoints"]
    search_fields = ["uri_template", "name", "title", "description"]
    filter_horizontal = ["allowed_groups"]
    readonly_fields = ["icon_preview", "created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["uri_template", "name", "team", "title", "description", "mime_type"]}),
        # The kinds' config fields follow "kind" (get_fieldsets): their resolvers supply them.
        ("Resolver", {"fields": ["kind", "upstream", "remote_uri_template"]}),
        (None, {"fields": ["completions", "enabled"]}),
        ACCESS_FIELDSET,
        ICON_FIELDSET,
        ("History", {"fields": ["created_at", "updated_at"]}),
    ]

    class Media:
        css = {"all": ["mcp_app/admin.css"]}
        js = ["mcp_app/tool_form.js"]

    def get_form(
        self,
        request: HttpRequest,
        obj: ResourceTemplate | None = None,
        change: bool = False,
        **kwargs: Any,
    ) -> type[ModelForm]:
        # The kinds' config fields are added by the form itself: a ModelForm class built from
        # the fieldsets would refuse them as unknown fields of ResourceTemplate.
        fields = kwargs.get("fields", flatten_fieldsets(self.get_fieldsets(request, obj)))
        if fields is not None:
            kind_fields = {
                name for names in template_kind_config_fields().values() for name in names
            }
            kwargs["fields"] = [name for name in fields if name not in kind_fields]
        return super().get_form(request, obj, change, **kwargs)

    def get_fieldsets(self, request: HttpRequest, obj: ResourceTemplate | None = None) -> Any:
        kind_fields = [name for names in template_kind_config_fields().values() for name in names]
        return [
            (
                name,
                {**options, "fields": [options["fields"][0], *kind_fields, *options["fields"][1:]]},
            )
            if name == "Resolver"
            else (name, options)
            for name, options in super().get_fieldsets(request, obj)
        ]
