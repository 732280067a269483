"""Python tool functions with the behaviours the conformance scenarios call for.

An ordinary module of ``@mcp_tool_function`` callables: a server that lists
``conformance.tools`` in ``MCP_PYTHON_TOOL_MODULES`` offers them in the admin like any
operator's own module. Texts follow the scenario descriptions of the official suite.
"""

from __future__ import annotations

import asyncio
from typing import Any

from conformance.media import PNG_BASE64, WAV_BASE64
from mcp_app.executors.python import mcp_tool_function
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.results import ToolError, ToolResult

NO_ARGUMENTS = {"type": "object", "properties": {}, "additionalProperties": False}
# The scenarios space their notifications about 50 ms apart.
STEP_SECONDS = 0.05


@mcp_tool_function(
    "conformance_image", description="Returns a 1x1 PNG image.", input_schema=NO_ARGUMENTS
)
def image(arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
    return ToolResult(content=[{"type": "image", "data": PNG_BASE64, "mimeType": "image/png"}])


@mcp_tool_function(
    "conformance_audio", description="Returns a short WAV sound.", input_schema=NO_ARGUMENTS
)
def audio(arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
    return ToolResult(content=[{"type": "audio", "data": WAV_BASE64, "mimeType": "audio/wav"}])


@mcp_tool_function(
    "conformance_embedded_resource",
    description="Returns an embedded text resource.",
    input_schema=NO_ARGUMENTS,
)
def embedded_resource(arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
    resource = {
        "uri": "test://embedded-resource",
        "mimeType": "text/plain",
        "text": "This is an embedded resource content.",
    }
    return ToolResult(content=[{"type": "resource", "resource": resource}])


@mcp_tool_function(
    "conformance_mixed_content",
    description="Returns text, an image and an embedded resource.",
    input_schema=NO_ARGUMENTS,
)
def mixed_content(arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
    resource = {
        "uri": "test://mixed-content-resource",
        "mimeType": "application/json",
        "text": '{"test":"data","value":123}',
    }
    return ToolResult(
        content=[
            {"type": "text", "text": "Multiple content types test:"},
            {"type": "image", "data": PNG_BASE64, "mimeType": "image/png"},
            {"type": "resource", "resource": resource},
        ]
    )


@mcp_tool_function(
    "conformance_logging",
    description="Sends three log messages while it runs.",
    input_schema=NO_ARGUMENTS,
)
async def logging_tool(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.log("info", text)
        await asyncio.sleep(STEP_SECONDS)
    return "Logging test completed."


@mcp_tool_function(
    "conformance_progress",
    description="Reports progress 0, 50 and 100 of 100.",
    input_schema=NO_ARGUMENTS,
)
async def progress_tool(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    for value in (0, 50, 100):
        await ctx.progress(value, 100)
        await asyncio.sleep(STEP_SECONDS)
    return "Progress test completed."


@mcp_tool_function(
    "conformance_error", description="Always fails, as a tool result.", input_schema=NO_ARGUMENTS
)
def error_tool(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    raise ToolError("This tool intentionally returns an error for testing")


@mcp_tool_function(
    "conformance_sampling",
    description="Asks the client's model to answer a prompt.",
    input_schema={
        "type": "object",
        "properties": {"prompt": {"type": "string"}},
        "required": ["prompt"],
    },
)
async def sampling_tool(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    answer = await ctx.sample(
        [{"role": "user", "content": {"type": "text", "text": arguments["prompt"]}}],
        max_tokens=100,
    )
    content = answer.get("content")
    text = content.get("text") if isinstance(content, dict) else None
    return f"LLM response: {text}"


@mcp_tool_function(
    "conformance_elicitation",
    description="Asks the user for a username and an email address.",
    input_schema={
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
    },
)
async def elicitation_tool(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    answer = await ctx.elicit(
        arguments["message"],
        {
            "type": "object",
            "properties": {"username": {"type": "string"}, "email": {"type": "string"}},
            "required": ["username", "email"],
        },
    )
    return f"User response: action={answer.get('action')}, content={answer.get('content')}"


@mcp_tool_function(
    "conformance_elicitation_defaults",
    description="Asks for values that all have defaults (SEP-1034).",
    input_schema=NO_ARGUMENTS,
)
async def elicitation_defaults(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    answer = await ctx.elicit(
        "Please review and update the form fields with defaults",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "score": {"type": "number", "default": 95.5},
                "status": {
                    "type": "string",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "default": True},
            },
        },
    )
    return f"Elicitation completed: action={answer.get('action')}"


@mcp_tool_function(
    "conformance_elicitation_enums",
    description="Asks with every enum schema variant (SEP-1330).",
    input_schema=NO_ARGUMENTS,
)
async def elicitation_enums(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    titled = [("value1", "First Option"), ("value2", "Second Option"), ("value3", "Third Option")]
    answer = await ctx.elicit(
        "Choose options",
        {
            "type": "object",
            "properties": {
                "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                "titledSingle": {
                    "type": "string",
                    "oneOf": [{"const": v, "title": t} for v, t in titled],
                },
                "legacyEnum": {
                    "type": "string",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                },
                "titledMulti": {
                    "type": "array",
                    "items": {"anyOf": [{"const": v, "title": t} for v, t in titled]},
                },
            },
        },
    )
    return f"Elicitation completed: action={answer.get('action')}"
