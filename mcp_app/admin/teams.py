"""Teams in the admin: every list, page and choice holds only the rows the user's teams see.

The rule is ``services/teams.py``'s; this module applies it to the admin's querysets
(``TeamScopedAdmin.get_queryset``: another team's row is "not found", as a missing one, on its
change, delete and history pages) and to the choices of its forms (``narrow_choices``: the
team field and ``allowed_groups`` offer the user's teams, related fields the rows they see).
Writes are checked again by the write path. A user who sees more than one team (or every
team) gets a team column and a team list filter on the lists of rows with a team; a member
of one team would see the same value on every row, so they get neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin
from django.core.exceptions import FieldDoesNotExist
from django.db.models import QuerySet
from django.db.models.fields.related import RelatedField
from django.http import HttpRequest

from mcp_app.executors.base import CredentialChoiceField
from mcp_app.models import Credential
from mcp_app.services import teams

if TYPE_CHECKING:
    from django.utils.functional import _StrPromise


def narrow_choices(form: forms.BaseForm, user: Any) -> None:
    """Offer in ``form``'s choice fields only what ``user`` may pick: their teams in
    ``team`` (required, and preset when they are in one team), the rows they see elsewhere."""
    scope = teams.scope_of(user)
    for name, field in form.fields.items():
        if isinstance(field, CredentialChoiceField):
            field.choices = _credential_choices(user)
        if not isinstance(field, forms.ModelChoiceField):
            continue
        if name == "team":
            field.queryset = teams.team_choices(user)
            if scope is not None:
                field.required = True
                if len(scope) == 1:
                    field.empty_label = None  # their one team, chosen
        elif name == "allowed_groups":  # who may call it: the user's teams
            field.queryset = teams.team_choices(user)
        elif field.queryset is not None and teams.is_scoped(field.queryset.model):
            field.queryset = teams.visible(field.queryset, user)


def _credential_choices(user: Any) -> list[tuple[str, str]]:
    credentials = teams.visible(Credential.objects.order_by("name"), user)
    return [("", "---------"), *((row.name, str(row)) for row in credentials)]


class TeamScopedRelatedFilter(admin.RelatedFieldListFilter):
    """A list filter by a related row that offers only the rows the user sees."""

    def field_choices(
        self, field: RelatedField, request: HttpRequest, model_admin: admin.ModelAdmin
    ) -> list[tuple[str, str | _StrPromise]]:
        assert field.related_model is not None  # a relation: get_list_filter says
        rows = teams.visible(field.related_model._default_manager.all(), request.user)
        ordering = self.field_admin_ordering(field, request, model_admin)
        if ordering:
            rows = rows.order_by(*ordering)
        return [(str(row.pk), str(row)) for row in rows]


class TeamListFilter(admin.RelatedFieldListFilter):
    """The list filter by team: the user's teams (and "empty", site-wide rows, for a user
    of every team)."""

    def field_choices(
        self, field: RelatedField, request: HttpRequest, model_admin: admin.ModelAdmin
    ) -> list[tuple[str, str | _StrPromise]]:
        return [(str(group.pk), group.name) for group in teams.team_choices(request.user)]


def _shows_teams(model: type[Any], user: Any) -> bool:
    """Whether ``model``'s lists name each row's team for ``user``: it has one, and the user
    sees rows of more than one team."""
    return teams.has_team(model) and teams.sees_many_teams(user)


class TeamScopedAdmin:
    """A ModelAdmin base: lists, pages, actions, list filters and form choices hold the
    user's teams' rows; lists name the team to a user of several."""

    def get_list_display(self, request: HttpRequest) -> Any:
        columns = list(super().get_list_display(request))  # type: ignore[misc]
        if _shows_teams(self.model, request.user) and "team" not in columns:  # type: ignore[attr-defined]
            columns.insert(1, "team")  # beside the row's name
        return columns

    def get_list_select_related(self, request: HttpRequest) -> Any:
        related = super().get_list_select_related(request)  # type: ignore[misc]
        if not _shows_teams(self.model, request.user) or related is True:  # type: ignore[attr-defined]
            return related
        # Django follows only non-null keys by itself: name the team (and the others shown).
        named = [] if related is False else list(related)
        for name in self.get_list_display(request):
            try:
                field = self.model._meta.get_field(name)  # type: ignore[attr-defined]
            except (FieldDoesNotExist, TypeError):
                continue
            if field.many_to_one and name not in named:
                named.append(name)
        return named

    def get_list_filter(self, request: HttpRequest) -> Any:
        filters: list[Any] = []
        if _shows_teams(self.model, request.user):  # type: ignore[attr-defined]
            filters.append(("team", TeamListFilter))
        for item in super().get_list_filter(request):  # type: ignore[misc]
            if isinstance(item, str):
                try:
                    field = self.model._meta.get_field(item)  # type: ignore[attr-defined]
                except FieldDoesNotExist:
                    field = None
                target = field.related_model if field is not None else None
                if isinstance(target, type) and teams.is_scoped(target):
                    item = (item, TeamScopedRelatedFilter)
            filters.append(item)
        return filters

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset: QuerySet[Any] = super().get_queryset(request)  # type: ignore[misc]
        if teams.is_scoped(queryset.model):
            return teams.visible(queryset, request.user)
        return queryset

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form_class = super().get_form(request, obj, change, **kwargs)  # type: ignore[misc]
        user = request.user

        class TeamScopedForm(form_class):  # type: ignore[misc,valid-type]  # made per request
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                narrow_choices(self, user)

        TeamScopedForm.__name__ = TeamScopedForm.__qualname__ = form_class.__name__
        return TeamScopedForm
