"""The handshake (``initialize``, legacy), ``server/discover`` (modern) and ``ping`` (legacy).

``initialize`` is served by the transport, which owns sessions; it calls ``parse_initialize``
and ``initialize_result`` here so the negotiation and capability rules stay in the pure core.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_app.protocol.catalog import CatalogSnapshot
from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.errors import InvalidParams
from mcp_app.protocol.mcp_tasks import TASKS_EXTENSION
from mcp_app.protocol.messages import EmptyParams
from mcp_app.protocol.storable import require_storable
from mcp_app.protocol.versions import (
    MODERN_VERSIONS,
    Feature,
    negotiate_initialize,
    supports,
)

# The Implementation every endpoint presents (its title is the endpoint's); server cards
# (mcp_app/discovery.py) declare the same version, as discovery asks a card to agree with
# what a connected client sees.
SERVER_NAME = "mcphost"
SERVER_VERSION = "0.1.0"

# Catalog edits reach every open legacy GET stream and 2026 listen stream of the endpoint
# (mcp_app.services.notify), and resource edits reach the resource's subscribers.
NOTIFIES_LIST_CHANGES = True
NOTIFIES_RESOURCE_UPDATES = True

# Implementation fields beyond name/version, and the revision that introduced them.
_SERVER_INFO_FIELDS: tuple[tuple[str, Feature | None], ...] = (
    ("name", None),
    ("version", None),
    ("title", Feature.TITLES),
    ("description", Feature.ICONS),
    ("icons", Feature.ICONS),
    ("websiteUrl", Feature.ICONS),
)


def parse_initialize(
    params: Mapping[str, Any] | None,
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Return the negotiated version, client capabilities and client info of ``initialize``.

    Unknown or modern versions are counter-offered, never refused (2025-11-25
    basic/lifecycle, "Version Negotiation").

    Raises:
        InvalidParams: params are not an object, ``protocolVersion`` is not a string,
            ``capabilities``/``clientInfo`` are present but not objects, or hold a string
            the session row cannot store (NUL, unpaired surrogate).
    """
    if params is None:
        raise InvalidParams("initialize needs params")
    requested = params.get("protocolVersion")
    if not isinstance(requested, str):
        raise InvalidParams("params.protocolVersion must be a string")
    capabilities = params.get("capabilities", {})
    if not isinstance(capabilities, dict):
        raise InvalidParams("params.capabilities must be an object")
    client_info = params.get("clientInfo", {})
    if not isinstance(client_info, dict):
        raise InvalidParams("params.clientInfo must be an object")
    # Both are kept on the session row.
    require_storable(capabilities, "params.capabilities")
    require_storable(client_info, "params.clientInfo")
    return negotiate_initialize(requested), capabilities, client_info


def shape_server_info(server_info: Mapping[str, Any], version: str) -> dict[str, Any]:
    """Return the ``Implementation`` object with only the fields ``version`` defines."""
    return {
        key: server_info[key]
        for key, feature in _SERVER_INFO_FIELDS
        if key in server_info and (feature is None or supports(version, feature))
    }


def server_capabilities(version: str) -> dict[str, Any]:
    """Return the server capabilities declared to a client of ``version``.

    ``completions`` is declared from 2025-03-26 (absent from 2024-11-05's schema). Tasks:
    2025-11-25 gets the core ``tasks`` capability (list, cancel, task-augmented
    ``tools/call``); 2026-07-28 gets the ``io.modelcontextprotocol/tasks`` extension instead
    (never a ``tasks`` slot there, ext-tasks "Capability Negotiation").
    """
    capabilities: dict[str, Any] = {
        "tools": {"listChanged": NOTIFIES_LIST_CHANGES},
        "resources": {
            "subscribe": NOTIFIES_RESOURCE_UPDATES,
            "listChanged": NOTIFIES_LIST_CHANGES,
        },
        "prompts": {"listChanged": NOTIFIES_LIST_CHANGES},
        "logging": {},
    }
    if supports(version, Feature.COMPLETIONS_CAPABILITY):
        capabilities["completions"] = {}
    if supports(version, Feature.TASKS_CORE):
        capabilities["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    if supports(version, Feature.TASKS_EXTENSION):
        capabilities["extensions"] = {TASKS_EXTENSION: {}}
    return capabilities


def initialize_result(
    version: str, catalog: CatalogSnapshot, server_info: Mapping[str, Any]
) -> dict[str, Any]:
    """Return the ``InitializeResult`` for a session negotiated at ``version``."""
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": server_capabilities(version),
        "serverInfo": shape_server_info(server_info, version),
    }
    if catalog.endpoint.instructions:
        result["instructions"] = catalog.endpoint.instructions
    return result


async def handle_server_discover(ctx: RequestContext, params: EmptyParams) -> dict[str, Any]:
    """Answer ``server/discover`` (2026-07-28 basic/lifecycle): versions and capabilities.

    Only versions usable with the per-request envelope are listed; handshake versions are
    reached through ``initialize`` (protocol.md §1.4).
    """
    result: dict[str, Any] = {
        "supportedVersions": list(MODERN_VERSIONS),
        "capabilities": server_capabilities(ctx.version),
    }
    if ctx.catalog.endpoint.instructions:
        result["instructions"] = ctx.catalog.endpoint.instructions
    return result


async def handle_ping(ctx: RequestContext, params: EmptyParams) -> dict[str, Any]:
    """Answer ``ping`` with an empty result (legacy basic/utilities/ping)."""
    return {}
