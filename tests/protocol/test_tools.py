"""``tools/list`` and ``tools/call`` through dispatch, in every era."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import mcp_types._v2025_11_25 as v2025
import mcp_types._v2026_07_28 as v2026
import orjson
import pytest

from mcp_app.protocol import errors
from mcp_app.protocol.catalog import CatalogSnapshot, EndpointInfo, ToolDef
from mcp_app.protocol.context import RequestContext, ToolCallContext
from mcp_app.protocol.dispatch import handle_request
from mcp_app.protocol.errors import InternalError, InvalidParams
from mcp_app.protocol.results import ToolResult

from .conftest import SERVER_INFO, InMemoryToolRunner

MakeContext = Callable[..., RequestContext]
ALL = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")


def text_of(result: Mapping[str, Any]) -> str:
    return "".join(block["text"] for block in result["content"] if block["type"] == "text")


@pytest.mark.parametrize("version", ALL)
async def test_tools_list_returns_every_tool_in_name_order(
    make_ctx: MakeContext, version: str
) -> None:
    result = await handle_request(make_ctx(version), "tools/list", None)
    names = [tool["name"] for tool in result["tools"]]
    assert names == ["add", "crash", "echo", "fail", "steps", "weather"]
    assert "nextCursor" not in result
    if version == "2026-07-28":
        v2026.ListToolsResult.model_validate(result)
        assert (result["resultType"], result["ttlMs"], result["cacheScope"]) == (
            "complete",
            0,
            "public",
        )
        assert result["_meta"] == {"io.modelcontextprotocol/serverInfo": SERVER_INFO}
    else:
        v2025.ListToolsResult.model_validate(result)
        assert not {"resultType", "ttlMs", "cacheScope", "_meta"} & set(result)


@pytest.mark.parametrize("version", ALL)
async def test_call_runs_the_tool_with_its_arguments(
    make_ctx: MakeContext, tool_runner: InMemoryToolRunner, version: str
) -> None:
    result = await handle_request(
        make_ctx(version), "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}
    )
    assert result["content"] == [{"type": "text", "text": "5"}]
    assert result["isError"] is False
    assert tool_runner.calls == [("add", {"a": 2, "b": 3})]
    if version == "2026-07-28":
        v2026.CallToolResult.model_validate(result)
        assert result["resultType"] == "complete"
        assert "ttlMs" not in result
    else:
        v2025.CallToolResult.model_validate(result)
        assert "resultType" not in result


async def test_absent_arguments_mean_an_empty_object(
    make_ctx: MakeContext, tool_runner: InMemoryToolRunner
) -> None:
    await handle_request(make_ctx(), "tools/call", {"name": "fail"})
    assert tool_runner.calls == [("fail", {})]


@pytest.mark.parametrize("arguments", [[1, 2], "x", 3])
async def test_non_object_arguments_are_invalid_params(
    make_ctx: MakeContext, arguments: Any
) -> None:
    with pytest.raises(InvalidParams):
        await handle_request(make_ctx(), "tools/call", {"name": "add", "arguments": arguments})


@pytest.mark.spec("2025-11-25", "server/tools", "unknown tool is a protocol error -32602")
@pytest.mark.parametrize("version", ALL)
async def test_unknown_tool_is_invalid_params(make_ctx: MakeContext, version: str) -> None:
    with pytest.raises(InvalidParams) as caught:
        await handle_request(make_ctx(version), "tools/call", {"name": "nope"})
    assert caught.value.code == errors.INVALID_PARAMS


async def test_missing_name_is_invalid_params(make_ctx: MakeContext) -> None:
    with pytest.raises(InvalidParams):
        await handle_request(make_ctx(), "tools/call", {"arguments": {}})


@pytest.mark.spec("2025-11-25", "server/tools", "input validation errors are tool errors")
async def test_missing_required_argument_is_an_error_result_naming_it(
    make_ctx: MakeContext, tool_runner: InMemoryToolRunner
) -> None:
    result = await handle_request(make_ctx(), "tools/call", {"name": "add", "arguments": {"b": 1}})
    assert result["isError"] is True
    assert text_of(result) == "Invalid arguments: 'a' is a required property"
    assert tool_runner.calls == []


async def test_wrongly_typed_argument_is_an_error_result_with_its_path(
    make_ctx: MakeContext,
) -> None:
    result = await handle_request(
        make_ctx(), "tools/call", {"name": "add", "arguments": {"a": 1, "b": "x"}}
    )
    assert result["isError"] is True
    assert text_of(result) == "Invalid arguments: at 'b': 'x' is not of type 'number'"


async def test_tool_error_becomes_an_error_result(make_ctx: MakeContext) -> None:
    result = await handle_request(make_ctx(), "tools/call", {"name": "fail"})
    assert result == {
        "content": [{"type": "text", "text": "The upstream service said no"}],
        "isError": True,
    }


async def test_unexpected_failure_is_an_internal_error_that_leaks_nothing(
    make_ctx: MakeContext, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(InternalError) as caught:
        await handle_request(make_ctx(), "tools/call", {"name": "crash"})
    assert caught.value.to_error_object() == {"code": -32603, "message": "Tool failed"}
    assert "hunter2" not in caught.value.message
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [
        "Tool call failed"
    ]


@pytest.mark.spec("2025-06-18", "server/tools", "structured results SHOULD also be text")
async def test_structured_output_is_validated_and_mirrored_as_text(make_ctx: MakeContext) -> None:
    result = await handle_request(make_ctx("2025-06-18"), "tools/call", {"name": "weather"})
    assert result == {
        "content": [{"type": "text", "text": '{"tempC":21.5,"sky":"cloudy"}'}],
        "structuredContent": {"tempC": 21.5, "sky": "cloudy"},
        "isError": False,
    }


async def test_structured_output_reaches_older_clients_as_text(make_ctx: MakeContext) -> None:
    result = await handle_request(make_ctx("2025-03-26"), "tools/call", {"name": "weather"})
    assert result == {
        "content": [{"type": "text", "text": '{"tempC":21.5,"sky":"cloudy"}'}],
        "isError": False,
    }


def single_tool_catalog(tool: ToolDef) -> CatalogSnapshot:
    return CatalogSnapshot(endpoint=EndpointInfo(slug="one"), tools=(tool,))


def returning(result: ToolResult) -> Callable[..., Any]:
    async def run(arguments: Mapping[str, Any], ctx: ToolCallContext) -> ToolResult:
        return result

    return run


@pytest.mark.spec("2025-06-18", "server/tools", "structured content MUST conform to outputSchema")
@pytest.mark.parametrize(
    ("result", "message"),
    [
        (
            ToolResult.text("no structure"),
            "Tool output did not match its output schema: no structured content was returned",
        ),
        (
            ToolResult(structured={"tempC": "warm", "sky": "clear"}),
            "Tool output did not match its output schema: at 'tempC': 'warm' is not of type "
            "'number'",
        ),
    ],
)
async def test_output_not_matching_its_schema_is_an_error_result(
    make_ctx: MakeContext, result: ToolResult, message: str
) -> None:
    tool = ToolDef(
        name="w",
        description="",
        input_schema={"type": "object"},
        output_schema={"type": "object", "properties": {"tempC": {"type": "number"}}},
        binding=returning(result),
    )
    shaped = await handle_request(
        make_ctx(catalog=single_tool_catalog(tool)), "tools/call", {"name": "w"}
    )
    assert shaped["isError"] is True
    assert text_of(shaped) == message


async def test_error_result_skips_the_output_schema_check(make_ctx: MakeContext) -> None:
    tool = ToolDef(
        name="w",
        description="",
        input_schema={"type": "object"},
        output_schema={"type": "object"},
        binding=returning(ToolResult.error("upstream down")),
    )
    shaped = await handle_request(
        make_ctx(catalog=single_tool_catalog(tool)), "tools/call", {"name": "w"}
    )
    assert text_of(shaped) == "upstream down"


async def test_a_result_finished_on_a_worker_is_not_checked_again(make_ctx: MakeContext) -> None:
    """Our choice: the output schema is checked once, where the tool ran. A runner that ran
    the call elsewhere says where (``detail``); its result comes back as that worker
    finished it (here, one the schema would refuse, to show it is not looked at again)."""
    finished = ToolResult(
        content=[{"type": "text", "text": "as the worker left it"}],
        structured={"tempC": "warm"},
        detail={"task_id": "tsk_1", "worker": "w@host"},
    )
    tool = ToolDef(
        name="w",
        description="",
        input_schema={"type": "object"},
        output_schema={"type": "object", "properties": {"tempC": {"type": "number"}}},
        binding=returning(finished),
    )
    ctx = make_ctx("2025-11-25", catalog=single_tool_catalog(tool))
    shaped = await handle_request(ctx, "tools/call", {"name": "w"})
    assert shaped == {
        "content": [{"type": "text", "text": "as the worker left it"}],
        "structuredContent": {"tempC": "warm"},
        "isError": False,
    }


async def test_non_object_structured_output_reaches_modern_clients(make_ctx: MakeContext) -> None:
    tool = ToolDef(
        name="n",
        description="",
        input_schema={"type": "object"},
        output_schema={"type": "array", "items": {"type": "integer"}},
        binding=returning(ToolResult(structured=[1, 2])),
    )
    catalog = single_tool_catalog(tool)
    modern = await handle_request(
        make_ctx("2026-07-28", catalog=catalog), "tools/call", {"name": "n"}
    )
    assert modern["structuredContent"] == [1, 2]
    legacy = await handle_request(
        make_ctx("2025-11-25", catalog=catalog), "tools/call", {"name": "n"}
    )
    assert "structuredContent" not in legacy
    assert orjson.loads(text_of(legacy)) == [1, 2]


@pytest.mark.spec("2026-07-28", "basic/index", "serverInfo SHOULD be in every result's _meta")
async def test_modern_result_keeps_the_tools_meta_next_to_server_info(
    make_ctx: MakeContext,
) -> None:
    tool = ToolDef(
        name="m",
        description="",
        input_schema={"type": "object"},
        binding=returning(
            ToolResult(content=[{"type": "text", "text": "x"}], meta={"a.b/trace": "t"})
        ),
    )
    catalog = single_tool_catalog(tool)
    modern = await handle_request(
        make_ctx("2026-07-28", catalog=catalog), "tools/call", {"name": "m"}
    )
    assert modern["_meta"] == {"a.b/trace": "t", "io.modelcontextprotocol/serverInfo": SERVER_INFO}
    legacy = await handle_request(
        make_ctx("2025-11-25", catalog=catalog), "tools/call", {"name": "m"}
    )
    assert legacy["_meta"] == {"a.b/trace": "t"}


async def test_input_schema_dialect_defaults_to_2020_12(make_ctx: MakeContext) -> None:
    # prefixItems only exists in 2020-12: it must be enforced with no $schema given.
    schema = {
        "type": "object",
        "properties": {"pair": {"type": "array", "prefixItems": [{"type": "string"}]}},
    }
    tool = ToolDef(name="p", description="", input_schema=schema, binding=returning(ToolResult()))
    shaped = await handle_request(
        make_ctx(catalog=single_tool_catalog(tool)),
        "tools/call",
        {"name": "p", "arguments": {"pair": [1]}},
    )
    assert text_of(shaped) == "Invalid arguments: at 'pair.0': 1 is not of type 'string'"


async def test_remote_ref_is_never_fetched_and_fails_as_internal_error(
    make_ctx: MakeContext,
) -> None:
    schema = {"type": "object", "properties": {"x": {"$ref": "https://example.com/s.json"}}}
    tool = ToolDef(name="r", description="", input_schema=schema, binding=returning(ToolResult()))
    with pytest.raises(InternalError):
        await handle_request(
            make_ctx(catalog=single_tool_catalog(tool)),
            "tools/call",
            {"name": "r", "arguments": {"x": 1}},
        )


async def test_content_is_downgraded_for_older_revisions(make_ctx: MakeContext) -> None:
    tool = ToolDef(
        name="media",
        description="",
        input_schema={"type": "object"},
        binding=returning(
            ToolResult(
                content=[
                    {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
                    {"type": "resource_link", "uri": "file:///a", "name": "a"},
                ]
            )
        ),
    )
    catalog = single_tool_catalog(tool)
    old = await handle_request(
        make_ctx("2024-11-05", catalog=catalog), "tools/call", {"name": "media"}
    )
    assert [block["type"] for block in old["content"]] == ["text", "text"]
    new = await handle_request(
        make_ctx("2025-11-25", catalog=catalog), "tools/call", {"name": "media"}
    )
    assert [block["type"] for block in new["content"]] == ["audio", "resource_link"]


async def test_a_page_is_shaped_once_per_revision_and_then_served_as_it_is(
    make_ctx: MakeContext,
) -> None:
    """Our choice: pages are kept on the snapshot, so a large catalog is not reshaped."""
    first = await handle_request(make_ctx("2025-11-25"), "tools/list", None)
    again = await handle_request(make_ctx("2025-11-25"), "tools/list", None)
    older = await handle_request(make_ctx("2024-11-05"), "tools/list", None)

    assert again["tools"] is first["tools"]
    assert older["tools"] is not first["tools"]
    assert "title" not in older["tools"][0] and older["tools"] != first["tools"]
