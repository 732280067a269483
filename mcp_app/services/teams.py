"""Teams: who may see and change which rows. The one place every interface asks.

A team is a Django group. Endpoints, tools, resources, resource templates, prompts,
credentials and upstreams have a ``team``; rate limits and policies belong to their
endpoint's team, a prompt's arguments and messages to their prompt's; call-log rows,
background calls and sessions are seen by their endpoint's team (a try-it run, which has no
endpoint, by its tool's team: ``CallLog.tool_team``). A row without a team is
site-wide.

A user's scope (``scope_of``): None, every team, for a superuser or a holder of
``mcp_app.manage_every_team`` (migration 0032 granted it to every operator from before teams);
else the ids of their groups. A scoped user sees only rows of their teams (site-wide rows
are invisible to them), and may write only those, and only name (attach, reference) rows
they see. The model permissions (view, add, change, delete) still apply on top.

- reads: ``visible(queryset, user)`` narrows any of those querysets; an interface that
  looks a row up through it answers 404 for another team's row, as for a missing one, so
  existence is not revealed.
- writes: ``check_may_write`` and ``check_may_use`` run inside the write path's ``writing``
  (``services/catalog_writes.py``), so no interface can go around them; a new row a scoped
  user creates without a team gets theirs when they have exactly one.

Who may call an endpoint's items (``allowed_groups``, ``models/access.py``) is another use
of groups; a scoped user may name only their own teams there (``team_choices``,
``relations_for``). The MCP path reads no scope.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models

from mcp_app.models import (
    BackgroundCall,
    CallLog,
    Endpoint,
    Policy,
    PromptArgument,
    PromptMessage,
    RateLimit,
    Session,
)

EVERY_TEAM = "mcp_app.manage_every_team"
# Team ids; None: every team (and the site-wide rows).
Scope = frozenset[int] | None

NOT_YOURS = "This row belongs to another team."

_M = TypeVar("_M", bound=models.Model)

# Rows seen through their endpoint's team.
_BY_ENDPOINT: tuple[type[models.Model], ...] = (RateLimit, Policy, CallLog, BackgroundCall, Session)
# Rows seen through their prompt's team.
_BY_PROMPT: tuple[type[models.Model], ...] = (PromptArgument, PromptMessage)


def scope_of(user: Any) -> Scope:
    """The teams ``user`` may see and change: None for every team, else their group ids
    (empty for an anonymous user). ``user`` None is nobody: code acting on its own (the
    shell, a task, a management command), which sees every row. Cached on the user object
    (one query per request)."""
    if user is None:
        return None
    if not getattr(user, "is_authenticated", False):
        return frozenset()
    if hasattr(user, "_mcp_team_scope"):  # set below
        cached: Scope = user._mcp_team_scope
        return cached
    scope: Scope = (
        None
        if user.is_superuser or user.has_perm(EVERY_TEAM)
        else frozenset(user.groups.values_list("id", flat=True))
    )
    user._mcp_team_scope = scope
    return scope


def has_team(model: type[models.Model]) -> bool:
    """Whether ``model``'s rows carry a team of their own."""
    return any(field.name == "team" for field in model._meta.concrete_fields)


def is_scoped(model: type[models.Model]) -> bool:
    """Whether ``visible`` narrows ``model``'s rows (else every user sees them all)."""
    return has_team(model) or issubclass(model, (*_BY_ENDPOINT, *_BY_PROMPT))


def visible(queryset: models.QuerySet[_M], user: Any) -> models.QuerySet[_M]:
    """Narrow ``queryset`` (of any row kind this module names) to the rows ``user`` sees.

    Rows seen through their endpoint are filtered on the endpoint ids (one query, once per
    request), so the call log's indexes that start with the endpoint still serve.
    """
    scope = scope_of(user)
    if scope is None:
        return queryset
    model = queryset.model
    if has_team(model):
        return queryset.filter(team_id__in=scope)
    if issubclass(model, CallLog):
        return queryset.filter(calls_seen(user))
    if issubclass(model, _BY_ENDPOINT):
        return queryset.filter(endpoint_id__in=visible_endpoint_ids(user))
    if issubclass(model, _BY_PROMPT):
        return queryset.filter(prompt__team_id__in=scope)
    raise TypeError(f"{model.__name__} rows have no team")  # a programming error


def visible_endpoint_ids(user: Any) -> list[int]:
    """The ids of the endpoints ``user`` sees (cached on the user object)."""
    if (cached := getattr(user, "_mcp_team_endpoints", None)) is not None:
        ids: list[int] = cached
        return ids
    ids = list(visible(Endpoint.objects.all(), user).values_list("id", flat=True))
    if user is not None:
        user._mcp_team_endpoints = ids
    return ids


def seen_endpoints(user: Any) -> tuple[int, ...] | None:
    """The ids of the endpoints ``user`` sees; None: every endpoint, and what has none (the
    call log's filters carry it: ``audit.selectors.CallFilter.endpoints``)."""
    return None if scope_of(user) is None else tuple(visible_endpoint_ids(user))


def sees_many_teams(user: Any) -> bool:
    """Whether ``user`` sees rows of more than one team (every team counts, and the
    site-wide rows): their lists name each row's team."""
    scope = scope_of(user)
    return scope is None or len(scope) > 1


def calls_seen(user: Any) -> models.Q:
    """The call-log rows ``user`` sees: those of the endpoints they see, and the try-it runs
    (no endpoint) of their teams' tools. Everything for a user of every team."""
    endpoints, team_ids = seen_endpoints(user), seen_teams(user)
    if endpoints is None or team_ids is None:
        return models.Q()
    return calls_of(endpoints, team_ids)


def calls_of(endpoints: Sequence[int], team_ids: Sequence[int]) -> models.Q:
    """The call-log rows of ``endpoints``, and the try-it runs (no endpoint, a ``tool_team``) of
    tools of ``team_ids``."""
    return models.Q(endpoint_id__in=endpoints) | models.Q(
        endpoint_id__isnull=True, tool_team_id__in=team_ids
    )


def seen_teams(user: Any) -> tuple[int, ...] | None:
    """The ids of ``user``'s teams; None: every team (the call log's filters carry it, with
    ``seen_endpoints``, for the try-it runs of their teams' tools)."""
    scope = scope_of(user)
    return None if scope is None else tuple(sorted(scope))


def team_choices(user: Any) -> models.QuerySet[Group]:
    """The groups ``user`` may put a row in (a form's and a serializer's team field)."""
    scope = scope_of(user)
    groups = Group.objects.order_by("name")
    return groups if scope is None else groups.filter(id__in=scope)


def check_may_write(row: models.Model, user: Any) -> None:
    """Check that ``user`` (None: nobody, the shell or a task, who may) may write ``row`` as
    it is now in memory: the stored row and the values it will have are both of their teams,
    and the rows it points at are ones they see. A new row of a model with a team that has
    none gets the user's team when they have exactly one.

    Raises:
        PermissionDenied: the stored row, or what it hangs on, is another team's.
        ValidationError: "team": the row would leave the user's teams, or needs one chosen;
            or by field: it names a row the user does not see.
    """
    scope = scope_of(user)
    if scope is None:
        return
    model = type(row)
    adding = row._state.adding or row.pk is None
    if has_team(model):
        if not adding:
            stored = model._default_manager.filter(pk=row.pk).values_list("team_id", flat=True)
            if stored.first() not in scope:
                raise PermissionDenied(NOT_YOURS)
        team_id = row.team_id  # type: ignore[attr-defined]
        if team_id is None and adding and len(scope) == 1:
            row.team_id = next(iter(scope))  # type: ignore[attr-defined]
        elif team_id is None or team_id not in scope:
            raise ValidationError({"team": "Choose one of your teams."})
    elif issubclass(model, (RateLimit, Policy)):
        if not adding:
            stored = model._default_manager.filter(pk=row.pk).values_list(
                "endpoint__team_id", flat=True
            )
            if stored.first() not in scope:
                raise PermissionDenied(NOT_YOURS)
    elif issubclass(model, _BY_PROMPT):
        check_may_write(row.prompt, user)  # type: ignore[attr-defined]
        return
    _check_pointers(row, scope)


def _check_pointers(row: models.Model, scope: frozenset[int]) -> None:
    """Each foreign key of ``row`` to a row with a team names one of ``scope``'s teams."""
    errors: dict[str, list[str]] = {}
    for field in row._meta.concrete_fields:
        target = field.related_model
        if not field.many_to_one or target is None or not has_team(target):
            continue
        pk = getattr(row, field.attname)
        if pk is None:
            continue
        if not target._default_manager.filter(pk=pk, team_id__in=scope).exists():
            errors[field.name] = [f"Choose a {field.verbose_name} of your teams."]
    if errors:
        raise ValidationError(errors)


def check_may_use(rows: Iterable[models.Model], user: Any) -> None:
    """Check that ``user`` sees every row of ``rows`` (rows being attached or published).

    Raises:
        PermissionDenied: one of them is another team's, or site-wide.
    """
    scope = scope_of(user)
    if scope is None:
        return
    for row in rows:
        if has_team(type(row)) and row.team_id not in scope:  # type: ignore[attr-defined]
            raise PermissionDenied(NOT_YOURS)


def relations_for(
    row: models.Model,
    relations: Mapping[str, Sequence[models.Model]] | None,
    user: Any,
) -> Mapping[str, Sequence[models.Model]] | None:
    """The many-to-many values to set on ``row`` when ``user`` sets ``relations``: each
    related row must be one they see (each of ``allowed_groups`` one of their teams), and
    the rows already related that they do not see stay (a team's edit never drops what a
    superuser attached, nor reveals it).

    Raises:
        PermissionDenied: a row given is another team's.
        ValidationError: ``allowed_groups`` names a group not of the user's teams.
    """
    scope = scope_of(user)
    if scope is None or not relations:
        return relations
    merged: dict[str, Sequence[models.Model]] = {}
    for name, rows in relations.items():
        target = row._meta.get_field(name).related_model
        if target is Group:  # allowed_groups: the user's teams only
            if foreign := sorted(str(group) for group in rows if group.pk not in scope):
                raise ValidationError(
                    {name: f"Choose groups of your teams; not {', '.join(foreign)}."}
                )
            kept = list(getattr(row, name).exclude(id__in=scope)) if row.pk is not None else []
            merged[name] = [*rows, *kept]
            continue
        if target is None or not has_team(target):
            merged[name] = rows
            continue
        check_may_use(rows, user)
        kept = list(getattr(row, name).exclude(team_id__in=scope)) if row.pk is not None else []
        merged[name] = [*rows, *kept]
    return merged
