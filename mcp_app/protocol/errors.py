"""JSON-RPC and MCP protocol errors: one exception class per wire error code.

Handlers raise these; the transport turns one into an error response with
``to_error_object()`` and picks the HTTP status of a modern-era reply with
``modern_http_status()``. Tool *execution* failures are not errors here: they are results
with ``isError: true`` (see ``results.py``).

Code ranges (2026-07-28 basic/index, "Error Codes"): -32700..-32600 are JSON-RPC's own,
-32002 is the legacy resource-not-found code, -32020..-32022 are the 2026-07-28 additions.
429 (rate limited) is an application code outside JSON-RPC's reserved -32768..-32000, as
ToolHive settled on (stacklok/toolhive#6120): the same code in every revision.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from mcp_app.protocol.results import Outcome
from mcp_app.protocol.versions import SUPPORTED_FOR_ERRORS

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
RESOURCE_NOT_FOUND: Final = -32002
HEADER_MISMATCH: Final = -32020
MISSING_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
RATE_LIMITED: Final = 429

# HTTP status of a JSON-RPC error sent as a plain JSON reply in the modern era (protocol.md
# §1.8, the SDK's ERROR_CODE_HTTP_STATUS). Unlisted codes, -32603 included, travel as 200.
HTTP_STATUS_FOR_CODE: Final[Mapping[int, int]] = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
    RATE_LIMITED: 429,
}


def modern_http_status(code: int) -> int:
    """Return the HTTP status of a modern-era JSON reply carrying error ``code``."""
    return HTTP_STATUS_FOR_CODE.get(code, 200)


class McpError(Exception):
    """A protocol error that becomes a JSON-RPC ``error`` object.

    ``request_id`` is the id of the request the error answers when it could be read (a
    malformed body may still carry a usable id); ``None`` means the reply goes out with
    ``"id": null``.
    """

    code: int = INTERNAL_ERROR

    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data
        self.request_id: str | int | None = None
        # Where the request ran when not inline ({"task_id", "worker"}), for the call log.
        self.detail: Mapping[str, Any] | None = None
        # How the call log records it: an upstream that could not be reached says so.
        self.outcome: Outcome = Outcome.PROTOCOL_ERROR

    def to_error_object(self) -> dict[str, Any]:
        """Return the JSON-RPC ``error`` member: ``{"code", "message"[, "data"]}``."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ParseError(McpError):
    code = PARSE_ERROR


class InvalidRequest(McpError):
    code = INVALID_REQUEST


class MethodNotFound(McpError):
    code = METHOD_NOT_FOUND


class InvalidParams(McpError):
    code = INVALID_PARAMS


class InternalError(McpError):
    code = INTERNAL_ERROR


class RelayedError(McpError):
    """An error another server answered (an upstream MCP server), passed on with its code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class ResourceNotFound(McpError):
    """Legacy-era ``resources/read`` miss; modern requests get ``InvalidParams`` instead."""

    code = RESOURCE_NOT_FOUND


class HeaderMismatch(McpError):
    """An ``MCP-Protocol-Version``/``Mcp-*`` header disagrees with the body (2026-07-28)."""

    code = HEADER_MISMATCH


class MissingClientCapability(McpError):
    """The request needs a client capability its ``_meta`` envelope did not declare."""

    code = MISSING_CLIENT_CAPABILITY

    def __init__(self, message: str, required_capabilities: Mapping[str, Any]) -> None:
        super().__init__(message, {"requiredCapabilities": dict(required_capabilities)})


class UnsupportedProtocolVersion(McpError):
    """A modern request or notification names a version this server does not serve.

    ``data.supported`` lists every served version, modern first, so a dual-era client that
    finds no mutual modern version falls back to ``initialize`` (protocol.md §1.4).
    """

    code = UNSUPPORTED_PROTOCOL_VERSION

    def __init__(self, requested: Any) -> None:
        super().__init__(
            "Unsupported protocol version",
            {"supported": list(SUPPORTED_FOR_ERRORS), "requested": requested},
        )


class RateLimited(McpError):
    """A rate limit, concurrency cap or quota refused the request before it ran.

    ``data`` says which limit and when to retry (``retryAfterSeconds``, as ToolHive's);
    ``detail`` names the limit's row for the call log.
    """

    code = RATE_LIMITED

    def __init__(self, message: str, data: Mapping[str, Any], limit_id: int) -> None:
        super().__init__(message, dict(data))
        self.outcome = Outcome.RATE_LIMITED
        self.detail = {"rate_limit": limit_id}
