"""The per-process endpoint directory: each endpoint's state, served from memory.

``aget_endpoint_state`` serves the hot path from this process's memory (no query in steady
state: entries are dropped by pushed invalidations and re-checked at most once per
``MCP_CACHE_RECHECK_SECONDS``); a (re)load reads the endpoint row and pairs it with its
snapshot (``services/snapshots.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import DatabaseError
from django.db.models import Exists, OuterRef

from mcp_app.conf import get_conf
from mcp_app.models import Endpoint, RateLimit
from mcp_app.protocol.catalog import CatalogSnapshot
from mcp_app.services import invalidation
from mcp_app.services.limits import Rule, rules_load
from mcp_app.services.process_cache import ProcessCache
from mcp_app.services.snapshots import forget_snapshots, snapshot_of

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EndpointState:
    """What the transport needs about an endpoint on every request."""

    id: int
    slug: str
    enabled: bool
    allowed_origins: tuple[str, ...]
    catalog_version: int
    snapshot: CatalogSnapshot
    # mcp_app.auth: "oauth" or "public", the endpoint's (name, description) scopes and the
    # scope every token needs.
    auth_mode: str = "public"
    scopes: tuple[tuple[str, str], ...] = ()
    base_scope: str = ""
    # Its enabled rate limits (services/limits.py), read with the row: none, no extra query.
    limits: tuple[Rule, ...] = ()


def _load_endpoint_state(slug: str) -> EndpointState | None:
    """Read the endpoint row (one query; a second when it has rate limits) and pair it with
    its snapshot (built if new)."""
    limited = RateLimit.objects.filter(endpoint=OuterRef("pk"), enabled=True)
    endpoint = Endpoint.objects.filter(slug=slug).annotate(limited=Exists(limited)).first()
    if endpoint is None:
        return None
    return EndpointState(
        id=endpoint.pk,
        slug=endpoint.slug,
        enabled=endpoint.enabled,
        allowed_origins=endpoint.origin_list(),
        catalog_version=endpoint.catalog_version,
        snapshot=snapshot_of(endpoint),
        auth_mode=endpoint.auth_mode,
        scopes=endpoint.scope_list(),
        base_scope=endpoint.base_scope,
        limits=rules_load(endpoint.pk) if endpoint.limited else (),
    )


# Endpoint states kept per process; least recently used ones are dropped beyond this.
DIRECTORY_SIZE = 1024
# This process's endpoint states by slug (None: no endpoint has this slug), trusted until an
# invalidation (``services.invalidation``) drops them, and re-read at most once per
# ``MCP_CACHE_RECHECK_SECONDS`` in case a push was missed. Concurrent requests for an endpoint
# that must be (re)loaded wait for the one load rather than being served the previous
# version: a client that refetches after ``list_changed`` must see the catalog that
# notification announced.
_directory: ProcessCache[str, EndpointState | None] = ProcessCache(DIRECTORY_SIZE)


def _directory_load(slug: str) -> EndpointState | None:
    """Read the endpoint now and keep it; on a database error go on with a cached one."""
    epoch = _directory.epoch
    try:
        state = _load_endpoint_state(slug)
    except DatabaseError:
        stale = _directory.held(slug)
        if stale is None:
            raise
        logger.warning("Database unavailable; serving endpoint %r from memory", slug)
        _directory.keep_serving(stale, get_conf().MCP_CACHE_RECHECK_SECONDS)
        return stale.value
    _directory.put(slug, state, epoch)
    return state


def _directory_forget(message: invalidation.Invalidation) -> None:
    """Drop what an invalidation names (and every unknown-slug entry with endpoint news)."""
    if message.everything or not (message.endpoint_ids or message.slugs):
        _directory.forget(everything=message.everything)
        return
    _directory.forget(
        where=lambda slug, state: (
            state is None or slug in message.slugs or state.id in message.endpoint_ids
        )
    )


invalidation.register(_directory_forget)


def clear_snapshot_cache() -> None:
    """Forget every cached endpoint state and snapshot of this process (tests, database resets)."""
    _directory.clear()
    forget_snapshots()


def get_endpoint_state(slug: str) -> EndpointState | None:
    """Return the endpoint's state with its current snapshot, or None for an unknown slug.

    No query while this process holds a fresh entry; otherwise one query, plus a snapshot
    build when the catalog version is new to this process.
    """
    entry = _directory.fresh(slug, get_conf().MCP_CACHE_RECHECK_SECONDS)
    if entry is not None:
        return entry.value
    return _directory_load(slug)


async def aget_endpoint_state(slug: str) -> EndpointState | None:
    """Async twin of ``get_endpoint_state`` for the hot path: no thread hop when cached.

    A (re)load runs on the thread pool, not thread-sensitive (self-contained, so concurrent
    loads of different endpoints do not queue on asgiref's single thread).
    """
    invalidation.ensure_subscribed()
    entry = _directory.fresh(slug, get_conf().MCP_CACHE_RECHECK_SECONDS)
    if entry is not None:
        return entry.value
    return await _directory.aload(slug, _directory_load)
