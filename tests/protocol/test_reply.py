"""dispatch.reply: one value per request that the call log reads instead of the wire body.

Also the two rules the transport asks the protocol for: which target a request names, and
which GET/DELETE versions are refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from mcp_app.protocol.catalog import ToolDef
from mcp_app.protocol.context import RequestContext, ToolCallContext
from mcp_app.protocol.dispatch import reply
from mcp_app.protocol.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    McpError,
)
from mcp_app.protocol.inbound import stream_method_refusal
from mcp_app.protocol.jsonrpc import Request
from mcp_app.protocol.methods import target_of
from mcp_app.protocol.results import Outcome, ToolResult, ToolTimeout

MakeContext = Callable[..., RequestContext]


def call(name: str, arguments: Mapping[str, Any] | None = None) -> Request:
    return Request(id=7, method="tools/call", params={"name": name, "arguments": arguments or {}})


async def _slow(arguments: Mapping[str, Any], ctx: ToolCallContext) -> ToolResult:
    raise ToolTimeout("Tool timed out after 1 s")


async def _ran_elsewhere(arguments: Mapping[str, Any], ctx: ToolCallContext) -> ToolResult:
    # What the background runner returns: the worker's result and where it ran.
    result = ToolResult.text("no structured content")
    result.detail = {"task_id": "t-1", "worker": "w@host"}
    return result


async def _failed_elsewhere(arguments: Mapping[str, Any], ctx: ToolCallContext) -> ToolResult:
    # A background call whose tool ended in a protocol error on its worker.
    error = McpError("The worker said no")
    error.detail = {"task_id": "t-2", "worker": "w@host"}
    raise error


def with_tools(ctx: RequestContext, *tools: ToolDef) -> RequestContext:
    ctx.catalog = dataclasses.replace(ctx.catalog, tools=(*ctx.catalog.tools, *tools))
    return ctx


@pytest.mark.parametrize("version", ["2025-06-18", "2026-07-28"])
async def test_a_result_is_ok_and_names_its_tool(make_ctx: MakeContext, version: str) -> None:
    answer = await reply(make_ctx(version), call("add", {"a": 1, "b": 2}))
    assert (answer.outcome, answer.error, answer.target, answer.detail) == (
        Outcome.OK,
        None,
        "add",
        None,
    )
    assert answer.body["id"] == 7
    assert answer.result["content"] == [{"type": "text", "text": "3"}]


@pytest.mark.parametrize(
    ("name", "arguments"), [("fail", {}), ("add", {"a": "one", "b": 2})], ids=["raised", "args"]
)
async def test_tool_errors_are_results_that_end_as_tool_errors(
    make_ctx: MakeContext, name: str, arguments: dict[str, Any]
) -> None:
    answer = await reply(make_ctx(), call(name, arguments))
    assert answer.error is None
    assert answer.outcome is Outcome.TOOL_ERROR
    assert answer.result["isError"] is True


async def test_a_timeout_reads_as_a_tool_error_but_ends_timed_out(make_ctx: MakeContext) -> None:
    ctx = with_tools(
        make_ctx(),
        ToolDef(name="slow", description="", input_schema={"type": "object"}, binding=_slow),
    )
    answer = await reply(ctx, call("slow"))
    assert answer.result["isError"] is True
    assert answer.outcome is Outcome.TIMED_OUT


async def test_where_a_call_ran_reaches_the_reply(make_ctx: MakeContext) -> None:
    tool = ToolDef(
        name="remote",
        description="Runs on a worker",
        input_schema={"type": "object"},
        binding=_ran_elsewhere,
    )
    answer = await reply(with_tools(make_ctx(), tool), call("remote"))
    assert answer.outcome is Outcome.OK
    assert answer.detail == {"task_id": "t-1", "worker": "w@host"}


async def test_where_a_failed_call_ran_reaches_the_reply(make_ctx: MakeContext) -> None:
    tool = ToolDef(
        name="remote", description="", input_schema={"type": "object"}, binding=_failed_elsewhere
    )
    answer = await reply(with_tools(make_ctx(), tool), call("remote"))
    assert answer.outcome is Outcome.PROTOCOL_ERROR
    assert answer.error is not None and answer.error.message == "The worker said no"
    assert answer.detail == {"task_id": "t-2", "worker": "w@host"}


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        (Request(id=1, method="tools/call", params={"name": "nope"}), INVALID_PARAMS),
        (Request(id=1, method="tools/call", params={"name": "crash"}), INTERNAL_ERROR),
        (Request(id=1, method="no/such", params=None), METHOD_NOT_FOUND),
    ],
    ids=["unknown tool", "crash", "unknown method"],
)
async def test_protocol_errors_carry_the_error_in_body_and_reply(
    make_ctx: MakeContext, request_: Request, code: int
) -> None:
    answer = await reply(make_ctx(), request_)
    assert answer.outcome is Outcome.PROTOCOL_ERROR
    assert answer.error is not None and answer.error.code == code
    assert answer.body == {"jsonrpc": "2.0", "id": 1, "error": answer.error.to_error_object()}
    # A crash's own message never reaches the wire.
    assert "hunter2" not in str(answer.body)


@pytest.mark.parametrize(
    ("method", "params", "target"),
    [
        ("tools/call", {"name": "add"}, "add"),
        ("prompts/get", {"name": "greet"}, "greet"),
        ("resources/read", {"uri": "file:///a"}, "file:///a"),
        ("resources/subscribe", {"uri": "file:///a"}, "file:///a"),
        ("tools/call", {"name": 3}, None),
        ("tools/call", None, None),
        ("tools/list", {"name": "add"}, None),
    ],
)
def test_target_of(method: str, params: Any, target: str | None) -> None:
    assert target_of(method, params) == target


@pytest.mark.parametrize(
    ("version", "refusal"),
    [
        (None, None),
        ("2025-11-25", None),
        ("2024-11-05", None),
        ("2026-07-28", (405, "GET is not part of protocol 2026-07-28")),
        ("1999-01-01", (400, "Unsupported MCP-Protocol-Version: 1999-01-01")),
    ],
)
def test_get_and_delete_belong_to_the_legacy_era(
    version: str | None, refusal: tuple[int, str] | None
) -> None:
    assert stream_method_refusal("GET", version) == refusal
