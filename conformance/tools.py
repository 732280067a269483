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
from mcp_app.protocol.errors import InternalError
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


# -- 2026-07-28 fixtures: asking the client by retry (input_required) ----------------------------

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def _content_text(answer: dict[str, Any]) -> str:
    content = answer.get("content")
    return str(content.get("text", "")) if isinstance(content, dict) else ""


@mcp_tool_function(
    "conformance_ask_name", description="Asks the user for their name.", input_schema=NO_ARGUMENTS
)
async def ask_name(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    answer = await ctx.elicit("What is your name?", NAME_FORM, key="user_name")
    content = answer.get("content") if isinstance(answer.get("content"), dict) else {}
    return f"Hello, {content.get('name', 'stranger')}!"


@mcp_tool_function(
    "conformance_ask_model",
    description="Asks the client's model a question.",
    input_schema=NO_ARGUMENTS,
)
async def ask_capital(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    answer = await ctx.sample(
        [{"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}}],
        max_tokens=50,
        key="capital_question",
    )
    return f"The model answered: {_content_text(answer)}"


@mcp_tool_function(
    "conformance_ask_roots", description="Asks the client for its roots.", input_schema=NO_ARGUMENTS
)
async def ask_roots(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    answer = await ctx.list_roots(key="client_roots")
    roots = answer.get("roots") if isinstance(answer.get("roots"), list) else []
    return f"The client has {len(roots)} root(s)."


@mcp_tool_function(
    "conformance_ask_state",
    description="Asks one question and reports that its request state held.",
    input_schema=NO_ARGUMENTS,
)
async def ask_state(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    await ctx.elicit("Confirm to continue.", NAME_FORM, key="confirmation")
    return "state-ok"


@mcp_tool_function(
    "conformance_ask_everything",
    description="Asks for a form, a model answer and the roots in one round.",
    input_schema=NO_ARGUMENTS,
)
async def ask_everything(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    answers = await ctx.ask(
        {
            "user_name": ctx.form_question("What is your name?", NAME_FORM),
            "capital_question": ctx.sampling_question(
                [{"role": "user", "content": {"type": "text", "text": "Capital of France?"}}],
                max_tokens=50,
            ),
            "client_roots": ctx.roots_question(),
        }
    )
    return f"Got {len(answers)} answers."


@mcp_tool_function(
    "conformance_ask_twice",
    description="Asks two questions, one round each.",
    input_schema=NO_ARGUMENTS,
)
async def ask_twice(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    await ctx.elicit("First question.", NAME_FORM, key="first")
    await ctx.elicit("Second question.", NAME_FORM, key="second")
    return "Both rounds answered."


@mcp_tool_function(
    "conformance_ask_what_the_client_can",
    description="Asks by elicitation when the client can answer it, else by sampling.",
    input_schema=NO_ARGUMENTS,
)
async def ask_what_the_client_can(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    if ctx.can_ask("elicitation", "form"):
        await ctx.elicit("What is your name?", NAME_FORM, key="user_name")
    else:
        await ctx.sample(
            [{"role": "user", "content": {"type": "text", "text": "Say hello."}}],
            max_tokens=20,
            key="greeting",
        )
    return "Answered with what the client supports."


@mcp_tool_function(
    "conformance_needs_sampling",
    description="Needs the client's sampling capability.",
    input_schema=NO_ARGUMENTS,
)
async def needs_sampling(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    answer = await ctx.sample(
        [{"role": "user", "content": {"type": "text", "text": "Hello?"}}], max_tokens=10
    )
    return _content_text(answer)


# -- Catalog changes on demand (for change notifications) ---------------------------------------


def _touch(model_name: str, name: str) -> None:
    from mcp_app.models import Prompt, Tool

    model = {"tool": Tool, "prompt": Prompt}[model_name]
    row = model.objects.get(name=name)
    # Toggling a trailing space keeps the description meaningful while changing the row.
    row.description = (
        row.description[:-1] if row.description.endswith(" ") else row.description + " "
    )
    row.save()


@mcp_tool_function(
    "conformance_change_tools",
    description="Edits a tool of this catalog, so connected clients hear tools/list_changed.",
    input_schema=NO_ARGUMENTS,
)
async def change_tools(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    from channels.db import database_sync_to_async

    await database_sync_to_async(_touch)("tool", "test_simple_text")
    return "Tool list changed."


@mcp_tool_function(
    "conformance_change_prompts",
    description="Edits a prompt of this catalog, so connected clients hear prompts/list_changed.",
    input_schema=NO_ARGUMENTS,
)
async def change_prompts(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    from channels.db import database_sync_to_async

    await database_sync_to_async(_touch)("prompt", "test_simple_prompt")
    return "Prompt list changed."


@mcp_tool_function(
    "conformance_slow",
    description="Answers after a second: long enough for a server that polls to close the stream.",
    input_schema=NO_ARGUMENTS,
)
async def slow(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    await asyncio.sleep(1.0)
    return "Reconnection test completed successfully."


# -- MCP tasks (2025-11-25 core, 2026-07-28 extension): run on a Celery worker ------------------

CONFIRM_FORM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}


def _accepted(answer: dict[str, Any]) -> dict[str, Any]:
    content = answer.get("content")
    return content if answer.get("action") == "accept" and isinstance(content, dict) else {}


@mcp_tool_function(
    "conformance_slow_compute",
    description="Works for the given number of seconds, then reports what it computed.",
    input_schema={
        "type": "object",
        "properties": {
            "seconds": {"type": "number", "minimum": 0, "maximum": 600},
            "label": {"type": "string"},
        },
        "required": ["seconds"],
    },
)
async def slow_compute(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    seconds = float(arguments["seconds"])
    await asyncio.sleep(seconds)
    return f"Computed {arguments.get('label', 'result')} in {seconds:g} s."


@mcp_tool_function(
    "conformance_failing_job",
    description="Works for about a second, then fails as a tool error.",
    input_schema=NO_ARGUMENTS,
)
async def failing_job(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    await asyncio.sleep(1.0)
    raise ToolError("The job failed: the input data could not be processed.")


@mcp_tool_function(
    "conformance_protocol_error_job",
    description="Ends with a JSON-RPC (protocol) error instead of a result.",
    input_schema=NO_ARGUMENTS,
)
async def protocol_error_job(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    raise InternalError("The job crashed before it produced a result.")


@mcp_tool_function(
    "conformance_confirm_delete",
    description="Asks the user to confirm, then deletes the named file.",
    input_schema={
        "type": "object",
        "properties": {"filename": {"type": "string"}},
        "required": ["filename"],
    },
)
async def confirm_delete(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    filename = arguments["filename"]
    answer = await ctx.elicit(f"Delete {filename}?", CONFIRM_FORM, key="confirm_delete")
    if _accepted(answer).get("confirm") is True:
        return f"Deleted {filename}."
    return f"Kept {filename}."


@mcp_tool_function(
    "conformance_multi_input",
    description="Asks two questions at once, then reports both answers.",
    input_schema=NO_ARGUMENTS,
)
async def multi_input(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    answers = await ctx.ask(
        {
            "project_name": ctx.form_question("Name the project.", NAME_FORM),
            "confirm_start": ctx.form_question("Start the project now?", CONFIRM_FORM),
        }
    )
    name = _accepted(answers["project_name"]).get("name", "unnamed")
    return f"Project {name}: start confirmed={_accepted(answers['confirm_start']).get('confirm')}."


@mcp_tool_function(
    "conformance_greet_then_task",
    description="Asks for the user's name, then finishes the greeting as a task.",
    input_schema=NO_ARGUMENTS,
)
async def greet_then_task(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    answer = await ctx.elicit("What is your name?", NAME_FORM, key="user_name")
    # The question is settled on the request itself; the rest runs as a task on a worker.
    ctx.continue_as_task()
    await asyncio.sleep(STEP_SECONDS)
    return f"Hello, {_accepted(answer).get('name', 'stranger')}! (from a task)"
