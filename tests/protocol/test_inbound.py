"""Era classification and the 2026-07-28 request validation ladder."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from mcp_app.protocol import errors
from mcp_app.protocol.catalog import CatalogSnapshot, EndpointInfo
from mcp_app.protocol.errors import (
    HeaderMismatch,
    InvalidParams,
    MethodNotFound,
    UnsupportedProtocolVersion,
)
from mcp_app.protocol.inbound import (
    ModernEnvelope,
    ParamHeaderCache,
    Route,
    check_modern_notification,
    check_modern_request,
    classify,
    decode_header_value,
    find_invalid_x_mcp_header,
    progress_token_of,
)
from mcp_app.protocol.jsonrpc import Notification, Request, Response

MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "client", "version": "1"},
}


def b64(text: str) -> str:
    return f"=?base64?{base64.b64encode(text.encode()).decode()}?="


def modern_request(method: str, params: dict[str, Any] | None = None, **meta: Any) -> Request:
    body = dict(params or {})
    body["_meta"] = {**ENVELOPE, **meta}
    return Request(id=1, method=method, params=body)


def headers_for(request: Request, **extra: str | list[str]) -> dict[str, list[str]]:
    params = request.params or {}
    headers: dict[str, list[str]] = {
        "mcp-protocol-version": [params["_meta"]["io.modelcontextprotocol/protocolVersion"]],
        "mcp-method": [request.method],
    }
    name = params.get("uri") if request.method == "resources/read" else params.get("name")
    if name is not None and request.method in ("tools/call", "prompts/get", "resources/read"):
        headers["mcp-name"] = [name]
    for key, value in extra.items():
        headers[key.replace("_", "-")] = value if isinstance(value, list) else [value]
    return headers


# -- classify --------------------------------------------------------------------------------


@pytest.mark.spec("2026-07-28", "basic/versioning", "per-request _meta selects the modern era")
def test_envelope_in_meta_makes_a_request_modern() -> None:
    assert classify(modern_request("tools/list"), None) is Route.MODERN


def test_modern_header_alone_makes_a_request_modern() -> None:
    request = Request(id=1, method="tools/list", params=None)
    assert classify(request, MODERN) is Route.MODERN
    assert classify(request, "2099-01-01") is Route.MODERN


def test_initialize_without_envelope_opens_a_legacy_session() -> None:
    request = Request(id=1, method="initialize", params={"protocolVersion": MODERN})
    assert classify(request, None) is Route.INITIALIZE
    assert classify(request, "2025-06-18") is Route.INITIALIZE


@pytest.mark.spec("2026-07-28", "basic/versioning", "initialize with the modern envelope")
def test_initialize_carrying_the_envelope_is_modern() -> None:
    assert classify(modern_request("initialize"), None) is Route.MODERN


def test_legacy_traffic_is_legacy() -> None:
    progress_only = Request(id=1, method="tools/call", params={"_meta": {"progressToken": 1}})
    assert classify(progress_only, None) is Route.LEGACY
    assert classify(progress_only, "2025-11-25") is Route.LEGACY
    assert classify(Notification("notifications/initialized", None), "2025-06-18") is Route.LEGACY
    assert classify(Response(id=1, result={}), MODERN) is Route.LEGACY


def test_modern_notification_is_classified_modern() -> None:
    note = Notification("notifications/cancelled", {"_meta": dict(ENVELOPE)})
    assert classify(note, None) is Route.MODERN


# -- progress token ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "token"),
    [
        ({"_meta": {"progressToken": "p1"}}, "p1"),
        ({"_meta": {"progressToken": 5}}, 5),
        ({"_meta": {"progressToken": True}}, None),
        ({"_meta": {"progressToken": 1.5}}, None),
        ({"_meta": "x"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_progress_token_comes_from_meta(params: dict[str, Any] | None, token: Any) -> None:
    assert progress_token_of(params) == token


# -- the ladder --------------------------------------------------------------------------------


def test_valid_modern_request_yields_its_envelope(catalog: CatalogSnapshot) -> None:
    request = modern_request(
        "tools/list",
        progressToken="t",
        **{"io.modelcontextprotocol/logLevel": "warning"},
    )
    envelope = check_modern_request(request, headers_for(request), catalog)
    assert envelope == ModernEnvelope(
        version=MODERN,
        client_capabilities={},
        client_info={"name": "client", "version": "1"},
        log_level="warning",
    )


@pytest.mark.spec("2026-07-28", "basic/index", "missing _meta envelope is -32602")
@pytest.mark.parametrize(
    "params",
    [
        None,
        {},
        {"_meta": "nope"},
        {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}},
        {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}},
        {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": [],
            }
        },
    ],
)
def test_missing_or_malformed_envelope_is_invalid_params(
    catalog: CatalogSnapshot, params: dict[str, Any] | None
) -> None:
    request = Request(id=1, method="tools/list", params=params)
    headers = {"mcp-protocol-version": [MODERN], "mcp-method": ["tools/list"]}
    with pytest.raises(InvalidParams):
        check_modern_request(request, headers, catalog)


def test_client_info_is_optional(catalog: CatalogSnapshot) -> None:
    request = modern_request("tools/list")
    del request.params["_meta"]["io.modelcontextprotocol/clientInfo"]  # type: ignore[index]
    assert check_modern_request(request, headers_for(request), catalog).client_info is None


@pytest.mark.spec("2026-07-28", "basic/transports/streamable-http", "header must match body")
def test_missing_version_header_is_a_header_mismatch(catalog: CatalogSnapshot) -> None:
    request = modern_request("tools/list")
    headers = headers_for(request)
    del headers["mcp-protocol-version"]
    with pytest.raises(HeaderMismatch) as caught:
        check_modern_request(request, headers, catalog)
    assert caught.value.code == errors.HEADER_MISMATCH


def test_version_header_differing_from_body_is_a_header_mismatch(
    catalog: CatalogSnapshot,
) -> None:
    request = modern_request("tools/list")
    with pytest.raises(HeaderMismatch):
        check_modern_request(
            request, headers_for(request, mcp_protocol_version="2025-11-25"), catalog
        )


def test_method_header_differing_from_body_is_a_header_mismatch(
    catalog: CatalogSnapshot,
) -> None:
    request = modern_request("tools/list")
    with pytest.raises(HeaderMismatch):
        check_modern_request(request, headers_for(request, mcp_method="prompts/list"), catalog)
    headers = headers_for(request)
    del headers["mcp-method"]
    with pytest.raises(HeaderMismatch):
        check_modern_request(request, headers, catalog)


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}),
        ("prompts/get", {"name": "greet"}),
        ("resources/read", {"uri": "file:///readme.txt"}),
    ],
)
def test_name_header_must_mirror_the_named_param(
    catalog: CatalogSnapshot, method: str, params: dict[str, Any]
) -> None:
    request = modern_request(method, params)
    check_modern_request(request, headers_for(request), catalog)
    with pytest.raises(HeaderMismatch):
        check_modern_request(request, headers_for(request, mcp_name="other"), catalog)
    headers = headers_for(request)
    del headers["mcp-name"]
    with pytest.raises(HeaderMismatch):
        check_modern_request(request, headers, catalog)


@pytest.mark.spec("2026-07-28", "basic/transports/streamable-http", "Value Encoding")
def test_base64_name_header_is_decoded_before_comparing() -> None:
    name = "café tool"
    catalog = CatalogSnapshot(endpoint=EndpointInfo(slug="x"))
    request = modern_request("prompts/get", {"name": name})
    check_modern_request(request, headers_for(request, mcp_name=b64(name)), catalog)
    with pytest.raises(HeaderMismatch):
        check_modern_request(request, headers_for(request, mcp_name=b64("cafe tool")), catalog)


@pytest.mark.parametrize(
    ("raw", "decoded"),
    [
        ("plain", "plain"),
        (b64("  padded  "), "  padded  "),
        (b64("日本"), "日本"),
        ("=?base64?!!!?=", None),
        ("=?base64?YQ?=", None),  # missing padding is not canonical
        ("=?base64?YR==?=", None),  # non-zero trailing bits are not canonical
        ("=?base64?" + base64.b64encode(b"\xff").decode() + "?=", None),
    ],
)
def test_header_value_decoding(raw: str, decoded: str | None) -> None:
    assert decode_header_value(raw) == decoded


@pytest.mark.parametrize("header", ["mcp-protocol-version", "mcp-method", "mcp-name"])
def test_duplicated_routing_header_is_a_header_mismatch(
    catalog: CatalogSnapshot, header: str
) -> None:
    request = modern_request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
    headers = headers_for(request)
    headers[header] = headers[header] * 2
    with pytest.raises(HeaderMismatch):
        check_modern_request(request, headers, catalog)


@pytest.mark.spec("2026-07-28", "basic/versioning", "unsupported version is -32022")
def test_unserved_version_is_unsupported_protocol_version(catalog: CatalogSnapshot) -> None:
    for version in ("2027-01-15", "2025-11-25"):
        request = modern_request(
            "tools/list", **{"io.modelcontextprotocol/protocolVersion": version}
        )
        with pytest.raises(UnsupportedProtocolVersion) as caught:
            check_modern_request(request, headers_for(request), catalog)
        assert caught.value.data["requested"] == version


def test_non_string_version_is_invalid_params_without_headers(catalog: CatalogSnapshot) -> None:
    request = modern_request("tools/list", **{"io.modelcontextprotocol/protocolVersion": 2026})
    headers = {"mcp-protocol-version": ["2026"], "mcp-method": ["tools/list"]}
    # The header is a string and can never equal a non-string body version: mismatch first.
    with pytest.raises(HeaderMismatch):
        check_modern_request(request, headers, catalog)


@pytest.mark.spec("2026-07-28", "basic/lifecycle", "removed methods answer -32601")
@pytest.mark.parametrize(
    "method", ["initialize", "ping", "logging/setLevel", "resources/subscribe", "tasks/list"]
)
def test_method_unknown_to_the_modern_era_is_method_not_found(
    catalog: CatalogSnapshot, method: str
) -> None:
    request = modern_request(method)
    with pytest.raises(MethodNotFound) as caught:
        check_modern_request(request, headers_for(request), catalog)
    assert errors.modern_http_status(caught.value.code) == 404


def test_discover_and_listen_pass_the_method_rung(catalog: CatalogSnapshot) -> None:
    for method in ("server/discover", "subscriptions/listen"):
        request = modern_request(method)
        assert check_modern_request(request, headers_for(request), catalog).version == MODERN


@pytest.mark.spec("2026-07-28", "server/utilities/logging", "unknown logLevel is -32602")
def test_invalid_log_level_is_invalid_params(catalog: CatalogSnapshot) -> None:
    request = modern_request("tools/list", **{"io.modelcontextprotocol/logLevel": "verbose"})
    with pytest.raises(InvalidParams):
        check_modern_request(request, headers_for(request), catalog)


def test_ladder_order_envelope_before_headers(catalog: CatalogSnapshot) -> None:
    request = Request(id=1, method="tools/list", params={"_meta": {}})
    with pytest.raises(InvalidParams):
        check_modern_request(request, {}, catalog)


def test_ladder_order_headers_before_version(catalog: CatalogSnapshot) -> None:
    request = modern_request("tools/list", **{"io.modelcontextprotocol/protocolVersion": "2099"})
    headers = headers_for(request, mcp_method="wrong")
    with pytest.raises(HeaderMismatch):
        check_modern_request(request, headers, catalog)


def test_ladder_order_version_before_method(catalog: CatalogSnapshot) -> None:
    request = modern_request("ping", **{"io.modelcontextprotocol/protocolVersion": "2099"})
    with pytest.raises(UnsupportedProtocolVersion):
        check_modern_request(request, headers_for(request), catalog)


def test_ladder_order_method_before_log_level(catalog: CatalogSnapshot) -> None:
    request = modern_request("ping", **{"io.modelcontextprotocol/logLevel": "verbose"})
    with pytest.raises(MethodNotFound):
        check_modern_request(request, headers_for(request), catalog)


# -- Mcp-Param-* -----------------------------------------------------------------------------


def echo_call(arguments: dict[str, Any]) -> Request:
    return modern_request("tools/call", {"name": "echo", "arguments": arguments})


@pytest.mark.spec("2026-07-28", "basic/transports/streamable-http", "Custom Headers")
def test_param_headers_matching_the_arguments_pass(catalog: CatalogSnapshot) -> None:
    request = echo_call({"text": "hi", "count": 42, "loud": True})
    headers = headers_for(request, mcp_param_text="hi", mcp_param_count="42", mcp_param_loud="true")
    check_modern_request(request, headers, catalog)


def test_integer_param_header_compares_numerically(catalog: CatalogSnapshot) -> None:
    request = echo_call({"text": "hi", "count": 42.0})
    check_modern_request(
        request, headers_for(request, mcp_param_text="hi", mcp_param_count="42"), catalog
    )
    request = echo_call({"text": "hi", "count": 42})
    check_modern_request(
        request, headers_for(request, mcp_param_text="hi", mcp_param_count="42.0"), catalog
    )
    with pytest.raises(HeaderMismatch):
        check_modern_request(
            request, headers_for(request, mcp_param_text="hi", mcp_param_count="42.5"), catalog
        )


def test_base64_param_header_is_decoded(catalog: CatalogSnapshot) -> None:
    request = echo_call({"text": " héllo "})
    check_modern_request(request, headers_for(request, mcp_param_text=b64(" héllo ")), catalog)


@pytest.mark.parametrize(
    ("arguments", "params"),
    [
        ({"text": "hi"}, {}),  # header missing for a present argument
        ({"text": "hi"}, {"mcp_param_text": "ho"}),  # wrong value
        ({"text": "hi"}, {"mcp_param_text": "hi", "mcp_param_count": "1"}),  # no argument
        ({"text": "hi", "count": None}, {"mcp_param_text": "hi", "mcp_param_count": "1"}),
        ({"text": "hi", "loud": False}, {"mcp_param_text": "hi", "mcp_param_loud": "False"}),
        ({"text": "hi"}, {"mcp_param_text": ["hi", "hi"]}),  # duplicated
        ({"text": "hi"}, {"mcp_param_text": "=?base64?***?="}),  # malformed base64
    ],
)
def test_param_header_disagreeing_with_arguments_is_a_header_mismatch(
    catalog: CatalogSnapshot, arguments: dict[str, Any], params: dict[str, Any]
) -> None:
    request = echo_call(arguments)
    with pytest.raises(HeaderMismatch):
        check_modern_request(request, headers_for(request, **params), catalog)


def test_param_headers_are_not_checked_for_unknown_tools(catalog: CatalogSnapshot) -> None:
    request = modern_request("tools/call", {"name": "nope", "arguments": {}})
    check_modern_request(request, headers_for(request, mcp_param_text="x"), catalog)


@pytest.mark.parametrize(
    ("schema", "valid"),
    [
        ({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A"}}}, True),
        ({"type": "object", "properties": {"a": {"type": "number", "x-mcp-header": "A"}}}, False),
        ({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A B"}}}, False),
        ({"type": "object", "x-mcp-header": "Root"}, False),
        (
            {
                "type": "object",
                "properties": {
                    "a": {"type": "string", "x-mcp-header": "Same"},
                    "b": {"type": "string", "x-mcp-header": "same"},
                },
            },
            False,
        ),
        (
            {
                "type": "object",
                "properties": {
                    "a": {"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}
                },
            },
            False,
        ),
        (
            {
                "type": "object",
                "properties": {
                    "o": {
                        "type": "object",
                        "properties": {"n": {"type": "integer", "x-mcp-header": "N"}},
                    }
                },
            },
            True,
        ),
    ],
)
def test_x_mcp_header_annotations_are_validated(schema: dict[str, Any], valid: bool) -> None:
    assert (find_invalid_x_mcp_header(schema) is None) is valid


# -- notifications ---------------------------------------------------------------------------


def test_modern_notification_with_served_version_is_accepted() -> None:
    note = Notification("notifications/cancelled", {"_meta": dict(ENVELOPE)})
    check_modern_notification(note, {"mcp-protocol-version": [MODERN]})
    check_modern_notification(Notification("x", None), {"mcp-protocol-version": [MODERN]})


def test_modern_notification_with_unserved_version_is_rejected() -> None:
    with pytest.raises(UnsupportedProtocolVersion):
        check_modern_notification(Notification("x", None), {"mcp-protocol-version": ["2099"]})
    meta = {**ENVELOPE, "io.modelcontextprotocol/protocolVersion": "2099"}
    with pytest.raises(UnsupportedProtocolVersion):
        check_modern_notification(Notification("x", {"_meta": meta}), {})


def test_a_param_header_cache_walks_each_schema_once() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A"}}}
    cache = ParamHeaderCache()
    assert cache.param_headers(schema) is cache.param_headers(schema)
    assert cache.param_headers(schema) == [(("a",), "A", schema["properties"]["a"])]


# -- the ladder's checks, as one pass reads them (issue #29) ----------------------------------


@pytest.mark.parametrize(
    "name", ["mcp-protocol-version", "mcp-method", "mcp-name"], ids=["version", "method", "name"]
)
def test_a_routing_header_sent_twice_is_a_header_mismatch(
    catalog: CatalogSnapshot, name: str
) -> None:
    request = modern_request("tools/call", {"name": "echo", "arguments": {}})
    headers = headers_for(request)
    headers[name] = headers.get(name, ["x"]) * 2
    with pytest.raises(HeaderMismatch, match=f"{name} header appears more than once"):
        check_modern_request(request, headers, catalog)


def test_a_missing_name_header_is_a_header_mismatch(catalog: CatalogSnapshot) -> None:
    request = modern_request("tools/call", {"name": "echo", "arguments": {}})
    headers = headers_for(request)
    del headers["mcp-name"]
    with pytest.raises(HeaderMismatch, match="Mcp-Name header does not match params.name"):
        check_modern_request(request, headers, catalog)


@pytest.mark.parametrize("value", ["=?base64?not base64?=", "=?base64?ZWNobw==?=x"])
def test_header_values_like_the_sentinel_are_decoded_as_before(value: str) -> None:
    # Malformed sentinels are refused (None); a value that only starts like one is plain.
    assert decode_header_value(value) == (None if value.endswith("?=") else value)
    assert decode_header_value("=?base64?ZWNobw==?=") == "echo"
    assert decode_header_value("echo =?base64?ZWNobw==?=") == "echo =?base64?ZWNobw==?="


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("io.modelcontextprotocol/clientCapabilities", {"roots": {"note": "a\u0000"}}),
        ("io.modelcontextprotocol/clientCapabilities", {"x\ud800": {}}),
        ("io.modelcontextprotocol/clientInfo", {"name": "a\u0000", "version": "1"}),
    ],
)
def test_an_envelope_the_server_cannot_store_is_invalid_params(
    catalog: CatalogSnapshot, key: str, value: Any
) -> None:
    request = modern_request("tools/list", **{key: value})
    with pytest.raises(InvalidParams, match=f"params._meta {key}.* cannot store"):
        check_modern_request(request, headers_for(request), catalog)


def test_an_envelope_of_read_only_mappings_is_read_like_dicts(catalog: CatalogSnapshot) -> None:
    from types import MappingProxyType

    meta = MappingProxyType(
        {
            **ENVELOPE,
            "io.modelcontextprotocol/clientCapabilities": MappingProxyType({"roots": {}}),
            "io.modelcontextprotocol/clientInfo": MappingProxyType({"name": "c"}),
        }
    )
    request = Request(id=1, method="tools/list", params={"_meta": meta})  # type: ignore[dict-item]
    envelope = check_modern_request(request, headers_for(request), catalog)
    assert envelope.client_capabilities == {"roots": {}}
    assert envelope.client_info == {"name": "c"}
    assert classify(request, None) is Route.MODERN
