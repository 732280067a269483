"""Catalog changes: ``catalog_changed`` is the one writer of ``Endpoint.catalog_version``.

Whatever changes what endpoints publish (admin, API, import, upstream sync, the model
signals) calls it: it bumps the version, invalidates the endpoints' cached states in every
process, and tells their connected clients once the transaction commits.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

from django.db.models import F, Q
from django.db.models.functions import Now

from mcp_app.models import Endpoint
from mcp_app.services import invalidation, notify


def catalog_changed(
    *,
    endpoint_ids: Iterable[int],
    kinds: Iterable[notify.CatalogKind] = (),
    updated_resource_uri: str | None = None,
) -> None:
    """Record that what these endpoints publish changed, and tell their connected clients.

    Bumps ``catalog_version`` (one UPDATE) and invalidates the endpoints' cached states in
    every process (``services.invalidation``), so each rebuilds on its next request; once the
    transaction commits, publishes ``list_changed`` for ``kinds`` and ``resources/updated``
    for ``updated_resource_uri`` to the endpoints' streams.
    """
    ids = sorted(set(endpoint_ids))
    if not ids:
        return
    if (pending := _coalesced.get()) is not None:
        pending.endpoint_ids.update(ids)
        pending.kinds.update((endpoint_id, kind) for endpoint_id in ids for kind in kinds)
        if updated_resource_uri is not None:
            pending.resources.update((endpoint_id, updated_resource_uri) for endpoint_id in ids)
        return
    _versions_bump(ids)
    notify.list_changed_on_commit(endpoint_ids=ids, kinds=kinds)
    if updated_resource_uri is not None:
        notify.resource_updated_on_commit(endpoint_ids=ids, uri=updated_resource_uri)


@dataclass
class _Pending:
    endpoint_ids: set[int] = field(default_factory=set)
    kinds: set[tuple[int, notify.CatalogKind]] = field(default_factory=set)
    resources: set[tuple[int, str]] = field(default_factory=set)


_coalesced: ContextVar[_Pending | None] = ContextVar("mcp_catalog_changes", default=None)


@contextlib.contextmanager
def catalog_changes_coalesced() -> Iterator[None]:
    """Inside the block, ``catalog_changed`` only gathers; leaving it without an error does it
    once for everything gathered (one UPDATE of the endpoints' versions).

    For writes of many rows in one transaction that is all or nothing (a catalog import),
    where a version bump per row would cost a statement per row for nothing. Nested blocks
    gather into the outermost.
    """
    if _coalesced.get() is not None:
        yield
        return
    pending = _Pending()
    token = _coalesced.set(pending)
    try:
        yield
    finally:
        _coalesced.reset(token)
    if not pending.endpoint_ids:
        return
    ids = sorted(pending.endpoint_ids)
    _versions_bump(ids)
    by_kinds: dict[frozenset[notify.CatalogKind], list[int]] = {}
    for endpoint_id in ids:
        kinds = frozenset(kind for eid, kind in pending.kinds if eid == endpoint_id)
        by_kinds.setdefault(kinds, []).append(endpoint_id)
    for kinds, group in by_kinds.items():
        notify.list_changed_on_commit(endpoint_ids=group, kinds=kinds)
    for endpoint_id, uri in sorted(pending.resources):
        notify.resource_updated_on_commit(endpoint_ids=[endpoint_id], uri=uri)


def _versions_bump(ids: list[int]) -> None:
    Endpoint.objects.filter(pk__in=ids).update(
        catalog_version=F("catalog_version") + 1, updated_at=Now()
    )
    invalidation.invalidate(endpoint_ids=ids)


def endpoint_ids_for(
    *,
    tool_ids: Iterable[int] = (),
    resource_ids: Iterable[int] = (),
    template_ids: Iterable[int] = (),
    prompt_ids: Iterable[int] = (),
) -> list[int]:
    """Return the ids of the endpoints publishing any of the given rows (one query)."""
    condition = Q()
    for relation, ids in (
        ("tools", tool_ids),
        ("resources", resource_ids),
        ("resource_templates", template_ids),
        ("prompts", prompt_ids),
    ):
        if id_list := list(ids):
            condition |= Q(**{f"{relation}__in": id_list})
    if not condition:
        return []
    return sorted(set(Endpoint.objects.filter(condition).values_list("pk", flat=True)))
