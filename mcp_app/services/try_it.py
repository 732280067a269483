"""Running one tool from the admin exactly as an MCP client's ``tools/call`` would.

``tool_try`` puts the tool alone into a ``CatalogSnapshot`` (enabled or not: drafts are tried
before they are published), builds a ``RequestContext`` of the newest legacy revision
(``services.context_factory.request_context``, as a worker's run does) and calls
``protocol.dispatch.handle_request``: argument validation, the executor, the mapping and the
output-schema check are the protocol layer's own, not a copy. The call is recorded in the call
log as an admin test call (``services.calllog.recorder.record_admin_test_call``).

For a kind that sends a request (HTTP tools) it also shows the request its executor renders
(``Executor.rendered_request``), without the credential (whose headers or query are added on
the way out and never shown).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from asgiref.sync import async_to_sync

from mcp_app.executors import get_executors
from mcp_app.executors.base import RenderedRequest
from mcp_app.models import Resource, Tool
from mcp_app.protocol import apps
from mcp_app.protocol.catalog import CatalogSnapshot, EndpointInfo
from mcp_app.protocol.dispatch import handle_request
from mcp_app.protocol.errors import McpError
from mcp_app.protocol.versions import LATEST_LEGACY
from mcp_app.services.calllog.capture import REDACTED, is_secret_name
from mcp_app.services.calllog.recorder import TRY_IT_CLIENT_INFO, record_admin_test_call
from mcp_app.services.context_factory import request_context
from mcp_app.services.runner import CatalogToolRunner
from mcp_app.services.snapshots import tool_def

# What the admin presents itself as; it serves no endpoint.
TRY_SERVER_INFO = {"name": "mcphost-admin", "version": "try-it"}
TRY_ENDPOINT_SLUG = "admin-try-it"
BODY_PREVIEW_CHARS = 2000


@dataclass(frozen=True, slots=True)
class TryOutcome:
    """A try-it run: the ``CallToolResult`` or the protocol error, and how long it took."""

    version: str
    duration_ms: float
    result: Mapping[str, Any] | None = None
    error_code: int | None = None
    error_message: str = ""
    request: RenderedRequest | None = field(default=None)

    @property
    def is_error(self) -> bool:
        return self.result is None or bool(self.result.get("isError"))


def tool_try(
    *,
    tool: Tool,
    arguments: Mapping[str, Any],
    user_id: int | None,
    timeout_seconds: float | None = None,
) -> TryOutcome:
    """Call ``tool`` with ``arguments`` through the protocol layer and record the call.

    ``timeout_seconds``: a bound on an inline run tighter than the setting's (a replay's).
    """
    # An unsaved tool (a draft's version) has no allowed groups to read: none apply here,
    # where no client calls.
    groups = frozenset[str]() if tool.pk is None else None
    snapshot = CatalogSnapshot(
        endpoint=EndpointInfo(slug=TRY_ENDPOINT_SLUG, title="Admin try-it"),
        tools=(tool_def(tool, groups),),
    )
    ctx = request_context(
        snapshot,
        version=LATEST_LEGACY,
        tools=CatalogToolRunner(inline_seconds=timeout_seconds),
        server_info=TRY_SERVER_INFO,
        client_info=TRY_IT_CLIENT_INFO,
        request_id=1,
    )
    params = {"name": tool.name, "arguments": dict(arguments)}
    started = time.monotonic()
    try:
        result = async_to_sync(handle_request)(ctx, "tools/call", params)
    except McpError as exc:
        outcome = TryOutcome(
            version=LATEST_LEGACY,
            duration_ms=(time.monotonic() - started) * 1000,
            error_code=exc.code,
            error_message=exc.message,
        )
    else:
        outcome = TryOutcome(
            version=LATEST_LEGACY,
            duration_ms=(time.monotonic() - started) * 1000,
            result=result,
            request=_rendered_request(tool, arguments),
        )
    record_admin_test_call(
        tool=tool,
        arguments=dict(arguments),
        result=outcome.result,
        error_code=outcome.error_code,
        error_message=outcome.error_message,
        duration_ms=outcome.duration_ms,
        version=outcome.version,
        user_id=user_id,
    )
    return outcome


@dataclass(frozen=True, slots=True)
class TryView:
    """A tool's MCP Apps view as the try-it page shows it: its HTML, the CSP and the iframe
    ``allow`` built from its ``_meta.ui``, as a host does."""

    uri: str
    html: str
    csp: str
    allow: str
    ui_meta: Mapping[str, Any]


def tool_view(tool: Tool) -> TryView | None:
    """The view ``tool`` links, or None: no link, or no such view with content of its own
    (one read from an upstream is shown by clients, not here)."""
    if not tool.ui_resource_uri:
        return None
    resource = Resource.objects.filter(uri=tool.ui_resource_uri, upstream__isnull=True).first()
    if resource is None or not resource.is_view:
        return None
    if resource.file:
        with resource.file.open("rb") as handle:
            html = handle.read().decode("utf-8", errors="replace")
    else:
        html = resource.text
    meta = resource.ui_meta or {}
    return TryView(
        uri=resource.uri,
        html=html,
        csp=apps.content_security_policy(meta),
        allow=apps.permission_allow(meta),
        ui_meta=meta,
    )


def _rendered_request(tool: Tool, arguments: Mapping[str, Any]) -> RenderedRequest | None:
    """The request the tool's executor sends (no credential), secret-looking headers masked."""
    executor = get_executors().get(tool.kind)
    rendered = executor.rendered_request(tool.config or {}, arguments) if executor else None
    if rendered is None:
        return None
    body = rendered.body
    if body is not None and len(body) > BODY_PREVIEW_CHARS:
        body = body[:BODY_PREVIEW_CHARS] + "..."
    headers = {
        name: REDACTED if is_secret_name(name) else value
        for name, value in rendered.headers.items()
    }
    return replace(rendered, headers=headers, body=body)
