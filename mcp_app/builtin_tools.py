"""Built-in python tool functions and resource functions, offered in the admin's function list.

Listed in the default ``MCP_PYTHON_TOOL_MODULES``. Each one is small, safe to expose and useful
for checking that a client works end to end (progress, logging, structured output, errors).

Functions whose work takes microseconds are ``async def``: a plain ``def`` runs on a worker
thread (the executor's ``asyncio.to_thread``), and that hop costs more than the work itself.
Ones whose input can be large (``word_count``, ``json_format``) stay on a thread, so a big
argument never holds up the event loop.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mcp_app.executors.python import mcp_resource_function, mcp_tool_function
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.results import ToolError

SLEEP_MAX_SECONDS = 60
SLEEP_MAX_STEPS = 100
COUNTDOWN_MAX_SECONDS = 24 * 3600
JSON_FORMAT_MAX_INDENT = 8


@mcp_tool_function(
    "echo",
    title="Echo",
    description="Return the given message unchanged.",
    input_schema={
        "type": "object",
        "properties": {"message": {"type": "string", "description": "Text to send back."}},
        "required": ["message"],
        "additionalProperties": False,
    },
    annotations={"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
)
async def echo(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    return str(arguments["message"])


@mcp_tool_function(
    "add",
    title="Add numbers",
    description="Add two numbers and return their sum.",
    input_schema={
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {"sum": {"type": "number"}},
        "required": ["sum"],
    },
    annotations={"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
)
async def add(arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
    return {"sum": arguments["a"] + arguments["b"]}


@mcp_tool_function(
    "current_time",
    title="Current time",
    description=(
        "Return the current date and time, in UTC or in the given IANA time zone "
        "(e.g. Europe/Paris)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "timezone": {"type": "string", "description": "IANA time zone name; default UTC."}
        },
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "iso": {"type": "string", "description": "ISO 8601 timestamp with offset."},
            "timezone": {"type": "string"},
            "utc_offset": {"type": "string", "description": "e.g. +02:00"},
            "unix": {"type": "number", "description": "Seconds since the Unix epoch."},
        },
        "required": ["iso", "timezone", "utc_offset", "unix"],
    },
    annotations={"readOnlyHint": True, "openWorldHint": False},
)
async def current_time(arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
    name = arguments.get("timezone") or "UTC"
    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(
            f"Unknown time zone {name!r}; use an IANA name like Europe/Paris."
        ) from None
    now = datetime.now(zone)
    return {
        "iso": now.isoformat(),
        "timezone": name,
        "utc_offset": now.isoformat()[-6:] if now.utcoffset() else "+00:00",
        "unix": now.timestamp(),
    }


@mcp_tool_function(
    "sleep_with_progress",
    title="Sleep with progress",
    description=(
        f"Wait for the given number of seconds (at most {SLEEP_MAX_SECONDS}), reporting progress "
        "after each step. Useful to test progress notifications, logging and cancellation."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "seconds": {"type": "number", "minimum": 0, "maximum": SLEEP_MAX_SECONDS},
            "steps": {"type": "integer", "minimum": 1, "maximum": SLEEP_MAX_STEPS, "default": 5},
        },
        "required": ["seconds"],
        "additionalProperties": False,
    },
    annotations={"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
)
async def sleep_with_progress(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    seconds = float(arguments["seconds"])
    steps = int(arguments.get("steps", 5))
    # The schema bounds both, but a schema edited in the admin must not lift the limits.
    if not 0 <= seconds <= SLEEP_MAX_SECONDS:
        raise ToolError(f"seconds must be between 0 and {SLEEP_MAX_SECONDS}.")
    if not 1 <= steps <= SLEEP_MAX_STEPS:
        raise ToolError(f"steps must be between 1 and {SLEEP_MAX_STEPS}.")
    await ctx.log("info", f"Sleeping {seconds:g} s in {steps} steps", logger="sleep_with_progress")
    for step in range(1, steps + 1):
        await asyncio.sleep(seconds / steps)
        await ctx.progress(step, steps, f"Step {step} of {steps}")
    await ctx.log("info", "Done sleeping", logger="sleep_with_progress")
    return f"Slept {seconds:g} seconds in {steps} steps."


@mcp_tool_function(
    "countdown",
    title="Countdown",
    description=(
        f"Count down the given number of seconds (at most {COUNTDOWN_MAX_SECONDS}), reporting "
        "progress every second. A long-running job for background execution: set the tool's "
        "execution mode to background so it runs on a worker, streams progress, and can run "
        "as an MCP task."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "seconds": {"type": "integer", "minimum": 1, "maximum": COUNTDOWN_MAX_SECONDS},
        },
        "required": ["seconds"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {"counted": {"type": "integer"}},
        "required": ["counted"],
    },
    annotations={"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
)
async def countdown(arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, int]:
    seconds = int(arguments["seconds"])
    if not 1 <= seconds <= COUNTDOWN_MAX_SECONDS:
        raise ToolError(f"seconds must be between 1 and {COUNTDOWN_MAX_SECONDS}.")
    for done in range(1, seconds + 1):
        await asyncio.sleep(1)
        await ctx.progress(done, seconds, f"{seconds - done} s left")
    return {"counted": seconds}


@mcp_tool_function(
    "word_count",
    title="Word count",
    description="Count the words, characters and lines of a text.",
    input_schema={
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "words": {"type": "integer"},
            "characters": {"type": "integer"},
            "lines": {"type": "integer"},
        },
        "required": ["words", "characters", "lines"],
    },
    annotations={"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
)
def word_count(arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, int]:
    text = str(arguments["text"])
    return {
        "words": len(text.split()),
        "characters": len(text),
        "lines": len(text.splitlines()),
    }


@mcp_tool_function(
    "json_format",
    title="Format JSON",
    description=(
        "Check that a string is valid JSON and pretty-print it (or compact it with indent 0). "
        "Invalid JSON is reported with its line and column."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "json": {"type": "string", "description": "The JSON text."},
            "indent": {
                "type": "integer",
                "minimum": 0,
                "maximum": JSON_FORMAT_MAX_INDENT,
                "default": 2,
            },
            "sort_keys": {"type": "boolean", "default": False},
        },
        "required": ["json"],
        "additionalProperties": False,
    },
    annotations={"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
)
def json_format(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    indent = int(arguments.get("indent", 2))
    if not 0 <= indent <= JSON_FORMAT_MAX_INDENT:
        raise ToolError(f"indent must be between 0 and {JSON_FORMAT_MAX_INDENT}.")
    try:
        value = json.loads(arguments["json"])
    except json.JSONDecodeError as exc:
        raise ToolError(
            f"Invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}."
        ) from None
    sort_keys = bool(arguments.get("sort_keys", False))
    if indent == 0:
        return json.dumps(value, separators=(",", ":"), sort_keys=sort_keys, ensure_ascii=False)
    return json.dumps(value, indent=indent, sort_keys=sort_keys, ensure_ascii=False)


@mcp_tool_function(
    "uuid",
    title="Random UUID",
    description="Return a new random UUID (version 4).",
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    annotations={"readOnlyHint": True, "openWorldHint": False},
)
async def random_uuid(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    return str(uuid.uuid4())


# -- Tools that ask the client ----------------------------------------------------------------
# They work in every revision: a legacy call asks on its own stream and waits for the answer; a
# 2026-07-28 call returns input_required and the client retries with the answer. They ask
# before doing anything, since each 2026 round runs the tool again from the start.

ASK_MAX_TOKENS = 4096


@mcp_tool_function(
    "ask_confirmation",
    title="Ask for confirmation",
    description=(
        "Ask the user a yes/no question (elicitation) and report whether they confirmed. "
        "Needs a client that supports elicitation."
    ),
    input_schema={
        "type": "object",
        "properties": {"question": {"type": "string", "minLength": 1}},
        "required": ["question"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {"confirmed": {"type": "boolean"}, "action": {"type": "string"}},
        "required": ["confirmed", "action"],
    },
    annotations={"readOnlyHint": True, "openWorldHint": False},
)
async def ask_confirmation(arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
    answer = await ctx.elicit(
        str(arguments["question"]),
        {
            "type": "object",
            "properties": {"confirm": {"type": "boolean", "title": "Confirm", "default": False}},
            "required": ["confirm"],
        },
    )
    action = str(answer.get("action", "cancel"))
    raw_content = answer.get("content")
    content = raw_content if isinstance(raw_content, dict) else {}
    return {"confirmed": action == "accept" and content.get("confirm") is True, "action": action}


@mcp_tool_function(
    "ask_value",
    title="Ask for a value",
    description=(
        "Ask the user for one value (elicitation), optionally from a list of choices and with "
        "a default. Needs a client that supports elicitation."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "question": {"type": "string", "minLength": 1},
            "choices": {"type": "array", "items": {"type": "string"}, "maxItems": 50},
            "default": {"type": "string"},
        },
        "required": ["question"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {"action": {"type": "string"}, "value": {"type": ["string", "null"]}},
        "required": ["action", "value"],
    },
    annotations={"readOnlyHint": True, "openWorldHint": False},
)
async def ask_value(arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
    field: dict[str, Any] = {"type": "string", "title": "Value"}
    if choices := arguments.get("choices"):
        field["enum"] = list(choices)
    if "default" in arguments:
        if choices and arguments["default"] not in choices:
            raise ToolError("default must be one of the choices.")
        field["default"] = arguments["default"]
    answer = await ctx.elicit(
        str(arguments["question"]),
        {"type": "object", "properties": {"value": field}, "required": ["value"]},
    )
    action = str(answer.get("action", "cancel"))
    raw_content = answer.get("content")
    content = raw_content if isinstance(raw_content, dict) else {}
    value = content.get("value") if action == "accept" else None
    return {"action": action, "value": None if value is None else str(value)}


@mcp_tool_function(
    "ask_model",
    title="Ask the client's model",
    description=(
        "Send a prompt to the model of the calling client (sampling) and return its answer. "
        "Needs a client that supports sampling."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "minLength": 1},
            "max_tokens": {"type": "integer", "minimum": 1, "maximum": ASK_MAX_TOKENS},
        },
        "required": ["prompt"],
        "additionalProperties": False,
    },
    annotations={"readOnlyHint": True, "openWorldHint": True},
)
async def ask_model(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    answer = await ctx.sample(
        [{"role": "user", "content": {"type": "text", "text": str(arguments["prompt"])}}],
        max_tokens=int(arguments.get("max_tokens", 512)),
    )
    content = answer.get("content")
    blocks = content if isinstance(content, list) else [content]
    texts = [b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    if not texts:
        raise ToolError("The client's model answered without text.")
    return "\n".join(texts)


@mcp_tool_function(
    "client_roots",
    title="Client roots",
    description="List the roots (folders, projects) the calling client exposes. Needs roots.",
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    output_schema={
        "type": "object",
        "properties": {"roots": {"type": "array", "items": {"type": "object"}}},
        "required": ["roots"],
    },
    annotations={"readOnlyHint": True, "openWorldHint": False},
)
async def client_roots(arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
    answer = await ctx.list_roots()
    roots = answer.get("roots")
    return {"roots": roots if isinstance(roots, list) else []}


@mcp_resource_function("echo", description="Return the URI and its template variables as JSON.")
def echo_resource(uri: str, variables: Mapping[str, str]) -> list[dict[str, Any]]:
    text = json.dumps({"uri": uri, "variables": dict(variables)}, indent=2, ensure_ascii=False)
    return [{"uri": uri, "mimeType": "application/json", "text": text}]
