"""One HTTP request to ``/mcp/<slug>`` as every part of the transport sees it, and refusals.

``Exchange`` holds what the entry (``consumer.py``), the HTTP methods (``routes.py``) and the
streams (``follow.py``) share: headers, body, the response, the call-log recorder, who called.
``Rejected`` is the one way any of them declines a request at the HTTP level; the entry maps it
to a response in one place (as DRF maps its ``APIException``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from mcp_app.auth import bearer
from mcp_app.protocol.dispatch import error_body
from mcp_app.protocol.errors import InvalidRequest, McpError
from mcp_app.services.calllog.recorder import CallRecorder
from mcp_app.transport.http import first
from mcp_app.transport.streams import HttpResponder, RequestStream

SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"


class Rejected(Exception):
    """Decline the request with ``status`` and a JSON-RPC error body (its call-log row's
    outcome is ``rejected``).

    ``error`` defaults to ``InvalidRequest(message)``; ``request_id`` is the id of the request
    refused, when it is known (null otherwise).
    """

    def __init__(
        self,
        status: int,
        message: str = "",
        *,
        error: McpError | None = None,
        request_id: Any = None,
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.error = error if error is not None else InvalidRequest(message)
        super().__init__(self.error.message)
        self.status = status
        self.request_id = request_id
        self.headers = headers

    def body(self) -> dict[str, Any]:
        return error_body(self.request_id, self.error)


class Exchange:
    """What one request to an MCP endpoint carries through the transport."""

    def __init__(
        self,
        scope: Mapping[str, Any],
        headers: Mapping[str, list[str]],
        responder: HttpResponder,
        recorder: CallRecorder,
    ) -> None:
        self.scope = scope
        self.headers = headers
        self.responder = responder
        self.recorder = recorder
        self.body = b""
        self.principal: bearer.Principal = bearer.ANONYMOUS
        # 2026-07-28 requests and every stream stop when the client goes; legacy calls go on.
        self.cancel_on_disconnect = False
        # Set when the client cancelled this request (notifications/cancelled).
        self.cancelled_by_client = False
        self.current_stream: RequestStream | None = None
        self.task: asyncio.Task[None] | None = None

    def header(self, name: str) -> str | None:
        return first(self.headers, name)

    def session_owner(self) -> dict[str, Any]:
        """Who a legacy session belongs to: another user or client gets 404 for it."""
        return {"user_id": self.principal.user_id, "oauth_client_id": self.principal.client_id}

    def cancel_by_client(self) -> None:
        """Stop this request's work; its stream ends without a response (legacy cancel)."""
        self.cancelled_by_client = True
        if self.task is not None:
            self.task.cancel()

    def wait_seconds(self, keepalive: float) -> float:
        """How long a stream may wait for its next event: a keep-alive, or the token's end."""
        left = self.principal.seconds_left()
        return keepalive if left is None else max(0.0, min(keepalive, left))

    def token_expired(self) -> bool:
        """Whether this stream's access token has expired: long-lived streams end then."""
        left = self.principal.seconds_left()
        return left is not None and left <= 0
