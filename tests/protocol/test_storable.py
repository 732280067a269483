"""Strings the server stores refuse NUL and unpaired surrogates with a protocol error.

Our choice (issue #13, item 6): PostgreSQL refuses U+0000 and orjson refuses lone surrogates,
so such a string reaching a row used to end as an internal error. Each value that is stored
is now refused where it enters, with -32602 (-32600 for a request id); other strings pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from mcp_app.protocol import errors
from mcp_app.protocol.catalog import CatalogSnapshot, EndpointInfo, ToolDef
from mcp_app.protocol.context import RequestContext, ToolCallContext
from mcp_app.protocol.dispatch import handle_request
from mcp_app.protocol.errors import InvalidParams, InvalidRequest
from mcp_app.protocol.handlers.lifecycle import parse_initialize
from mcp_app.protocol.inbound import check_modern_request
from mcp_app.protocol.jsonrpc import Request, decode
from mcp_app.protocol.results import ToolResult
from mcp_app.protocol.storable import is_storable_text, unstorable_path

from .conftest import InMemorySessionStore

MakeContext = Callable[..., RequestContext]
NUL = "\u0000"
SURROGATE = "\ud800"


@pytest.mark.parametrize(
    ("text", "storable"),
    [("plain", True), ("émoji 🙂", True), ("", True), (f"a{NUL}", False), (SURROGATE, False)],
)
def test_nul_and_lone_surrogates_are_the_only_unstorable_text(text: str, storable: bool) -> None:
    assert is_storable_text(text) is storable


def test_the_path_of_the_first_unstorable_string_is_named() -> None:
    value = {"ok": ["x", {"deep": f"y{NUL}"}]}

    assert unstorable_path(value, "params") == "params.ok[1].deep"
    assert unstorable_path({f"k{NUL}": 1}, "params") == "params (a member name)"
    assert unstorable_path({"k": [1, 2.5, None, True]}, "params") is None


def test_a_deeply_nested_value_is_walked_without_recursion() -> None:
    value: Any = NUL
    for _ in range(5000):
        value = [value]

    assert unstorable_path(value, "v") == "v" + "[0]" * 5000


@pytest.mark.parametrize(
    "params",
    [
        {"protocolVersion": "2025-11-25", "clientInfo": {"name": f"a{NUL}", "version": "1"}},
        {"protocolVersion": "2025-11-25", "capabilities": {f"x{NUL}": {}}},
        {"protocolVersion": "2025-11-25", "capabilities": {"roots": {"note": SURROGATE}}},
    ],
)
def test_initialize_refuses_client_info_or_capabilities_it_cannot_store(
    params: dict[str, Any],
) -> None:
    with pytest.raises(InvalidParams, match="cannot store"):
        parse_initialize(params)


def test_initialize_with_other_unusual_text_still_works() -> None:
    params = {"protocolVersion": "2025-11-25", "clientInfo": {"name": "a\u0001\ufffd🙂"}}

    assert parse_initialize(params)[2] == {"name": "a\u0001\ufffd🙂"}


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc":"2.0","id":"a\\u0000","method":"ping"}',
        b'{"jsonrpc":"2.0","id":"\\u0000","result":{}}',
        b'{"jsonrpc":"2.0","id":"\\u0000","error":{"code":1,"message":"m"}}',
    ],
)
def test_an_id_with_nul_is_invalid_request_answered_with_a_null_id(body: bytes) -> None:
    with pytest.raises(InvalidRequest, match="NUL") as caught:
        decode(body)

    assert caught.value.code == errors.INVALID_REQUEST
    assert caught.value.request_id is None


async def test_subscribing_to_a_uri_with_nul_is_invalid_params(
    make_ctx: MakeContext, session_store: InMemorySessionStore
) -> None:
    ctx = make_ctx("2025-11-25")

    with pytest.raises(InvalidParams, match=r"params\.uri"):
        await handle_request(ctx, "resources/subscribe", {"uri": NUL})
    assert await handle_request(ctx, "resources/unsubscribe", {"uri": NUL}) == {}
    assert session_store.subscriptions == {}


@pytest.mark.parametrize("token", [f"p{NUL}", SURROGATE])
async def test_a_progress_token_with_nul_is_invalid_params(
    make_ctx: MakeContext, token: str
) -> None:
    ctx = make_ctx("2025-11-25", progress_token=token)

    with pytest.raises(InvalidParams, match="progressToken"):
        await handle_request(ctx, "tools/list", {"_meta": {"progressToken": token}})


async def _echo(arguments: Mapping[str, Any], ctx: ToolCallContext) -> ToolResult:
    return ToolResult.text(str(arguments["text"]))


def _catalog(execution: str) -> CatalogSnapshot:
    tool = ToolDef(
        name="echo",
        description="Echo",
        input_schema={"type": "object"},
        execution=execution,
        binding=_echo,
    )
    return CatalogSnapshot(endpoint=EndpointInfo(slug="s"), tools=(tool,))


async def test_a_background_call_refuses_arguments_it_cannot_store(
    make_ctx: MakeContext,
) -> None:
    ctx = make_ctx("2025-11-25", catalog=_catalog("background"))

    with pytest.raises(InvalidParams, match=r"params\.arguments\.text"):
        await handle_request(ctx, "tools/call", {"name": "echo", "arguments": {"text": NUL}})


async def test_an_inline_call_takes_any_string(make_ctx: MakeContext) -> None:
    ctx = make_ctx("2025-11-25", catalog=_catalog("inline"))

    result = await handle_request(ctx, "tools/call", {"name": "echo", "arguments": {"text": NUL}})

    assert result["content"] == [{"type": "text", "text": NUL}]


@pytest.mark.parametrize("method", ["tasks/get", "tasks/cancel"])
async def test_a_task_id_with_nul_is_invalid_params(make_ctx: MakeContext, method: str) -> None:
    ctx = make_ctx("2025-11-25")

    with pytest.raises(InvalidParams, match=r"params\.taskId"):
        await handle_request(ctx, method, {"taskId": NUL})


def test_modern_client_info_with_nul_is_invalid_params() -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": NUL, "version": "1"},
    }
    request = Request(id=1, method="tools/list", params={"_meta": meta})
    headers = {"mcp-protocol-version": ["2026-07-28"], "mcp-method": ["tools/list"]}

    with pytest.raises(InvalidParams, match="clientInfo"):
        check_modern_request(request, headers, _catalog("inline"))
