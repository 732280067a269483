"""Per-revision shapes of definitions and content, checked against the SDK's wire models."""

from __future__ import annotations

import mcp_types._v2025_11_25 as v2025
import mcp_types._v2026_07_28 as v2026
import pytest

from mcp_app.protocol.catalog import CatalogSnapshot, ToolDef
from mcp_app.protocol.results import ToolResult
from mcp_app.protocol.shaping import (
    shape_call_result,
    shape_content,
    shape_prompt,
    shape_resource,
    shape_resource_template,
    shape_tool,
)

LEGACY = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
ALL = (*LEGACY, "2026-07-28")


def sdk_models(version: str) -> object:
    return v2026 if version == "2026-07-28" else v2025


@pytest.mark.parametrize("version", ALL)
def test_tool_shape_validates_against_the_sdk_model(catalog: CatalogSnapshot, version: str) -> None:
    for tool in catalog.tools:
        sdk_models(version).Tool.model_validate(shape_tool(tool, version))  # type: ignore[attr-defined]


@pytest.mark.spec("2025-03-26", "server/tools", "annotations appear in 2025-03-26")
def test_tool_fields_follow_the_revision_that_introduced_them(catalog: CatalogSnapshot) -> None:
    add = catalog.tool("add")
    assert add is not None
    assert shape_tool(add, "2024-11-05") == {
        "name": "add",
        "description": "Add two numbers",
        "inputSchema": add.input_schema,
    }
    assert set(shape_tool(add, "2025-03-26")) == {
        "name",
        "description",
        "inputSchema",
        "annotations",
    }
    assert set(shape_tool(add, "2025-06-18")) == {
        "name", "title", "description", "inputSchema", "annotations", "_meta",
    }  # fmt: skip
    assert shape_tool(add, "2025-11-25") == {
        "name": "add",
        "title": "Adder",
        "description": "Add two numbers",
        "inputSchema": add.input_schema,
        "annotations": {"readOnlyHint": True, "title": "Add"},
        "_meta": {"example.com/owner": "math"},
        "icons": [{"src": "https://mcphost.example/add.png", "mimeType": "image/png"}],
    }


def test_input_schema_goes_out_verbatim() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"n": {"type": "number"}},
        "properties": {"x": {"$ref": "#/$defs/n"}},
        "additionalProperties": False,
    }
    tool = ToolDef(name="t", description="", input_schema=schema)
    for version in ALL:
        assert shape_tool(tool, version)["inputSchema"] == schema


@pytest.mark.spec("2025-06-18", "server/tools", "outputSchema from 2025-06-18, object root")
def test_output_schema_is_withheld_where_the_revision_cannot_carry_it() -> None:
    obj = ToolDef(name="o", description="", input_schema={"type": "object"},
                  output_schema={"type": "object"})  # fmt: skip
    arr = ToolDef(name="a", description="", input_schema={"type": "object"},
                  output_schema={"type": "array"})  # fmt: skip
    assert "outputSchema" not in shape_tool(obj, "2025-03-26")
    assert shape_tool(obj, "2025-06-18")["outputSchema"] == {"type": "object"}
    assert "outputSchema" not in shape_tool(arr, "2025-11-25")
    assert shape_tool(arr, "2026-07-28")["outputSchema"] == {"type": "array"}


@pytest.mark.parametrize("version", ALL)
def test_resource_and_template_shapes_validate(catalog: CatalogSnapshot, version: str) -> None:
    models = sdk_models(version)
    for resource in catalog.resources:
        models.Resource.model_validate(shape_resource(resource, version))  # type: ignore[attr-defined]
    for template in catalog.resource_templates:
        models.ResourceTemplate.model_validate(  # type: ignore[attr-defined]
            shape_resource_template(template, version)
        )
    for prompt in catalog.prompts:
        models.Prompt.model_validate(shape_prompt(prompt, version))  # type: ignore[attr-defined]


def test_titles_and_icons_appear_only_from_their_revisions(catalog: CatalogSnapshot) -> None:
    readme = catalog.resources[1]
    assert readme.uri == "file:///readme.txt"
    assert shape_resource(readme, "2025-03-26") == {
        "uri": "file:///readme.txt",
        "name": "readme",
        "description": "The read-me",
        "mimeType": "text/plain",
        "size": 11,
    }
    assert shape_resource(readme, "2025-06-18")["title"] == "Read me"
    assert "icons" not in shape_resource(readme, "2025-06-18")
    assert shape_resource(readme, "2025-11-25")["icons"] == [
        {"src": "https://mcphost.example/doc.png"}
    ]
    greet = catalog.prompt("greet")
    assert greet is not None
    assert shape_prompt(greet, "2024-11-05") == {
        "name": "greet",
        "description": "Greets someone",
        "arguments": [
            {"name": "name", "required": True},
            {"name": "mood", "description": "How to sound"},
        ],
    }
    assert shape_prompt(greet, "2025-06-18")["arguments"][0] == {
        "name": "name",
        "title": "Name",
        "required": True,
    }


AUDIO = {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
LINK = {
    "type": "resource_link",
    "uri": "file:///a.txt",
    "name": "a",
    "description": "A file",
    "title": "A",
}


@pytest.mark.spec("2025-03-26", "server/tools", "audio content appears in 2025-03-26")
def test_audio_becomes_a_text_note_for_2024_11_05() -> None:
    assert shape_content(AUDIO, "2024-11-05") == {
        "type": "text",
        "text": "[audio content (audio/wav) omitted: not supported by protocol 2024-11-05]",
    }
    assert shape_content(AUDIO, "2025-03-26") == AUDIO


@pytest.mark.spec("2025-06-18", "server/tools", "resource_link content appears in 2025-06-18")
def test_resource_link_becomes_text_before_2025_06_18() -> None:
    assert shape_content(LINK, "2025-03-26") == {
        "type": "text",
        "text": "Resource: A <file:///a.txt>\nA file",
    }
    assert shape_content(LINK, "2025-06-18") == LINK


def test_content_annotations_lose_last_modified_before_2025_06_18() -> None:
    block = {
        "type": "text",
        "text": "x",
        "annotations": {"audience": ["user"], "lastModified": "2025-01-01T00:00:00Z"},
        "_meta": {"k": 1},
    }
    assert shape_content(block, "2025-03-26") == {
        "type": "text",
        "text": "x",
        "annotations": {"audience": ["user"]},
    }
    assert shape_content(block, "2025-06-18") == block


@pytest.mark.parametrize("version", ALL)
def test_call_result_validates_against_the_sdk_model(version: str) -> None:
    result = ToolResult(
        content=[{"type": "text", "text": "{}"}, AUDIO, LINK], structured={"tempC": 1}
    )
    sdk_models(version).CallToolResult.model_validate(  # type: ignore[attr-defined]
        {**shape_call_result(result, version), "resultType": "complete"}
    )


def test_structured_content_follows_the_revision() -> None:
    obj = ToolResult(content=[{"type": "text", "text": "{}"}], structured={"a": 1})
    arr = ToolResult(content=[{"type": "text", "text": "[1]"}], structured=[1])
    assert "structuredContent" not in shape_call_result(obj, "2025-03-26")
    assert shape_call_result(obj, "2025-06-18")["structuredContent"] == {"a": 1}
    assert "structuredContent" not in shape_call_result(arr, "2025-11-25")
    assert shape_call_result(arr, "2026-07-28")["structuredContent"] == [1]
    null = ToolResult(content=[{"type": "text", "text": "null"}], structured=None)
    assert shape_call_result(null, "2026-07-28")["structuredContent"] is None
