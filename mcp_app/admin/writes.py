"""Catalog admins save and delete through the write path (``services.catalog_writes``,
``services.row_writes``), never on their own.

``CatalogRowAdmin`` hands the form's row and its many-to-many fields to ``catalog_row_save``
(as the signed-in user, from "admin") and deletes with ``row_delete``; ``SettingRowAdmin``
saves upstreams and credentials with ``setting_row_save``. ``CatalogRowForm`` leaves those
fields to it, and turns the write path's errors into the form's. Plain forms check early with
``catalog_row_check`` so its errors appear beside the fields; the save checks again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest

from mcp_app.admin.history import CatalogHistoryAdmin
from mcp_app.executors import get_executors
from mcp_app.services import history
from mcp_app.services.catalog_writes import RELATIONS, catalog_row_check, catalog_row_save
from mcp_app.services.row_writes import row_delete, setting_row_save


class CatalogRowForm(forms.ModelForm):
    """A catalog row's form: checked by the write path, its relations saved by it."""

    def _post_clean(self) -> None:
        super()._post_clean()  # type: ignore[misc]  # ModelForm's private hook
        if self.errors:
            return  # the model's own checks already said what is wrong
        try:
            catalog_row_check(self.instance, relations=form_relations(self))
        except ValidationError as exc:
            self.add_write_errors(exc)

    def add_write_errors(self, exc: ValidationError) -> None:
        """Show the write path's errors on the fields they name, the others above the form."""
        executor = get_executors().get(getattr(self.instance, "kind", ""))
        for name, messages in _by_field(exc).items():
            field: str | None = name
            if name.startswith("config.") and executor is not None:
                field = executor.form_field_of(name.removeprefix("config."))
            if field not in self.fields:
                field = None
            for message in messages:
                self.add_error(field, message if field else _labelled(name, message))

    def _save_m2m(self) -> None:
        pass  # catalog_row_save sets them (CatalogRowAdmin.save_model)


class CatalogRowAdmin(CatalogHistoryAdmin):
    """Saves the row and its relations with ``catalog_row_save``; deletes rows (the delete
    page and "delete selected") with ``row_delete``, one by one."""

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        catalog_row_save(
            obj, relations=form_relations(form), actor=request.user, source=history.ADMIN
        )

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        row_delete(obj, actor=request.user, source=history.ADMIN)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        # Row by row, so each passes the write path (Django's default deletes in bulk); all
        # or nothing.
        with transaction.atomic():
            for row in queryset:
                row_delete(row, actor=request.user, source=history.ADMIN)


class SettingRowAdmin(CatalogRowAdmin):
    """An upstream's or a credential's admin: saves with ``setting_row_save``."""

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        setting_row_save(obj, actor=request.user, source=history.ADMIN)


def form_relations(form: forms.BaseForm) -> dict[str, list[Any]]:
    """The many-to-many values a form sets (those it has fields for)."""
    data: Mapping[str, Any] = getattr(form, "cleaned_data", {})
    return {name: list(data[name]) for name in RELATIONS if name in form.fields and name in data}


def _by_field(exc: ValidationError) -> dict[str, list[str]]:
    if hasattr(exc, "error_dict"):
        return {
            name: list(ValidationError(errors).messages) for name, errors in exc.error_dict.items()
        }
    return {"__all__": list(exc.messages)}


def _labelled(name: str, message: str) -> str:
    return message if name == "__all__" else f"{name}: {message}"
