"""Per-request context handed to handlers, and the narrower one handed to a running tool.

The transport builds a ``RequestContext`` per JSON-RPC request: the negotiated revision, the
endpoint's catalog snapshot, the ports, and ``send``, which writes one JSON-RPC notification on
this request's own response stream (the transport switches that response to SSE on the first
frame). Without ``send`` the request cannot stream and notifications are dropped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp_app.protocol.catalog import CatalogSnapshot
from mcp_app.protocol.ports import ResourceReader, SessionStore, ToolRunner
from mcp_app.protocol.versions import Era, Feature, era_of, supports

Send = Callable[[Mapping[str, Any]], Awaitable[None]]

# RFC 5424 severities in increasing order, as MCP's LoggingLevel names them.
LOG_LEVELS: tuple[str, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)


@dataclass(slots=True)
class LegacySession:
    """The state of one handshake-era session, as loaded for this request."""

    id: str
    protocol_version: str
    client_capabilities: Mapping[str, Any] = field(default_factory=dict)
    client_info: Mapping[str, Any] = field(default_factory=dict)
    log_level: str | None = None
    subscriptions: frozenset[str] = frozenset()


@dataclass(slots=True)
class RequestContext:
    version: str
    catalog: CatalogSnapshot
    tools: ToolRunner
    resources: ResourceReader
    server_info: Mapping[str, Any]
    client_capabilities: Mapping[str, Any] = field(default_factory=dict)
    client_info: Mapping[str, Any] | None = None
    request_id: Any = None
    progress_token: str | int | None = None
    # Minimum level for notifications/message on this request; None means send none.
    log_level: str | None = None
    session: LegacySession | None = None
    sessions: SessionStore | None = None
    send: Send | None = None
    # Key that makes pagination cursors tamper-evident, and the page size of list results.
    cursor_secret: bytes = b""
    page_size: int = 100

    @property
    def era(self) -> Era:
        return era_of(self.version)

    def supports(self, feature: Feature) -> bool:
        return supports(self.version, feature)


class ToolCallContext:
    """What an executor may do while it runs: report progress and log, on this request only."""

    def __init__(self, request: RequestContext, tool_name: str) -> None:
        self.request = request
        self.tool_name = tool_name
        self._last_progress: float | None = None

    @property
    def can_stream(self) -> bool:
        return self.request.send is not None

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> bool:
        """Send ``notifications/progress`` if the caller asked for it; return whether sent.

        Values must strictly increase (all revisions, basic/utilities/progress); a value that
        does not is dropped rather than sent out of order.
        """
        req = self.request
        if req.progress_token is None or req.send is None:
            return False
        if self._last_progress is not None and progress <= self._last_progress:
            return False
        self._last_progress = progress
        params: dict[str, Any] = {"progressToken": req.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None and req.supports(Feature.PROGRESS_MESSAGE):
            params["message"] = message
        await req.send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
        return True

    async def log(self, level: str, data: Any, logger: str | None = None) -> bool:
        """Send ``notifications/message`` at ``level`` if the caller's minimum allows it."""
        req = self.request
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}")
        if req.log_level is None or req.send is None:
            return False
        if LOG_LEVELS.index(level) < LOG_LEVELS.index(req.log_level):
            return False
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await req.send({"jsonrpc": "2.0", "method": "notifications/message", "params": params})
        return True
