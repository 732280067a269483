"""Catalog history: where a change came from, diffs of two versions, and the site-wide list.

django-simple-history writes one history row per save or delete of every tracked model
(Endpoint, Tool, Resource, ResourceTemplate, Prompt with its arguments and messages,
Credential without its secret, Upstream without its health; the access rules travel with
their row, groups included).
What an endpoint publishes is recorded here instead, as attach/detach deltas
(``MembershipChange``, see its module for why). This module also adds what the library does
not know: *from where* a change came. Interfaces wrap their writes in
``catalog_change_source("admin")`` (or "api", "import", "upstream sync", "openapi import"),
and every history row (and membership change) written inside is stamped with it; the catalog
write path (``services/catalog_writes.py``) names the acting user too (``catalog_change``).

In the admin a revert is an ordinary edit through the admin form (same validation, same
signals, so the same catalog invalidation and list_changed); the API's is
``services.row_writes.row_revert``, which takes the version's values (``version_apply``
below) and saves them through the write path, so the same checks run. Both refuse a version
naming a row that no longer exists (``version_check``).
"""

from __future__ import annotations

import contextlib
import difflib
import json
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser, Group
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Max, Q
from django.utils import timezone
from simple_history.models import HistoricalRecords

from mcp_app.models import (
    Credential,
    Endpoint,
    MembershipChange,
    Prompt,
    PromptArgument,
    PromptMessage,
    Resource,
    ResourceTemplate,
    Tool,
    Upstream,
)

# Where a change came from (stored in history_change_reason, at most 100 characters).
ADMIN = "admin"
API = "api"
IMPORT = "import"
UPSTREAM_SYNC = "upstream sync"
OPENAPI = "openapi import"
# A draft's publish: "draft #12 approved by bob" (services/drafts.py).
DRAFT = "draft"
# How the history pages name each source ("by admin via the admin").
SOURCE_NAMES = {
    ADMIN: "the admin",
    API: "the API",
    IMPORT: "a catalog import",
    UPSTREAM_SYNC: "an upstream sync",
    OPENAPI: "an OpenAPI import",
    DRAFT: "a draft",
}

# The models whose changes are recorded, in the order the recent-changes page names them.
TRACKED: tuple[type[models.Model], ...] = (
    Endpoint,
    Tool,
    Resource,
    ResourceTemplate,
    Prompt,
    PromptArgument,
    PromptMessage,
    Credential,
    Upstream,
)

# Columns a diff never shows: bookkeeping that moves on every save.
_UNSHOWN = frozenset({"updated_at", "created_at"})

_source: ContextVar[str] = ContextVar("mcp_catalog_change_source", default="")
# Who acts, when the write path was told (``catalog_change``); else the request's user.
_actor: ContextVar[AbstractBaseUser | None] = ContextVar("mcp_catalog_actor", default=None)


@contextlib.contextmanager
def catalog_change_source(source: str) -> Iterator[None]:
    """Stamp every history row written inside the block with ``source`` (innermost wins)."""
    token = _source.set(source[:100])
    try:
        yield
    finally:
        _source.reset(token)


@contextlib.contextmanager
def catalog_change(
    *, source: str | None, actor: AbstractBaseUser | AnonymousUser | None
) -> Iterator[None]:
    """Stamp every history row (and membership change) written inside the block with
    ``source`` (None: the surrounding one) and, when ``actor`` is a signed-in user, with
    ``actor`` as who made it (else the request's user, as simple-history finds it)."""
    token = _actor.set(actor if actor is not None and actor.is_authenticated else _actor.get())
    try:
        with catalog_change_source(_source.get() if source is None else source):
            yield
    finally:
        _actor.reset(token)


def current_change_source() -> str:
    return _source.get()


def stamp_history_row(history_instance: Any) -> None:
    """Name the change source (an explicit reason stays) and the acting user, when the write
    path was told one, on a history row about to be written."""
    if not history_instance.history_change_reason:
        history_instance.history_change_reason = _source.get() or None
    if (actor := _actor.get()) is not None:
        history_instance.history_user = actor


def latest_history_ids(model: type[models.Model], pks: Sequence[int]) -> dict[int, int]:
    """The newest history id of each row in ``pks`` (one query; rows never recorded are absent)."""
    if not pks:
        return {}
    history = model.history.model  # type: ignore[attr-defined]
    return dict(
        history.objects.filter(id__in=pks)
        .values("id")
        .annotate(latest=Max("history_id"))
        .values_list("id", "latest")
    )


# -- endpoint membership --------------------------------------------------------------------


@dataclass(frozen=True)
class _Membership:
    kind: str  # MembershipChange.Kind
    model: type[models.Model]
    column: str  # the item's column in the through table
    name_field: str  # what names the item to a reader
    form_field: str  # the endpoint's field (and admin form field) holding these rows


_MEMBERSHIPS: dict[type[models.Model], _Membership] = {
    Endpoint.tools.through:
        _Membership("tool", Tool, "tool_id", "name", "tools"),
    Endpoint.resources.through:
        _Membership("resource", Resource, "resource_id", "uri", "resources"),
    Endpoint.resource_templates.through: _Membership(
        "resource_template", ResourceTemplate, "resourcetemplate_id", "uri_template",
        "resource_templates",
    ),
    Endpoint.prompts.through:
        _Membership("prompt", Prompt, "prompt_id", "name", "prompts"),
}  # fmt: skip
_THROUGH = {membership.model: through for through, membership in _MEMBERSHIPS.items()}

# (endpoint id, item id) pairs of one through table.
Pairs = list[tuple[int, int]]


def membership_pairs(
    through: type[models.Model], instance: models.Model, reverse: bool, pk_set: set[int] | None
) -> Pairs:
    """The (endpoint, item) pairs that exist now among those an m2m call names (one query).

    ``instance``, ``reverse`` and ``pk_set`` are those of ``m2m_changed``; ``pk_set`` None
    means all of them (``clear()``).
    """
    column = _MEMBERSHIPS[through].column
    rows = through._default_manager.filter(**{column if reverse else "endpoint_id": instance.pk})
    if pk_set is not None:
        rows = rows.filter(**{f"{'endpoint_id' if reverse else column}__in": pk_set})
    return list(rows.values_list("endpoint_id", column))


def attached_pairs(instance: models.Model, reverse: bool, pk_set: set[int]) -> Pairs:
    """The pairs an ``add()`` attached (Django's ``pk_set`` holds only the missing ones), in
    id order (a set's order depends on the ids' hashes: the history would vary by run)."""
    if reverse:
        return [(endpoint_id, instance.pk) for endpoint_id in sorted(pk_set)]
    return [(instance.pk, item_id) for item_id in sorted(pk_set)]


def through_of(model: type[models.Model]) -> type[models.Model]:
    """The through table attaching rows of a catalog model to endpoints."""
    return _THROUGH[model]


def acting_user() -> Any:
    """Who acts in the write under way: the user the write path was told, else the signed-in
    user of the request (simple-history's middleware); None: nobody (the shell, a task)."""
    if (actor := _actor.get()) is not None:
        return actor
    # The user simple-history's middleware saw: the same one its history rows name.
    request = getattr(HistoricalRecords.context, "request", None)
    user = getattr(request, "user", None)
    return user if user is not None and user.is_authenticated else None


def record_membership(through: type[models.Model], pairs: Pairs, action: str) -> None:
    """Write one MembershipChange per pair (one query for the names, one insert)."""
    if not pairs:
        return
    membership = _MEMBERSHIPS[through]
    names = dict(
        membership.model._default_manager.filter(
            pk__in={item_id for _, item_id in pairs}
        ).values_list("pk", membership.name_field)
    )
    user, source, now = acting_user(), _source.get(), timezone.now()
    MembershipChange.objects.bulk_create(
        MembershipChange(
            endpoint_id=endpoint_id,
            kind=membership.kind,
            item_id=item_id,
            item_name=names.get(item_id, f"#{item_id}"),
            action=action,
            changed_at=now,
            changed_by=user,
            source=source,
        )
        for endpoint_id, item_id in pairs
    )


@dataclass(frozen=True)
class MembershipDelta:
    """What one kind of row gained and lost between two moments: (item id, name) pairs."""

    kind: str
    added: tuple[tuple[int, str], ...]
    removed: tuple[tuple[int, str], ...]


def membership_delta(
    endpoint_id: int, after: datetime, until: datetime | None = None
) -> dict[str, MembershipDelta]:
    """The net attaches and detaches of ``after < changed_at <= until`` (``until`` None: now).

    An item attached and detached again inside the window is neither; the cost is the
    number of changes in the window, not the size of the endpoint.
    """
    changes = MembershipChange.objects.filter(endpoint_id=endpoint_id, changed_at__gt=after)
    if until is not None:
        changes = changes.filter(changed_at__lte=until)
    first: dict[tuple[str, int], str] = {}
    last: dict[tuple[str, int], tuple[str, str]] = {}
    for kind, item_id, name, action in changes.order_by("changed_at", "id").values_list(
        "kind", "item_id", "item_name", "action"
    ):
        first.setdefault((kind, item_id), action)
        last[(kind, item_id)] = (action, name)
    added: dict[str, list[tuple[int, str]]] = {}
    removed: dict[str, list[tuple[int, str]]] = {}
    for (kind, item_id), (action, name) in last.items():
        if first[(kind, item_id)] != action:
            continue  # attached then detached (or the reverse): no net change
        (added if action == MembershipChange.Action.ADDED else removed).setdefault(kind, []).append(
            (item_id, name)
        )
    return {
        kind: MembershipDelta(
            kind, tuple(sorted(added.get(kind, ()), key=lambda p: p[1])),
            tuple(sorted(removed.get(kind, ()), key=lambda p: p[1])),
        )
        for kind in (*added, *removed)
    }  # fmt: skip


def version_end(record: Any) -> datetime | None:
    """When the state of an object's history version ended: its next version, None if latest.

    An admin save writes the endpoint row first and its membership just after, so a
    version's membership is read as of its next version (or now).
    """
    later: datetime | None = (
        record.instance_type.history.filter(id=record.id, history_date__gt=record.history_date)
        .order_by("history_date")
        .values_list("history_date", flat=True)
        .first()
    )
    return later


def membership_at(endpoint_id: int, when: datetime | None) -> dict[str, list[int]]:
    """The ids of each kind the endpoint published at ``when`` (None: now), by form field.

    The current membership with every later change undone; rows deleted since are left out
    (they cannot be attached again). Changes before membership was recorded (migration
    0013) are not known.
    """
    delta = membership_delta(endpoint_id, when) if when is not None else {}
    members: dict[str, list[int]] = {}
    for through, membership in _MEMBERSHIPS.items():
        current = set(
            through._default_manager.filter(endpoint_id=endpoint_id).values_list(
                membership.column, flat=True
            )
        )
        change = delta.get(membership.kind)
        if change is not None:
            current -= {item_id for item_id, _ in change.added}
            current |= {item_id for item_id, _ in change.removed}
        existing = membership.model._default_manager.filter(pk__in=current)
        members[membership.form_field] = sorted(existing.values_list("pk", flat=True))
    return members


def membership_changes(endpoint_id: int, limit: int = 200) -> list[MembershipChange]:
    """The newest attaches and detaches of one endpoint, newest first."""
    return list(
        MembershipChange.objects.filter(endpoint_id=endpoint_id).select_related("changed_by")[
            :limit
        ]
    )


# -- diffs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldChange:
    field: str
    label: str
    old: str
    new: str
    # Unified diff lines of multi-line values (schemas, templates, texts); empty otherwise.
    lines: tuple[str, ...] = ()


def _shown(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    if isinstance(value, models.Model):
        return str(value)
    return str(value)


def _fields(model: type[models.Model]) -> list[models.Field[Any, Any]]:
    history = model.history.model  # type: ignore[attr-defined]
    recorded = {field.attname for field in history._meta.fields}
    return [
        field
        for field in model._meta.concrete_fields
        if field.attname in recorded and field.name not in _UNSHOWN
    ]


def _related_name(field: models.Field[Any, Any], pk: Any) -> str:
    if pk is None:
        return ""
    row = field.related_model._default_manager.filter(pk=pk).first()  # type: ignore[union-attr]
    return str(row) if row is not None else f"#{pk} (deleted)"


def _groups(record: Any) -> str:
    m2m = getattr(record, "allowed_groups", None)
    if m2m is None:
        return ""
    return ", ".join(sorted(row.group.name for row in m2m.select_related("group")))


def version_diff(older: Any, newer: Any) -> list[FieldChange]:
    """What differs between two history rows of one object, field by field, in model order."""
    model = older.instance_type
    changes = []
    for field in _fields(model):
        old, new = getattr(older, field.attname), getattr(newer, field.attname)
        if old == new:
            continue
        old_text, new_text = _shown(old), _shown(new)
        if field.is_relation:
            # A reference (an upstream's credential) is shown by what names it, not its id.
            old_text, new_text = _related_name(field, old), _related_name(field, new)
        lines: tuple[str, ...] = ()
        if "\n" in old_text or "\n" in new_text:
            lines = tuple(
                difflib.unified_diff(old_text.splitlines(), new_text.splitlines(), lineterm="", n=2)
            )[2:]
        changes.append(FieldChange(field.name, str(field.verbose_name), old_text, new_text, lines))
    if "allowed_groups" in {f.name for f in model._meta.many_to_many}:
        old_groups, new_groups = _groups(older), _groups(newer)
        if old_groups != new_groups:
            changes.append(FieldChange("allowed_groups", "allowed groups", old_groups, new_groups))
    if model is Endpoint:
        changes.extend(_membership_diff(older, newer))
    return changes


def _membership_diff(older: Any, newer: Any) -> list[FieldChange]:
    """What the endpoint published differently at the two versions: only the rows that moved
    (detached ones in the older column, attached ones in the newer)."""
    start = version_end(older)
    if start is None:
        return []  # the "older" one is the latest: both show the current membership
    delta = membership_delta(older.id, start, version_end(newer))
    return [
        FieldChange(
            field=membership.form_field,
            label=membership.form_field.replace("_", " "),
            old=", ".join(name for _, name in change.removed),
            new=", ".join(name for _, name in change.added),
        )
        for membership in _MEMBERSHIPS.values()
        if (change := delta.get(membership.kind)) is not None
    ]


# -- the site-wide list ---------------------------------------------------------------------


@dataclass(frozen=True)
class RecentChange:
    model: type[models.Model]
    record: Any  # a history row, or a MembershipChange
    when: datetime
    user: Any
    source: str
    kind: str  # "+" created or attached, "~" changed, "-" deleted or detached
    # The object the admin shows this change under (a prompt for its arguments and messages,
    # an endpoint for what it publishes).
    owner_model: type[models.Model]
    owner_id: int
    what: str  # e.g. "tool greet", "tool greet on endpoint demo"
    change: str  # e.g. "Changed", "Attached"


def _endpoint_filter(model: type[models.Model], endpoint_id: int) -> Q | None:
    """Which history rows of ``model`` belong to the endpoint (as it stands now)."""
    through = {
        Tool: (Endpoint.tools.through, "tool_id"),
        Resource: (Endpoint.resources.through, "resource_id"),
        ResourceTemplate: (Endpoint.resource_templates.through, "resourcetemplate_id"),
        Prompt: (Endpoint.prompts.through, "prompt_id"),
    }
    if model is Endpoint:
        return Q(id=endpoint_id)
    if model in through:
        table, column = through[model]
        return Q(id__in=table._default_manager.filter(endpoint_id=endpoint_id).values(column))
    if model in (PromptArgument, PromptMessage):
        prompts = Endpoint.prompts.through.objects.filter(endpoint_id=endpoint_id)
        return Q(prompt_id__in=prompts.values("prompt_id"))
    return None  # credentials belong to no endpoint


def recent_changes(
    *, user_id: int | None = None, endpoint_id: int | None = None, limit: int = 100
) -> list[RecentChange]:
    """The newest ``limit`` catalog changes across every tracked model, newest first.

    ``endpoint_id`` keeps changes of the endpoint and of the rows it publishes now (a row
    detached since is not listed under it); credentials belong to no endpoint.
    """
    found: list[RecentChange] = []
    for model in TRACKED:
        history = model.history.model  # type: ignore[attr-defined]
        rows = history.objects.select_related("history_user").order_by("-history_date")
        if user_id is not None:
            rows = rows.filter(history_user_id=user_id)
        if endpoint_id is not None:
            where = _endpoint_filter(model, endpoint_id)
            if where is None:
                continue
            rows = rows.filter(where)
        for record in rows[:limit]:
            owner_model, owner_id = model, record.id
            if model in (PromptArgument, PromptMessage):
                owner_model, owner_id = Prompt, record.prompt_id
            found.append(
                RecentChange(
                    model=model,
                    record=record,
                    when=record.history_date,
                    user=record.history_user,
                    source=record.history_change_reason or "",
                    kind=record.history_type,
                    owner_model=owner_model,
                    owner_id=owner_id,
                    what=f"{model._meta.verbose_name} {record.history_object}",
                    change=record.get_history_type_display(),
                )
            )
    found.extend(_recent_membership(user_id=user_id, endpoint_id=endpoint_id, limit=limit))
    found.sort(key=lambda change: change.when, reverse=True)
    return found[:limit]


def _recent_membership(
    *, user_id: int | None, endpoint_id: int | None, limit: int
) -> list[RecentChange]:
    rows = MembershipChange.objects.select_related("changed_by")
    if user_id is not None:
        rows = rows.filter(changed_by_id=user_id)
    if endpoint_id is not None:
        rows = rows.filter(endpoint_id=endpoint_id)
    rows = rows[:limit]
    slugs = dict(
        Endpoint.objects.filter(pk__in={row.endpoint_id for row in rows}).values_list("pk", "slug")
    )
    return [
        RecentChange(
            model=MembershipChange,
            record=row,
            when=row.changed_at,
            user=row.changed_by,
            source=row.source,
            kind=row.action,
            owner_model=Endpoint,
            owner_id=row.endpoint_id,
            what=f"{row} on endpoint {slugs.get(row.endpoint_id, f'#{row.endpoint_id}')}",
            change=row.get_action_display(),
        )
        for row in rows
    ]


def prompt_part_history(prompt_id: int) -> list[tuple[str, Any]]:
    """("argument" or "message", history row) of a prompt's parts, newest first.

    Arguments and messages have no admin page of their own; their history is shown with
    their prompt's.
    """
    parts: list[tuple[str, Any]] = [
        *(
            ("argument", record)
            for record in PromptArgument.history.filter(prompt_id=prompt_id).select_related(
                "history_user"
            )
        ),
        *(
            ("message", record)
            for record in PromptMessage.history.filter(prompt_id=prompt_id).select_related(
                "history_user"
            )
        ),
    ]
    parts.sort(key=lambda part: part[1].history_date, reverse=True)
    return parts


_ARGUMENT_COPIED = ("position", "name", "title", "description", "required", "completion_values")
_MESSAGE_COPIED = ("position", "role", "kind", "text", "file", "mime_type", "uri", "name")


def revert_prompt_parts(prompt: Prompt, history_id: int) -> None:
    """Give ``prompt`` the arguments and messages it had at its version ``history_id``.

    A version's parts are those after the edit that made it: an admin save writes the prompt
    first and its inline parts just after, so they are read as of the prompt's next version
    (or now, for the latest). The current parts are replaced (their deletion and the new rows
    are recorded like any edit); call it in the transaction that saves the prompt.
    """
    record = Prompt.history.get(id=prompt.pk, history_id=history_id)
    later = (
        Prompt.history.filter(id=prompt.pk, history_date__gt=record.history_date)
        .order_by("history_date")
        .first()
    )
    when = later.history_date if later is not None else timezone.now()
    arguments = list(PromptArgument.history.as_of(when).filter(prompt_id=prompt.pk))
    messages = list(PromptMessage.history.as_of(when).filter(prompt_id=prompt.pk))
    for part in (*prompt.arguments.all(), *prompt.messages.all()):
        part.delete()
    for old in arguments:
        PromptArgument.objects.create(
            prompt=prompt, **{name: getattr(old, name) for name in _ARGUMENT_COPIED}
        )
    for old in messages:
        PromptMessage.objects.create(
            prompt=prompt, **{name: getattr(old, name) for name in _MESSAGE_COPIED}
        )


# -- reverting outside the admin form (the API) ----------------------------------------------


def version_check(record: Any) -> None:
    """Refuse a version that names a row that no longer exists: reverting to it would leave
    the catalog pointing at nothing (a tool calling an upstream that is gone).

    Raises:
        ValidationError: naming the field and the missing row.
    """
    version = record.instance
    missing: dict[str, str] = {}
    if isinstance(version, Tool) and version.kind == Tool.Kind.MCP_UPSTREAM:
        name = version.config.get("upstream") if isinstance(version.config, dict) else None
        if not Upstream.objects.filter(name=name).exists():
            missing["config"] = f"the upstream {name!r} it calls no longer exists"
    for field in type(version)._meta.concrete_fields:
        if not field.is_relation or field.name == "history_user":
            continue
        value = getattr(version, field.attname, None)
        related = field.related_model._default_manager
        if value is not None and not related.filter(pk=value).exists():
            missing[field.name] = f"the {field.name} #{value} it names no longer exists"
    if missing:
        raise ValidationError(
            {
                name: f"Cannot revert to this version: {reason}. Nothing was changed."
                for name, reason in missing.items()
            }
        )


def version_apply(*, row: models.Model, record: Any) -> dict[str, list[int]]:
    """Set ``row``'s field values to those of its version ``record`` (checked first); return
    the ids its many-to-many fields had then, by field name (groups; an endpoint's items).

    Fields the history leaves out (a credential's secret, an upstream's health) keep their
    current values. Nothing is saved: ``services.row_writes.row_revert`` saves through the
    write path, and a prompt's arguments and messages follow (``revert_prompt_parts``).

    Raises:
        ValidationError: the version names a row that is gone.
    """
    model = type(row)
    version_check(record)
    version = record.instance
    for field in _fields(model):
        if field.primary_key or not field.editable:
            continue
        setattr(row, field.attname, getattr(version, field.attname))
    relations: dict[str, list[int]] = {}
    if "allowed_groups" in {field.name for field in model._meta.many_to_many}:
        groups = [part.group_id for part in record.allowed_groups.all()]
        relations["allowed_groups"] = list(
            Group.objects.filter(pk__in=groups).values_list("pk", flat=True)
        )
    if isinstance(row, Endpoint):
        relations.update(membership_at(row.pk, version_end(record)))
    return relations
