"""Catalog history: where a change came from, diffs of two versions, and the site-wide list.

django-simple-history writes one history row per save or delete of every tracked model
(Endpoint, Tool, Resource, ResourceTemplate, Prompt with its arguments and messages,
Credential without its secret; the access rules travel with their row, groups included).
This module adds what the library does not know: *from where* a change came. Interfaces wrap
their writes in ``catalog_change_source("admin")`` (or "api", "import", "upstream sync"), and
every history row written inside is stamped with it in ``history_change_reason``.

Reverting is not here on purpose: a revert is an ordinary edit through the admin form (same
validation, same signals, so the same catalog invalidation and list_changed).
"""

from __future__ import annotations

import contextlib
import difflib
import json
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import models
from django.db.models import Max, Q
from django.utils import timezone

from mcp_app.models import (
    Credential,
    Endpoint,
    Prompt,
    PromptArgument,
    PromptMessage,
    Resource,
    ResourceTemplate,
    Tool,
)

# Where a change came from (stored in history_change_reason, at most 100 characters).
ADMIN = "admin"
API = "api"
IMPORT = "import"
UPSTREAM_SYNC = "upstream sync"

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
)

# Columns a diff never shows: bookkeeping that moves on every save.
_UNSHOWN = frozenset({"updated_at", "created_at"})

_source: ContextVar[str] = ContextVar("mcp_catalog_change_source", default="")


@contextlib.contextmanager
def catalog_change_source(source: str) -> Iterator[None]:
    """Stamp every history row written inside the block with ``source`` (innermost wins)."""
    token = _source.set(source[:100])
    try:
        yield
    finally:
        _source.reset(token)


def current_change_source() -> str:
    return _source.get()


def stamp_history_row(history_instance: Any) -> None:
    """Name the change source on a history row about to be written (an explicit reason stays)."""
    if not history_instance.history_change_reason:
        history_instance.history_change_reason = _source.get() or None


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


def _fields(model: type[models.Model]) -> list[models.Field]:
    history = model.history.model  # type: ignore[attr-defined]
    recorded = {field.attname for field in history._meta.fields}
    return [
        field
        for field in model._meta.concrete_fields
        if field.attname in recorded and field.name not in _UNSHOWN
    ]


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
    return changes


# -- the site-wide list ---------------------------------------------------------------------


@dataclass(frozen=True)
class RecentChange:
    model: type[models.Model]
    record: Any
    when: datetime
    user: Any
    source: str
    kind: str  # "+" created, "~" changed, "-" deleted
    # The object the admin shows this change under (a prompt for its arguments and messages).
    owner_model: type[models.Model]
    owner_id: int


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
                )
            )
    found.sort(key=lambda change: change.when, reverse=True)
    return found[:limit]


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


def history_record(model: type[models.Model], history_id: int) -> Any:
    """One history row of ``model`` by its history id (``DoesNotExist`` if there is none)."""
    return model.history.model.objects.get(history_id=history_id)  # type: ignore[attr-defined]


def field_values(record: Any) -> Mapping[str, str]:
    """A history row's recorded values, as shown on its version page."""
    values = {
        str(f.verbose_name): _shown(getattr(record, f.attname))
        for f in _fields(record.instance_type)
    }
    if "allowed_groups" in {f.name for f in record.instance_type._meta.many_to_many}:
        values["allowed groups"] = _groups(record)
    return values
