"""Review: an endpoint that requires it changes only through an approved draft.

``Endpoint.require_review`` on: the endpoint's own settings, its rate limits and policies, and
the rows it publishes (their values, membership, a prompt's parts) are changed by publishing a
draft (``services/drafts.py``) that a second user approved. Every other write a user makes
to them (the admin, the API, a catalog import, a revert, a bulk action) is refused with a
message saying so. The check runs in ``catalog_writes.writing``, the one write path, so no
interface can go around it.

Code acting on its own (no user: an upstream sync mirroring its server, a management command
run by the machine's operator) is not refused: it is not a change someone could have had
reviewed, and the machine's operator could as well edit the database.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator
from contextvars import ContextVar
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import models

from mcp_app.models import (
    Endpoint,
    Policy,
    Prompt,
    PromptArgument,
    PromptMessage,
    RateLimit,
    Resource,
    ResourceTemplate,
    Tool,
)

_publishing: ContextVar[bool] = ContextVar("mcp_publishing_draft", default=False)
# Rows a many-row write checked at once (``rows_checked``): their own writes skip the query.
_checked: ContextVar[frozenset[tuple[type[models.Model], int]]] = ContextVar(
    "mcp_review_checked", default=frozenset()
)

_ITEMS = (Tool, Resource, ResourceTemplate, Prompt)


@contextlib.contextmanager
def publishing_draft() -> Iterator[None]:
    """Writes inside the block publish an approved draft: the review rule lets them pass."""
    token = _publishing.set(True)
    try:
        yield
    finally:
        _publishing.reset(token)


def reviewed_slugs(row: models.Model, endpoint_ids: Collection[int] = ()) -> list[str]:
    """The slugs of the endpoints requiring review that a write of ``row`` (as stored) and a
    change of its membership on ``endpoint_ids`` touch."""
    query = models.Q(pk__in=list(endpoint_ids)) if endpoint_ids else models.Q(pk__in=[])
    if row.pk is not None:
        if isinstance(row, Endpoint):
            query |= models.Q(pk=row.pk)
        elif isinstance(row, _ITEMS):
            query |= models.Q(**{f"{_related(row)}__id": row.pk})
        elif isinstance(row, (RateLimit, Policy)):
            query |= models.Q(pk=row.endpoint_id)
        elif isinstance(row, (PromptArgument, PromptMessage)):
            query |= models.Q(prompts__id=row.prompt_id)
    reviewed = Endpoint.objects.filter(query, require_review=True).distinct()
    return sorted(reviewed.values_list("slug", flat=True))


def check_may_change(row: models.Model, user: Any, endpoint_ids: Collection[int] = ()) -> None:
    """Refuse a change of ``row`` (and of its membership on ``endpoint_ids``) by ``user``
    when it touches an endpoint that requires review and no approved draft is being published.

    Raises:
        ValidationError: naming the endpoints; nothing was written.
    """
    if _publishing.get() or user is None or not getattr(user, "is_authenticated", False):
        return
    if not isinstance(row, (Endpoint, *_ITEMS, RateLimit, Policy, PromptArgument, PromptMessage)):
        return
    if not endpoint_ids and (type(row), row.pk) in _checked.get():
        return
    if slugs := reviewed_slugs(row, endpoint_ids):
        raise ValidationError({NON_FIELD_ERRORS: [review_message(slugs)]})


@contextlib.contextmanager
def rows_checked(rows: Collection[models.Model], user: Any) -> Iterator[None]:
    """Check a write of many items at once (one query), and let their own writes inside the
    block skip the check (a bulk action writes each row through ``writing``).

    Raises:
        ValidationError: as ``check_may_change``, naming every endpoint; nothing was written.
    """
    items = [row for row in rows if isinstance(row, _ITEMS) and row.pk is not None]
    if _publishing.get() or not getattr(user, "is_authenticated", False) or not items:
        yield
        return
    query = models.Q(pk__in=[])
    for model, relation in _RELATED.items():
        if ids := [row.pk for row in items if isinstance(row, model)]:
            query |= models.Q(**{f"{relation}__in": ids})
    reviewed = Endpoint.objects.filter(query, require_review=True).distinct()
    if slugs := sorted(reviewed.values_list("slug", flat=True)):
        raise ValidationError({NON_FIELD_ERRORS: [review_message(slugs)]})
    token = _checked.set(_checked.get() | {(type(row), row.pk) for row in items})
    try:
        yield
    finally:
        _checked.reset(token)


def review_message(slugs: Collection[str]) -> str:
    names = ", ".join(sorted(slugs))
    return (
        f"Endpoint {names} requires review: save this change as a draft and have another "
        "user approve it before it is published."
    )


_RELATED: dict[type[models.Model], str] = {
    Tool: "tools",
    Resource: "resources",
    ResourceTemplate: "resource_templates",
    Prompt: "prompts",
}


def _related(row: models.Model) -> str:
    """The endpoint's many-to-many field publishing ``row``'s kind."""
    return _RELATED[type(row)]
