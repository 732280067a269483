"""Delete protection in the admin: rows that ``services.references`` finds in use are not
deleted, by the delete page or by the "delete selected" action; both list who uses them.

Django's own PROTECT handling shows only foreign keys; tools name credentials and upstreams
inside their config, so the list comes from the same service the API and import ask.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import capfirst

from mcp_app.services.references import Reference, references_to

if TYPE_CHECKING:
    from django.template.response import _TemplateForResponseT


class InUseProtectedAdmin:
    """ModelAdmin mixin: lists the rows that use each row to delete as "protected", so Django
    deletes none of them (put it before the ModelAdmin base)."""

    delete_confirmation_template: ClassVar[_TemplateForResponseT | None] = (
        "admin/mcp_app/delete_in_use.html"
    )
    delete_selected_confirmation_template: ClassVar[_TemplateForResponseT | None] = (
        "admin/mcp_app/delete_selected_in_use.html"
    )

    def get_deleted_objects(
        self, objs: Sequence[Model] | QuerySet[Model], request: HttpRequest
    ) -> tuple[Any, dict[Any, Any], set[Any], list[Any]]:
        found = super().get_deleted_objects(objs, request)  # type: ignore[misc]
        deleted, model_count, perms_needed, protected = found
        in_use = [_describe(row, reference) for row in objs for reference in references_to(row)]
        # The references include every PROTECT foreign key Django would have listed.
        return deleted, model_count, perms_needed, in_use or list(protected)


def _describe(row: Model, reference: Reference) -> SafeString:
    opts = reference.model._meta
    try:
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[reference.pk])
    except NoReverseMatch:
        url = ""
    name = format_html('<a href="{}">{}</a>', url, reference.name) if url else reference.name
    return format_html(
        "{} “{}” uses the {} “{}” ({})",
        capfirst(reference.kind),
        name,
        row._meta.verbose_name,
        row,
        reference.via,
    )
