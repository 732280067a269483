"""In-memory implementations of the protocol ports, a reference catalog, and context factories.

Nothing here touches a database or the network: the protocol core is driven exactly as the
transport drives it, with the ports implemented by plain Python objects.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import pytest

from mcp_app.protocol.catalog import (
    CatalogSnapshot,
    EndpointInfo,
    PromptArgumentDef,
    PromptDef,
    PromptMessageDef,
    ResourceDef,
    ResourceTemplateDef,
    ToolDef,
)
from mcp_app.protocol.context import LegacySession, RequestContext, ToolCallContext
from mcp_app.protocol.results import ToolError, ToolResult

SERVER_INFO = {
    "name": "mcphost",
    "version": "0.1.0",
    "title": "MCP Host",
    "websiteUrl": "https://mcphost.example",
}
CURSOR_SECRET = b"protocol-tests-cursor-secret"

ToolFunction = Callable[[Mapping[str, Any], ToolCallContext], Awaitable[ToolResult]]
TemplateFunction = Callable[[str, Mapping[str, str]], Sequence[Mapping[str, Any]] | None]


class InMemoryToolRunner:
    """Runs a tool whose ``key`` is an async function ``(arguments, ctx) -> ToolResult``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def run_tool(
        self, tool: ToolDef, arguments: Mapping[str, Any], ctx: ToolCallContext
    ) -> ToolResult:
        self.calls.append((tool.name, dict(arguments)))
        function: ToolFunction = tool.binding
        return await function(arguments, ctx)


class InMemoryResourceReader:
    """A resource's ``key`` is its text; a template's ``key`` maps (uri, variables) to contents."""

    def __init__(self) -> None:
        self.template_reads: list[tuple[str, str, dict[str, str]]] = []

    async def read_resource(self, resource: ResourceDef) -> Sequence[Mapping[str, Any]]:
        if resource.binding is None:
            return []
        return [{"uri": resource.uri, "mimeType": resource.mime_type, "text": resource.binding}]

    async def read_template(
        self, template: ResourceTemplateDef, uri: str, variables: Mapping[str, str]
    ) -> Sequence[Mapping[str, Any]] | None:
        self.template_reads.append((template.uri_template, uri, dict(variables)))
        function: TemplateFunction = template.binding
        return function(uri, variables)


class InMemorySessionStore:
    def __init__(self) -> None:
        self.log_levels: dict[str, str] = {}
        self.subscriptions: dict[str, set[str]] = {}

    async def set_log_level(self, session_id: str, level: str) -> None:
        self.log_levels[session_id] = level

    async def subscribe(self, session_id: str, uri: str) -> None:
        self.subscriptions.setdefault(session_id, set()).add(uri)

    async def unsubscribe(self, session_id: str, uri: str) -> None:
        self.subscriptions.get(session_id, set()).discard(uri)


class RecordingSend:
    """A ``RequestContext.send`` that keeps every message written to the request's stream."""

    def __init__(self) -> None:
        self.messages: list[Mapping[str, Any]] = []

    async def __call__(self, message: Mapping[str, Any]) -> None:
        self.messages.append(message)


# -- the reference catalog ---------------------------------------------------------------------


async def _add(arguments: Mapping[str, Any], ctx: ToolCallContext) -> ToolResult:
    return ToolResult.text(str(arguments["a"] + arguments["b"]))


async def _echo(arguments: Mapping[str, Any], ctx: ToolCallContext) -> ToolResult:
    return ToolResult.text(arguments["text"])


async def _weather(arguments: Mapping[str, Any], ctx: ToolCallContext) -> ToolResult:
    return ToolResult(structured={"tempC": 21.5, "sky": "cloudy"})


async def _fail(arguments: Mapping[str, Any], ctx: ToolCallContext) -> ToolResult:
    raise ToolError("The upstream service said no")


async def _crash(arguments: Mapping[str, Any], ctx: ToolCallContext) -> ToolResult:
    raise RuntimeError("secret connection string postgres://admin:hunter2@db")


async def _steps(arguments: Mapping[str, Any], ctx: ToolCallContext) -> ToolResult:
    total = arguments.get("steps", 3)
    for step in range(1, total + 1):
        await ctx.progress(step, total, message=f"step {step}")
        await ctx.log("info", {"step": step}, logger="steps")
    await ctx.log("debug", "done")
    return ToolResult.text("finished")


def _profile(uri: str, variables: Mapping[str, str]) -> Sequence[Mapping[str, Any]] | None:
    if variables["id"] == "missing":
        return None
    return [{"uri": uri, "mimeType": "application/json", "text": f'{{"id": "{variables["id"]}"}}'}]


def _file(uri: str, variables: Mapping[str, str]) -> Sequence[Mapping[str, Any]] | None:
    return [{"uri": uri, "text": f"contents of {variables['path']}"}]


NUMBER_PAIR = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
WEATHER_OUTPUT = {
    "type": "object",
    "properties": {"tempC": {"type": "number"}, "sky": {"type": "string"}},
    "required": ["tempC", "sky"],
}


def reference_catalog() -> CatalogSnapshot:
    return CatalogSnapshot(
        endpoint=EndpointInfo(slug="ref", title="Reference", instructions="Use add to add."),
        tools=(
            ToolDef(
                name="add",
                description="Add two numbers",
                input_schema=NUMBER_PAIR,
                title="Adder",
                annotations={"readOnlyHint": True, "title": "Add"},
                icons=({"src": "https://mcphost.example/add.png", "mimeType": "image/png"},),
                meta={"example.com/owner": "math"},
                binding=_add,
            ),
            ToolDef(
                name="echo",
                description="Echo the text back",
                input_schema={
                    "type": "object",
                    "properties": {
                        "text": {"type": "string", "x-mcp-header": "Text"},
                        "count": {"type": "integer", "x-mcp-header": "Count"},
                        "loud": {"type": "boolean", "x-mcp-header": "Loud"},
                    },
                    "required": ["text"],
                },
                binding=_echo,
            ),
            ToolDef(
                name="weather",
                description="Current weather",
                input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
                output_schema=WEATHER_OUTPUT,
                binding=_weather,
            ),
            ToolDef(
                name="fail",
                description="Always fails",
                input_schema={"type": "object"},
                binding=_fail,
            ),
            ToolDef(
                name="crash", description="Raises", input_schema={"type": "object"}, binding=_crash
            ),
            ToolDef(
                name="steps",
                description="Reports progress",
                input_schema={"type": "object", "properties": {"steps": {"type": "integer"}}},
                binding=_steps,
            ),
        ),
        resources=(
            ResourceDef(
                uri="file:///readme.txt",
                name="readme",
                title="Read me",
                description="The read-me",
                mime_type="text/plain",
                size=11,
                icons=({"src": "https://mcphost.example/doc.png"},),
                binding="hello world",
            ),
            ResourceDef(uri="file:///empty.txt", name="empty", binding=None),
        ),
        resource_templates=(
            ResourceTemplateDef(
                uri_template="users://{id}/profile",
                name="profile",
                title="User profile",
                mime_type="application/json",
                completions={"id": ("alice", "Albert", "bob")},
                binding=_profile,
            ),
            ResourceTemplateDef(uri_template="files:///{+path}", name="files", binding=_file),
        ),
        prompts=(
            PromptDef(
                name="greet",
                title="Greeting",
                description="Greets someone",
                arguments=(
                    PromptArgumentDef(
                        name="name",
                        title="Name",
                        required=True,
                        completions=("Alice", "alfred", "Bob"),
                    ),
                    PromptArgumentDef(name="mood", description="How to sound"),
                ),
                messages=(
                    PromptMessageDef(role="user", text="Say hello to {name} in a {mood} way."),
                    PromptMessageDef(role="assistant", text="Literal {{braces}} and {unknown}."),
                ),
            ),
        ),
    )


@pytest.fixture
def catalog() -> CatalogSnapshot:
    return reference_catalog()


@pytest.fixture
def tool_runner() -> InMemoryToolRunner:
    return InMemoryToolRunner()


@pytest.fixture
def resource_reader() -> InMemoryResourceReader:
    return InMemoryResourceReader()


@pytest.fixture
def session_store() -> InMemorySessionStore:
    return InMemorySessionStore()


MakeContext = Callable[..., RequestContext]


@pytest.fixture
def make_ctx(
    catalog: CatalogSnapshot,
    tool_runner: InMemoryToolRunner,
    resource_reader: InMemoryResourceReader,
    session_store: InMemorySessionStore,
) -> MakeContext:
    """Build a ``RequestContext`` as the transport would; legacy versions get a session."""

    def make(version: str = "2025-11-25", **overrides: Any) -> RequestContext:
        fields: dict[str, Any] = {
            "version": version,
            "catalog": catalog,
            "tools": tool_runner,
            "resources": resource_reader,
            "server_info": SERVER_INFO,
            "cursor_secret": CURSOR_SECRET,
        }
        if version != "2026-07-28":
            fields["session"] = LegacySession(id="s-1", protocol_version=version)
            fields["sessions"] = session_store
        fields.update(overrides)
        return RequestContext(**fields)

    return make
