"""Prompts: listing, rendering with arguments, content kinds and errors."""

from __future__ import annotations

from collections.abc import Callable

import mcp_types._v2025_11_25 as v2025
import mcp_types._v2026_07_28 as v2026
import pytest

from mcp_app.protocol.catalog import CatalogSnapshot, EndpointInfo, PromptDef, PromptMessageDef
from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.dispatch import handle_request
from mcp_app.protocol.errors import InvalidParams
from mcp_app.protocol.handlers.prompts import render

MakeContext = Callable[..., RequestContext]


@pytest.mark.parametrize("version", ["2024-11-05", "2026-07-28"])
async def test_prompts_list_validates(make_ctx: MakeContext, version: str) -> None:
    result = await handle_request(make_ctx(version), "prompts/list", None)
    assert [p["name"] for p in result["prompts"]] == ["greet"]
    (v2026 if version == "2026-07-28" else v2025).ListPromptsResult.model_validate(result)


@pytest.mark.parametrize("version", ["2025-06-18", "2026-07-28"])
async def test_get_renders_arguments_into_messages(make_ctx: MakeContext, version: str) -> None:
    result = await handle_request(
        make_ctx(version),
        "prompts/get",
        {"name": "greet", "arguments": {"name": "Ada", "mood": "warm"}},
    )
    assert result["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Say hello to Ada in a warm way."}},
        {
            "role": "assistant",
            "content": {"type": "text", "text": "Literal {braces} and {unknown}."},
        },
    ]
    assert result["description"] == "Greets someone"
    (v2026 if version == "2026-07-28" else v2025).GetPromptResult.model_validate(result)
    assert ("resultType" in result) is (version == "2026-07-28")


async def test_omitted_optional_argument_renders_empty(make_ctx: MakeContext) -> None:
    result = await handle_request(
        make_ctx(), "prompts/get", {"name": "greet", "arguments": {"name": "Ada"}}
    )
    assert result["messages"][0]["content"]["text"] == "Say hello to Ada in a  way."


@pytest.mark.spec("2025-11-25", "server/prompts", "missing required arguments: -32602")
async def test_missing_required_argument_is_invalid_params(make_ctx: MakeContext) -> None:
    with pytest.raises(InvalidParams) as caught:
        await handle_request(make_ctx(), "prompts/get", {"name": "greet"})
    assert caught.value.message == "Missing required arguments: name"


@pytest.mark.spec("2025-11-25", "server/prompts", "invalid prompt name: -32602")
async def test_unknown_prompt_is_invalid_params(make_ctx: MakeContext) -> None:
    with pytest.raises(InvalidParams):
        await handle_request(make_ctx(), "prompts/get", {"name": "nope"})


@pytest.mark.parametrize("arguments", [["Ada"], {"name": 5}, "Ada"])
async def test_arguments_must_be_a_string_map(make_ctx: MakeContext, arguments: object) -> None:
    with pytest.raises(InvalidParams):
        await handle_request(make_ctx(), "prompts/get", {"name": "greet", "arguments": arguments})


def test_render_handles_literal_braces_and_unknown_placeholders() -> None:
    assert render("{{x}} {a} {b} }} {{", {"a": "1"}) == "{x} 1 {b} } {"
    assert render('{"json": {a}}', {"a": "1"}) == '{"json": 1}'


async def test_every_message_kind_becomes_its_content_block(make_ctx: MakeContext) -> None:
    prompt = PromptDef(
        name="media",
        messages=(
            PromptMessageDef(role="user", kind="image", data="iVBO", mime_type="image/png"),
            PromptMessageDef(role="user", kind="audio", data="UklG", mime_type="audio/wav"),
            PromptMessageDef(role="user", kind="resource", uri="doc://{x}", text="body {x}",
                             mime_type="text/plain"),
            PromptMessageDef(role="user", kind="resource", uri="bin://b", data="AAEC"),
            PromptMessageDef(role="assistant", kind="resource_link", uri="doc://{x}", name="doc"),
        ),
    )  # fmt: skip
    catalog = CatalogSnapshot(endpoint=EndpointInfo(slug="m"), prompts=(prompt,))
    params = {"name": "media", "arguments": {"x": "ignored: not declared"}}
    result = await handle_request(make_ctx("2025-11-25", catalog=catalog), "prompts/get", params)
    v2025.GetPromptResult.model_validate(result)
    assert [m["content"] for m in result["messages"]] == [
        {"type": "image", "data": "iVBO", "mimeType": "image/png"},
        {"type": "audio", "data": "UklG", "mimeType": "audio/wav"},
        {"type": "resource",
         "resource": {"uri": "doc://{x}", "mimeType": "text/plain", "text": "body {x}"}},
        {"type": "resource", "resource": {"uri": "bin://b", "blob": "AAEC"}},
        {"type": "resource_link", "uri": "doc://{x}", "name": "doc"},
    ]  # fmt: skip
    old = await handle_request(make_ctx("2024-11-05", catalog=catalog), "prompts/get", params)
    assert [m["content"]["type"] for m in old["messages"]] == [
        "image", "text", "resource", "resource", "text",
    ]  # fmt: skip
