"""Catalog changes: ``catalog_changed`` is the one writer of ``Endpoint.catalog_version``.

Whatever changes what endpoints publish (admin, API, import, upstream sync, the model
signals) calls it: it bumps the version, invalidates the endpoints' cached states in every
process, and tells their connected clients once the transaction commits.
"""

from __future__ import annotations

from collections.abc import Iterable

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
    Endpoint.objects.filter(pk__in=ids).update(
        catalog_version=F("catalog_version") + 1, updated_at=Now()
    )
    invalidation.invalidate(endpoint_ids=ids)
    notify.list_changed_on_commit(endpoint_ids=ids, kinds=kinds)
    if updated_resource_uri is not None:
        notify.resource_updated_on_commit(endpoint_ids=ids, uri=updated_resource_uri)


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
