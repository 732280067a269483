"""The rows a changelist action acts on, checked before Django reads them.

Django's ``ModelAdmin.response_action`` filters the list by the posted ``_selected_action``
keys as they come: a key that is no number (``abc``, ``²``) for an integer key, too large for
its column, or holding a NUL fails in the database, as a server error, and a key the list
does not show (a deleted row, a tampered form) is silently dropped while the action runs on
the rest.
``CheckedSelectionAdmin`` refuses both before any action runs: the user is told, and nothing
changes.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

# Digits of the largest key a bigint primary key holds (9223372036854775807).
MAX_KEY_DIGITS = 18


def is_key(model: type[models.Model], value: str) -> bool:
    """Whether a posted key can be the primary key of one of ``model``'s rows."""
    if isinstance(model._meta.pk, models.IntegerField):
        return value.isascii() and value.isdigit() and len(value) <= MAX_KEY_DIGITS
    return "\x00" not in value


class CheckedSelectionAdmin(admin.ModelAdmin):
    """A ModelAdmin that runs an action only when every selected key names a row of the list
    (put it before another ModelAdmin base, such as SimpleHistoryAdmin)."""

    def response_action(
        self, request: HttpRequest, queryset: QuerySet[Any], *args: Any, **kwargs: Any
    ) -> HttpResponse | None:
        selected = set(request.POST.getlist(helpers.ACTION_CHECKBOX_NAME))
        if request.POST.get("select_across") != "1" and (
            not all(is_key(queryset.model, pk) for pk in selected)
            or queryset.filter(pk__in=selected).count() != len(selected)
        ):
            self._stale_selection(request)
            return None  # Django shows the list again, with the message
        return super().response_action(request, queryset, *args, **kwargs)

    def _stale_selection(self, request: HttpRequest) -> None:
        self.message_user(
            request,
            f"Some of the selected {self.opts.verbose_name_plural} do not exist (any more). "
            "Nothing was changed.",
            messages.ERROR,
        )
