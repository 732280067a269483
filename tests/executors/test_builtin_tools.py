"""The built-in python tools, run through the python executor."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from mcp_app.executors import get_executor
from mcp_app.executors.python import resource_functions, tool_functions
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.results import ToolError, ToolResult
from tests.executors.conftest import Sent

python = get_executor("python")


async def run(name: str, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
    return await python.run(python.prepare({"function": name}), arguments, ctx)


def test_every_builtin_declares_valid_object_schemas() -> None:
    for function in tool_functions().values():
        Draft202012Validator.check_schema(function.input_schema)
        assert function.input_schema["type"] == "object"
        if function.output_schema is not None:
            Draft202012Validator.check_schema(function.output_schema)
            assert function.output_schema["type"] == "object"
        assert function.description


async def test_echo_returns_the_message(ctx: ToolCallContext) -> None:
    assert await run("echo", {"message": "héllo"}, ctx) == ToolResult.text("héllo")


async def test_add_returns_the_sum_as_structured_content(ctx: ToolCallContext) -> None:
    result = await run("add", {"a": 2, "b": 0.5}, ctx)

    assert result == ToolResult(
        content=[{"type": "text", "text": '{"sum":2.5}'}], structured={"sum": 2.5}
    )


async def test_current_time_in_a_named_zone_matches_its_output_schema(
    ctx: ToolCallContext,
) -> None:
    result = await run("current_time", {"timezone": "Asia/Kolkata"}, ctx)

    Draft202012Validator(tool_functions()["current_time"].output_schema).validate(result.structured)
    assert result.structured["timezone"] == "Asia/Kolkata"
    assert result.structured["utc_offset"] == "+05:30"
    assert datetime.fromisoformat(result.structured["iso"]).utcoffset() is not None


async def test_current_time_defaults_to_utc(ctx: ToolCallContext) -> None:
    result = await run("current_time", {}, ctx)

    assert result.structured["timezone"] == "UTC"
    assert result.structured["utc_offset"] == "+00:00"


@pytest.mark.parametrize("zone", ["Mars/Olympus", "../../etc/passwd"])
async def test_current_time_rejects_unknown_zones(zone: str, ctx: ToolCallContext) -> None:
    with pytest.raises(ToolError, match="Unknown time zone"):
        await run("current_time", {"timezone": zone}, ctx)


async def test_sleep_with_progress_reports_each_step_and_logs(
    ctx: ToolCallContext, sent: Sent
) -> None:
    result = await run("sleep_with_progress", {"seconds": 0.03, "steps": 3}, ctx)

    assert result == ToolResult.text("Slept 0.03 seconds in 3 steps.")
    progress = [m["params"] for m in sent.messages if m["method"] == "notifications/progress"]
    assert progress == [
        {
            "progressToken": "progress-1",
            "progress": step,
            "total": 3,
            "message": f"Step {step} of 3",
        }
        for step in (1, 2, 3)
    ]
    assert sent.methods()[0] == "notifications/message"
    assert sent.methods()[-1] == "notifications/message"


@pytest.mark.parametrize(
    "arguments",
    [{"seconds": 61}, {"seconds": -1}, {"seconds": 1, "steps": 0}, {"seconds": 1, "steps": 101}],
)
async def test_sleep_with_progress_enforces_its_bounds(
    arguments: dict[str, Any], ctx: ToolCallContext
) -> None:
    # The function's own schema holds whatever schema its tool row publishes.
    with pytest.raises(ToolError, match=r"^Invalid arguments: at '(seconds|steps)': -?\d+ is "):
        await run("sleep_with_progress", arguments, ctx)


@pytest.mark.parametrize("seconds", [0, 24 * 3600 + 1])
async def test_countdown_enforces_its_bounds(seconds: int, ctx: ToolCallContext) -> None:
    # A schema edited in the admin must not lift the limit: the function's own schema holds.
    with pytest.raises(ToolError, match=r"^Invalid arguments: at 'seconds': \d+ is "):
        await run("countdown", {"seconds": seconds}, ctx)


async def test_word_count_counts_words_characters_and_lines(ctx: ToolCallContext) -> None:
    result = await run("word_count", {"text": "one two\nthree"}, ctx)

    assert result.structured == {"words": 3, "characters": 13, "lines": 2}


async def test_json_format_pretty_prints_and_compacts(ctx: ToolCallContext) -> None:
    pretty = await run("json_format", {"json": '{"b":1,"a":[1,2]}', "sort_keys": True}, ctx)
    compact = await run("json_format", {"json": '{ "b" : 1 }', "indent": 0}, ctx)

    assert pretty == ToolResult.text('{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}')
    assert compact == ToolResult.text('{"b":1}')


async def test_json_format_reports_where_the_json_is_invalid(ctx: ToolCallContext) -> None:
    with pytest.raises(ToolError) as caught:
        await run("json_format", {"json": '{\n  "a": 1,\n}'}, ctx)

    assert caught.value.message == (
        "Invalid JSON: Expecting property name enclosed in double quotes at line 3 column 1."
    )


async def test_uuid_returns_a_random_version_4_uuid(ctx: ToolCallContext) -> None:
    first = await run("uuid", {}, ctx)
    second = await run("uuid", {}, ctx)

    value = uuid.UUID(first.content[0]["text"])
    assert value.version == 4
    assert first != second


def test_echo_resource_function_returns_the_variables_as_json() -> None:
    contents = resource_functions()["echo"].function("demo://echo/a", {"x": "a"})

    assert contents[0]["uri"] == "demo://echo/a"
    assert contents[0]["mimeType"] == "application/json"
    assert json.loads(contents[0]["text"]) == {"uri": "demo://echo/a", "variables": {"x": "a"}}
