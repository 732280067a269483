"""The seams between the pure protocol core and the rest of the product.

The Django side implements these (``mcp_app.services``); protocol tests implement them with
in-memory fakes. Nothing here does I/O by itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from mcp_app.protocol.catalog import ResourceDef, ResourceTemplateDef, ToolDef
from mcp_app.protocol.results import ToolResult

if TYPE_CHECKING:
    from mcp_app.protocol.context import ToolCallContext


class ToolRunner(Protocol):
    """Runs one tool whose arguments already passed the input schema.

    Raises ``ToolError`` for failures the caller should read; anything else is an internal
    error (the handler reports ``-32603`` and never leaks the exception text).
    """

    async def run_tool(
        self, tool: ToolDef, arguments: Mapping[str, Any], ctx: ToolCallContext
    ) -> ToolResult: ...


class ResourceReader(Protocol):
    """Produces ``resources/read`` contents: dicts ``{uri, mimeType?, text | blob}``."""

    async def read_resource(self, resource: ResourceDef) -> Sequence[Mapping[str, Any]]: ...

    async def read_template(
        self, template: ResourceTemplateDef, uri: str, variables: Mapping[str, str]
    ) -> Sequence[Mapping[str, Any]] | None:
        """Return the contents, or ``None`` when the template has nothing at ``uri``."""
        ...


class SessionStore(Protocol):
    """Persists the per-session state of a legacy (handshake-era) session."""

    async def set_log_level(self, session_id: str, level: str) -> None: ...

    async def subscribe(self, session_id: str, uri: str) -> None: ...

    async def unsubscribe(self, session_id: str, uri: str) -> None: ...


class ClientRequester(Protocol):
    """Sends a server-to-client request on a legacy call's stream and waits for the answer.

    Raises ``ToolError`` when the client does not answer in time, answers with an error, or
    the call cannot stream.
    """

    async def request(self, method: str, params: Mapping[str, Any]) -> Mapping[str, Any]: ...
