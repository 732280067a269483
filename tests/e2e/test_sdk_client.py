"""The official ``mcp`` SDK client against a real server, in its legacy and its 2026 mode.

The SDK parses every response into its own pydantic types, so each call here also checks
that the server's answer is valid for the negotiated revision.
"""

from __future__ import annotations

import asyncio

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.types import PromptReference, ResourceTemplateReference

from mcp_app.protocol import errors

# Every test reaches the database through the live server: pytest-django must set it up.
pytestmark = pytest.mark.django_db


async def test_connects_and_reports_the_negotiated_revision(e2e_url, mode):
    async with asyncio.timeout(20), Client(e2e_url, mode=mode) as client:
        expected = "2025-11-25" if mode == "legacy" else "2026-07-28"
        assert client.session.protocol_version == expected


async def test_lists_tools_of_both_kinds_with_schemas_verbatim(e2e_url, mode):
    async with asyncio.timeout(20), Client(e2e_url, mode=mode) as client:
        result = await client.list_tools()
    tools = {tool.name: tool for tool in result.tools}
    assert sorted(tools) == [
        "add",
        "current_time",
        "echo",
        "greet",
        "profile",
        "sleep_with_progress",
    ]
    profile = tools["profile"]
    assert profile.input_schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert profile.input_schema["$defs"] == {"age": {"type": "integer", "minimum": 0}}
    assert profile.input_schema["additionalProperties"] is False
    assert profile.output_schema["required"] == ["name", "age"]
    assert profile.title == "Profile card"


async def test_calls_a_python_tool(e2e_url, mode):
    async with asyncio.timeout(20), Client(e2e_url, mode=mode) as client:
        result = await client.call_tool("add", {"a": 2, "b": 40})
    assert not result.is_error
    assert result.structured_content == {"sum": 42}


async def test_calls_a_template_tool_for_text_and_for_json(e2e_url, mode):
    async with asyncio.timeout(20), Client(e2e_url, mode=mode) as client:
        greeting = await client.call_tool("greet", {"name": "Ada"})
        profile = await client.call_tool("profile", {"name": "Ada", "age": 36})
    assert greeting.content[0].text == "Hello Ada!"
    assert profile.structured_content == {"name": "Ada", "age": 36}


async def test_invalid_arguments_are_a_tool_error_naming_the_field(e2e_url, mode):
    async with asyncio.timeout(20), Client(e2e_url, mode=mode) as client:
        result = await client.call_tool("profile", {"name": "Ada", "age": -1})
    assert result.is_error
    assert "age" in result.content[0].text


async def test_unknown_tool_is_invalid_params(e2e_url, mode):
    async with asyncio.timeout(20), Client(e2e_url, mode=mode) as client:
        with pytest.raises(MCPError) as excinfo:
            await client.call_tool("no_such_tool", {})
    assert excinfo.value.error.code == errors.INVALID_PARAMS


async def test_progress_notifications_arrive_before_the_result(e2e_url, mode):
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with asyncio.timeout(20), Client(e2e_url, mode=mode) as client:
        result = await client.call_tool(
            "sleep_with_progress", {"seconds": 0.2, "steps": 4}, progress_callback=on_progress
        )
    assert not result.is_error
    assert [p for p, _, _ in seen] == [1, 2, 3, 4]
    assert seen[-1] == (4, 4, "Step 4 of 4")


async def test_reads_a_resource_and_a_templated_resource(e2e_url, mode):
    async with asyncio.timeout(20), Client(e2e_url, mode=mode) as client:
        resources = await client.list_resources()
        templates = await client.list_resource_templates()
        readme = await client.read_resource("e2e://readme")
        note = await client.read_resource("e2e://notes/channels")
    assert [r.uri for r in resources.resources] == ["e2e://readme"]
    assert [t.uri_template for t in templates.resource_templates] == ["e2e://notes/{topic}"]
    assert readme.contents[0].text == "# Hello\n"
    assert readme.contents[0].mime_type == "text/markdown"
    assert note.contents[0].text == "Notes about channels"


async def test_reading_an_unknown_resource_is_an_error(e2e_url, mode):
    async with asyncio.timeout(20), Client(e2e_url, mode=mode) as client:
        with pytest.raises(MCPError) as excinfo:
            await client.read_resource("e2e://missing")
    expected = errors.RESOURCE_NOT_FOUND if mode == "legacy" else errors.INVALID_PARAMS
    assert excinfo.value.error.code == expected


async def test_gets_a_prompt_with_arguments_substituted(e2e_url, mode):
    async with asyncio.timeout(20), Client(e2e_url, mode=mode) as client:
        prompts = await client.list_prompts()
        result = await client.get_prompt("summarize", {"topic": "Django", "style": "terse"})
    assert [p.name for p in prompts.prompts] == ["summarize"]
    assert [a.name for a in prompts.prompts[0].arguments] == ["topic", "style"]
    assert [m.role for m in result.messages] == ["user", "assistant"]
    assert result.messages[0].content.text == "Summarize Django in a terse style."


async def test_prompt_missing_a_required_argument_is_invalid_params(e2e_url, mode):
    async with asyncio.timeout(20), Client(e2e_url, mode=mode) as client:
        with pytest.raises(MCPError) as excinfo:
            await client.get_prompt("summarize", {"style": "terse"})
    assert excinfo.value.error.code == errors.INVALID_PARAMS


async def test_completes_prompt_and_template_arguments_by_prefix(e2e_url, mode):
    async with asyncio.timeout(20), Client(e2e_url, mode=mode) as client:
        prompt = await client.complete(
            PromptReference(type="ref/prompt", name="summarize"), {"name": "topic", "value": "dj"}
        )
        template = await client.complete(
            ResourceTemplateReference(type="ref/resource", uri="e2e://notes/{topic}"),
            {"name": "topic", "value": "C"},
        )
    assert prompt.completion.values == ["django", "django-channels"]
    assert template.completion.values == ["channels", "celery"]


async def test_paginates_250_tools_without_gaps_or_duplicates(e2e_url, mode):
    url = e2e_url.replace("/mcp/e2e", "/mcp/e2e-many")
    names: list[str] = []
    pages = 0
    async with asyncio.timeout(30), Client(url, mode=mode) as client:
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor, cache_mode="bypass")
            pages += 1
            names.extend(tool.name for tool in page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
    assert names == [f"tool_{i:04d}" for i in range(250)]
    assert pages == 3


async def test_legacy_logging_follows_the_session_level(e2e_url):
    messages: list[str] = []

    async def on_log(params) -> None:
        messages.append(params.data)

    async with (
        asyncio.timeout(20),
        Client(e2e_url, mode="legacy", logging_callback=on_log) as client,
    ):
        await client.call_tool("sleep_with_progress", {"seconds": 0, "steps": 1})
        assert messages == []
        # The SDK warns that logging is deprecated in 2026-07-28; this is a 2025-11-25 session.
        with pytest.warns(MCPDeprecationWarning):
            await client.set_logging_level("info")
        await client.call_tool("sleep_with_progress", {"seconds": 0, "steps": 1})
    assert messages == ["Sleeping 0 s in 1 steps", "Done sleeping"]


async def test_modern_logging_only_when_the_request_asks(e2e_url):
    messages: list[str] = []

    async def on_log(params) -> None:
        messages.append(params.data)

    async with (
        asyncio.timeout(20),
        Client(e2e_url, mode="2026-07-28", logging_callback=on_log, log_level="info") as client,
    ):
        await client.call_tool("sleep_with_progress", {"seconds": 0, "steps": 1})
    assert messages == ["Sleeping 0 s in 1 steps", "Done sleeping"]
