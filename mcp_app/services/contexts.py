"""The one factory of a ``RequestContext``: a request on the wire, a worker's run, try-it.

Whatever builds a context gets the same server-side fields from here: the catalog's resource
reader, the keys derived from ``SECRET_KEY`` that make cursors and 2026-07-28 request state
tamper-evident, the page size. The caller names the revision, the tool runner (a worker runs
tools where it is; everyone else uses the catalog's runner) and whatever its request carries
(the transport: the session, the stream's senders, the principal, the task store).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from typing import Any

from mcp_app.conf import get_conf, get_site
from mcp_app.protocol.catalog import CatalogSnapshot
from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.ports import ToolRunner
from mcp_app.services.resources import CatalogResourceReader
from mcp_app.services.upstreams import UpstreamCompleter, UpstreamPromptSource

_resource_reader = CatalogResourceReader()
_prompt_source = UpstreamPromptSource()
_completer = UpstreamCompleter()


@functools.lru_cache(maxsize=8)
def derived_key(secret_key: str, purpose: str) -> bytes:
    """A key for one purpose (cursors, request state), derived from SECRET_KEY."""
    return hmac.new(
        secret_key.encode(), f"mcphost.protocol.{purpose}".encode(), hashlib.sha256
    ).digest()


def request_context(
    snapshot: CatalogSnapshot, *, version: str, tools: ToolRunner, **fields: Any
) -> RequestContext:
    """A ``RequestContext`` over ``snapshot`` for ``version``; ``fields`` set the rest.

    ``server_info`` defaults to none (a worker answers no ``initialize``).
    """
    secret_key = get_site().SECRET_KEY
    defaults: dict[str, Any] = {
        "server_info": {},
        "cursor_secret": derived_key(secret_key, "cursor"),
        "state_secret": derived_key(secret_key, "request-state"),
        "page_size": get_conf().MCP_PAGE_SIZE,
    }
    return RequestContext(
        version=version,
        catalog=snapshot,
        tools=tools,
        resources=_resource_reader,
        prompts=_prompt_source,
        completions=_completer,
        **{**defaults, **fields},
    )
