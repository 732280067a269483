"""Per-item access on OAuth endpoints: who sees a tool, resource or prompt, and who may use it.

Two rules per catalog item (``services.snapshots.Access``): allowed groups decide whether the
item exists for a principal at all (it is left out of the snapshot the request works with, so
lists, calls and reads agree without touching the protocol handlers); a required scope decides
whether the principal may use it now. Scope-gated items stay listed, so a client can discover
them and ask the user for the scope (step-up): using one without the scope is HTTP 403
``insufficient_scope`` before any response body. Public endpoints apply neither rule.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from mcp_app.auth.bearer import Principal
from mcp_app.protocol.catalog import CatalogSnapshot
from mcp_app.protocol.inbound import Resolved
from mcp_app.services.endpoint_directory import EndpointState
from mcp_app.services.snapshots import OPEN, Access

# Filtered snapshots kept per process, by (endpoint, catalog version, groups).
VIEW_CACHE_SIZE = 256


def _access(item: Any) -> Access:
    key = getattr(item, "binding", None)
    return getattr(key, "access", OPEN) or OPEN


def visible(item: Any, groups: frozenset[str]) -> bool:
    allowed = _access(item).groups
    return not allowed or not allowed.isdisjoint(groups)


def _filtered(snapshot: CatalogSnapshot, groups: frozenset[str]) -> CatalogSnapshot:
    tools = tuple(t for t in snapshot.tools if visible(t, groups))
    resources = tuple(r for r in snapshot.resources if visible(r, groups))
    templates = tuple(t for t in snapshot.resource_templates if visible(t, groups))
    prompts = tuple(p for p in snapshot.prompts if visible(p, groups))
    if (len(tools), len(resources), len(templates), len(prompts)) == (
        len(snapshot.tools),
        len(snapshot.resources),
        len(snapshot.resource_templates),
        len(snapshot.prompts),
    ):
        return snapshot
    # Everything else (the endpoint, its version, its policies) as the full snapshot has it.
    return dataclasses.replace(
        snapshot, tools=tools, resources=resources, resource_templates=templates, prompts=prompts
    )


class _ViewCache:
    """Filtered snapshots by (endpoint id, catalog version, groups); bounded, the oldest
    stored dropped first.

    The source snapshot is kept with each entry and compared by identity, so a rebuilt
    snapshot of the same version (another process's cache, a reset) is never mixed up.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[
            tuple[int, int, frozenset[str]], tuple[CatalogSnapshot, CatalogSnapshot]
        ] = OrderedDict()

    def view(self, state: EndpointState, groups: frozenset[str]) -> CatalogSnapshot:
        key = (state.id, state.catalog_version, groups)
        # A hit takes no lock and leaves the order alone (a dict read is atomic): every
        # request of an OAuth endpoint comes here, and a new catalog version is a new key.
        item = self._items.get(key)
        if item is not None and item[0] is state.snapshot:
            return item[1]
        filtered = _filtered(state.snapshot, groups)
        with self._lock:
            self._items[key] = (state.snapshot, filtered)
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return filtered


_views = _ViewCache(VIEW_CACHE_SIZE)


def state_for(state: EndpointState, principal: Principal) -> EndpointState:
    """The endpoint as ``principal`` sees it: group-gated items it may not see left out."""
    if state.auth_mode != "oauth":
        return state
    snapshot = _views.view(state, principal.groups)
    return state if snapshot is state.snapshot else dataclasses.replace(state, snapshot=snapshot)


def missing_scope(state: EndpointState, resolved: Resolved, principal: Principal) -> str | None:
    """The scope a request needs and the principal lacks, or None when it may go ahead.

    ``resolved`` is the request as inbound classification resolved it in ``state.snapshot``.
    """
    params = resolved.request.params
    if state.auth_mode != "oauth" or (type(params) is not dict and not isinstance(params, Mapping)):
        return None
    # The item the request uses, as resolved (unknown items are the handlers' business).
    needed = _access(resolved.item).scope
    if needed and needed not in principal.scopes:
        return needed
    return None
