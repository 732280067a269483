"""The one factory of a ``RequestContext``: a request on the wire, a worker's run, try-it.

Whatever builds a context gets the same server-side fields from here: the catalog's resource
reader, the keys derived from ``SECRET_KEY`` that make cursors and 2026-07-28 request state
tamper-evident, the page size. The caller names the revision, the tool runner (a worker runs
tools where it is; everyone else uses the catalog's runner) and whatever its request carries
(the transport: the session, the stream's senders, the principal, the task store). The
caller's identity key (``caller_key``), which keys its sessions with upstream MCP servers, is
derived here from the principal and the legacy session, so every path keys them alike.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from typing import Any

from mcp_app.conf import get_conf, get_site
from mcp_app.executors.mcp_upstream import ONE_CALL_PREFIX
from mcp_app.protocol.catalog import CatalogSnapshot
from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.ports import ToolRunner
from mcp_app.services.resources import CatalogResourceReader
from mcp_app.services.upstream_subscriptions import UpstreamResourceWatcher
from mcp_app.services.upstreams import UpstreamCompleter, UpstreamPromptSource

# Shared by contexts of no caller in particular, and by every context of an endpoint that
# serves nothing from an upstream (``CatalogSnapshot.caller_bound``); otherwise a caller's
# context gets its own ports, which read from upstreams in the caller's sessions.
_resource_reader = CatalogResourceReader()
_prompt_source = UpstreamPromptSource()
_completer = UpstreamCompleter()
_watcher = UpstreamResourceWatcher()


@functools.lru_cache(maxsize=8)
def derived_key(secret_key: str, purpose: str) -> bytes:
    """A key for one purpose (cursors, request state), derived from SECRET_KEY."""
    return hmac.new(
        secret_key.encode(), f"mcphost.protocol.{purpose}".encode(), hashlib.sha256
    ).digest()


def caller_key(*, principal: str, session_id: str) -> str:
    """Who a call is for, as upstream sessions are kept: the OAuth user (every client of one
    user shares the user's sessions), else the client's legacy MCP session, else no one
    beyond this call (an anonymous 2026-07-28 caller: a session of its own, for the call).

    ``principal`` is ``Principal.key`` ("user:<id>/client:<id>", "" when anonymous), as the
    transport has it and a background call stores it.
    """
    if principal:
        return principal.split("/", 1)[0]
    if session_id:
        return f"session:{session_id}"
    return ONE_CALL_PREFIX + secrets.token_urlsafe(12)


def request_context(
    snapshot: CatalogSnapshot, *, version: str, tools: ToolRunner, **fields: Any
) -> RequestContext:
    """A ``RequestContext`` over ``snapshot`` for ``version``; ``fields`` set the rest.

    ``server_info`` defaults to none (a worker answers no ``initialize``); ``caller``
    defaults to ``caller_key`` of the principal and the session (a worker names its
    call's stored session with ``caller_session``).
    """
    session = fields.get("session")
    session_id = fields.pop("caller_session", "") or (session.id if session is not None else "")
    fields.setdefault(
        "caller", caller_key(principal=fields.get("principal", ""), session_id=session_id)
    )
    secret_key = get_site().SECRET_KEY
    defaults: dict[str, Any] = {
        "server_info": {},
        "cursor_secret": derived_key(secret_key, "cursor"),
        "state_secret": derived_key(secret_key, "request-state"),
        "page_size": get_conf().MCP_PAGE_SIZE,
    }
    caller = fields["caller"]
    if caller and snapshot.caller_bound:
        headers = fields.get("request_headers")
        return RequestContext(
            version=version,
            catalog=snapshot,
            tools=tools,
            resources=CatalogResourceReader(caller, headers),
            prompts=UpstreamPromptSource(caller, headers),
            completions=UpstreamCompleter(caller, headers),
            watcher=UpstreamResourceWatcher(caller),
            **{**defaults, **fields},
        )
    return RequestContext(
        version=version,
        catalog=snapshot,
        tools=tools,
        resources=_resource_reader,
        prompts=_prompt_source,
        completions=_completer,
        watcher=_watcher,
        **{**defaults, **fields},
    )
