"""The seams between the pure protocol core and the rest of the product.

The Django side implements these (``mcp_app.services``); protocol tests implement them with
in-memory fakes. Nothing here does I/O by itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from mcp_app.protocol.catalog import PromptDef, ResourceDef, ResourceTemplateDef, ToolDef
from mcp_app.protocol.results import ToolResult

if TYPE_CHECKING:
    from mcp_app.protocol.context import RequestContext, ToolCallContext
    from mcp_app.protocol.mcp_tasks import TaskInfo, TaskOwner


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


class ResourceWatcher(Protocol):
    """Relays a subscription to a resource served from elsewhere (an upstream MCP server's)
    to where it is served, so its updates reach the subscriber; the catalog's own resources
    need nothing (their edits are announced where they are made)."""

    async def watch(
        self, subscriber: str, uri: str, source: ResourceDef | ResourceTemplateDef
    ) -> None:
        """Have ``subscriber`` (a legacy session id) hear of changes to ``uri``.

        Raises:
            McpError: the resource's source refused or could not be reached.
        """
        ...

    async def unwatch(
        self, subscriber: str, uri: str, source: ResourceDef | ResourceTemplateDef
    ) -> None:
        """Stop relaying changes to ``uri`` to ``subscriber``; never raises (best effort)."""
        ...


class PromptSource(Protocol):
    """Gets prompts the catalog does not render itself (an upstream server's)."""

    async def get_prompt(
        self, prompt: PromptDef, arguments: Mapping[str, str]
    ) -> Mapping[str, Any] | None:
        """Return the ``GetPromptResult`` of ``prompt``, or None to render it from the def.

        Raises:
            McpError: the prompt's source refused or could not be reached.
        """
        ...


class Completer(Protocol):
    """Completes arguments the catalog does not know the values of (an upstream's)."""

    async def complete(
        self,
        item: PromptDef | ResourceTemplateDef,
        argument: str,
        value: str,
        context_arguments: Mapping[str, str],
    ) -> Mapping[str, Any] | None:
        """Return the ``completion`` object (``values``, ``total``?, ``hasMore``?), or None to
        complete from the def's own values.

        Raises:
            McpError: the item's source refused or could not be reached.
        """
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


class HeldQuestions(Protocol):
    """Asks the client of a 2026-07-28 call whose run is held open between rounds.

    ``ask`` answers the current round with ``input_required`` for ``requests`` and returns
    the ``inputResponses`` of the retry, in whichever process it arrives; the run goes on
    meanwhile (services/continuations.py). Cancels the run when no retry comes in time. An
    MCP task's run asks through its task instead: ``input_required`` until ``tasks/update``
    answers (services/background/worker.py).
    """

    async def ask(self, requests: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any]: ...


class TaskStore(Protocol):
    """Creates MCP tasks (tool calls run on a worker) and reads, answers and cancels them.

    Every lookup is scoped to an owner: a task of another principal or session, an expired
    one and an unknown id all come back as ``None``, so callers cannot tell them apart.
    """

    async def create(
        self,
        tool: ToolDef,
        arguments: Mapping[str, Any],
        ctx: RequestContext,
        *,
        answers: Mapping[str, Any],
        ttl_ms: int | None,
    ) -> TaskInfo:
        """Start ``tool`` as a task and return it once a ``get`` would find it (durable).

        ``answers`` are the client's answers to the tool's questions gathered so far.

        ``ttl_ms`` is the lifetime the client asked for (None: the server's default); the
        store may shorten it and reports what it granted.
        """
        ...

    async def get(self, task_id: str, owner: TaskOwner) -> TaskInfo | None: ...

    async def list(
        self, owner: TaskOwner, *, after: tuple[datetime, str] | None, limit: int
    ) -> Sequence[TaskInfo]:
        """Return up to ``limit`` tasks, newest first, strictly after ``(created_at, id)``."""
        ...

    async def wait(self, task_id: str, owner: TaskOwner) -> TaskInfo | None:
        """Return the task once it is terminal (blocks while it runs)."""
        ...

    async def cancel(self, task_id: str, owner: TaskOwner) -> TaskInfo | None:
        """Ask an active task to stop; return it as it stands afterwards (terminal: as is)."""
        ...

    async def answer(
        self, task_id: str, owner: TaskOwner, responses: Mapping[str, Any]
    ) -> TaskInfo | None:
        """Deliver answers to outstanding input requests (others are ignored)."""
        ...
