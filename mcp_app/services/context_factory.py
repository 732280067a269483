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
import itertools
import os
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from mcp_app.conf import get_conf, get_site
from mcp_app.executors.mcp_upstream import ONE_CALL_PREFIX
from mcp_app.protocol.catalog import CatalogItem, CatalogSnapshot
from mcp_app.protocol.context import LegacySession, RequestContext, Send
from mcp_app.protocol.ports import (
    ClientRequester,
    Completer,
    PromptSource,
    ResourceReader,
    ResourceWatcher,
    SessionStore,
    TaskStore,
    ToolRunner,
)
from mcp_app.protocol.schemas import SchemaCache
from mcp_app.protocol.uritemplate import TemplateCache
from mcp_app.services.resources import CatalogResourceReader
from mcp_app.services.upstream_relay import UpstreamCompleter, UpstreamPromptSource
from mcp_app.services.upstream_subscriptions import UpstreamResourceWatcher

# Shared by contexts of no caller in particular, and by every context of an endpoint that
# serves nothing from an upstream (``CatalogSnapshot.caller_bound``); otherwise a caller's
# context gets its own ports, which read from upstreams in the caller's sessions.
_resource_reader = CatalogResourceReader()
_prompt_source = UpstreamPromptSource()
_completer = UpstreamCompleter()
_watcher = UpstreamResourceWatcher()
# What the protocol derives from the catalogs' definitions, kept for the process (the
# protocol layer keeps no state of its own): every context shares them.
_schemas = SchemaCache()
_templates = TemplateCache()


@functools.lru_cache(maxsize=8)
def derived_key(secret_key: str, purpose: str) -> bytes:
    """A key for one purpose (cursors, request state), derived from SECRET_KEY."""
    return hmac.new(
        secret_key.encode(), f"mcphost.protocol.{purpose}".encode(), hashlib.sha256
    ).digest()


# A one-call caller's key must be unique, not secret (no client ever names it): a random
# prefix per process and a counter, so an anonymous call pays no system call for it
# (``secrets.token_urlsafe`` is one, on every 2026-07-28 call without a token).
_process_prefix = secrets.token_hex(8)
_one_call_counter = itertools.count()


def _new_process_prefix() -> None:
    global _process_prefix, _one_call_counter
    _process_prefix, _one_call_counter = secrets.token_hex(8), itertools.count()


# A forked child (a Celery pool process) must not repeat its parent's keys.
os.register_at_fork(after_in_child=_new_process_prefix)


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
    return f"{ONE_CALL_PREFIX}{_process_prefix}{next(_one_call_counter):x}"


def request_context(
    snapshot: CatalogSnapshot,
    *,
    version: str,
    tools: ToolRunner,
    server_info: Mapping[str, Any] | None = None,
    client_capabilities: Mapping[str, Any] | None = None,
    client_info: Mapping[str, Any] | None = None,
    request_id: Any = None,
    progress_token: str | int | None = None,
    log_level: str | None = None,
    session: LegacySession | None = None,
    sessions: SessionStore | None = None,
    send: Send | None = None,
    client_requests: ClientRequester | None = None,
    principal: str = "",
    caller: str | None = None,
    caller_session: str = "",
    request_headers: Mapping[str, Sequence[str]] | None = None,
    tasks: TaskStore | None = None,
    named_item: CatalogItem | None = None,
    named_variables: Mapping[str, str] | None = None,
) -> RequestContext:
    """A ``RequestContext`` over ``snapshot`` for ``version``, with what the caller's request
    carries (see ``RequestContext`` for each field).

    ``server_info`` defaults to none (a worker answers no ``initialize``); ``caller``
    defaults to ``caller_key`` of the principal and the session (a worker names its
    call's stored session with ``caller_session``).
    """
    if caller is None:
        session_id = caller_session or (session.id if session is not None else "")
        caller = caller_key(principal=principal, session_id=session_id)
    if caller and snapshot.caller_bound:
        resources: ResourceReader = CatalogResourceReader(caller, request_headers)
        prompts: PromptSource = UpstreamPromptSource(caller, request_headers)
        completions: Completer = UpstreamCompleter(caller, request_headers)
        watcher: ResourceWatcher = UpstreamResourceWatcher(caller)
    else:
        resources, prompts, completions, watcher = (
            _resource_reader,
            _prompt_source,
            _completer,
            _watcher,
        )
    secret_key = get_site().SECRET_KEY
    return RequestContext(
        version=version,
        catalog=snapshot,
        tools=tools,
        resources=resources,
        server_info=server_info if server_info is not None else {},
        prompts=prompts,
        completions=completions,
        watcher=watcher,
        client_capabilities=client_capabilities if client_capabilities is not None else {},
        client_info=client_info,
        request_id=request_id,
        progress_token=progress_token,
        log_level=log_level,
        session=session,
        sessions=sessions,
        send=send,
        cursor_secret=derived_key(secret_key, "cursor"),
        page_size=get_conf().MCP_PAGE_SIZE,
        client_requests=client_requests,
        state_secret=derived_key(secret_key, "request-state"),
        principal=principal,
        caller=caller,
        request_headers=request_headers if request_headers is not None else {},
        tasks=tasks,
        schemas=_schemas,
        templates=_templates,
        named_item=named_item,
        named_variables=named_variables,
    )
