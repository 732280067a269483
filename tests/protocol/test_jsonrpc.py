"""Decoding POST bodies into JSON-RPC messages and encoding replies."""

from __future__ import annotations

import orjson
import pytest

from mcp_app.protocol import errors
from mcp_app.protocol.errors import InvalidParams, InvalidRequest, ParseError
from mcp_app.protocol.jsonrpc import (
    Notification,
    Request,
    Response,
    decode,
    encode,
    encode_error,
    encode_result,
    notification,
)


def test_request_decodes_with_id_method_and_params() -> None:
    body = b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"cursor":"c"}}'
    assert decode(body) == Request(id=7, method="tools/list", params={"cursor": "c"})


def test_string_ids_and_absent_params_are_accepted() -> None:
    assert decode(b'{"jsonrpc":"2.0","id":"a-1","method":"ping"}') == Request(
        id="a-1", method="ping", params=None
    )


def test_null_params_read_as_absent() -> None:
    decoded = decode(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":null}')
    assert decoded == Request(id=1, method="ping", params=None)


def test_message_without_id_is_a_notification() -> None:
    decoded = decode(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert decoded == Notification(method="notifications/initialized", params=None)


def test_client_result_and_error_responses_decode() -> None:
    assert decode(b'{"jsonrpc":"2.0","id":3,"result":{"ok":true}}') == Response(
        id=3, result={"ok": True}
    )
    error = {"code": -1, "message": "no"}
    assert decode(orjson.dumps({"jsonrpc": "2.0", "id": None, "error": error})) == Response(
        id=None, error=error
    )


def test_invalid_json_is_a_parse_error() -> None:
    with pytest.raises(ParseError) as caught:
        decode(b'{"jsonrpc": "2.0", ')
    assert caught.value.code == errors.PARSE_ERROR
    assert caught.value.request_id is None


def test_non_utf8_body_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        decode(b'"\xff\xfe"')


@pytest.mark.parametrize(
    "body",
    [
        b"42",
        b'"text"',
        b'{"id":1,"method":"ping"}',
        b'{"jsonrpc":"1.0","id":1,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":1,"method":5}',
        b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":[1,2]}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}',
        b'{"jsonrpc":"2.0","id":1}',
        b'{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}',
        b'{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}',
        b"[]",
    ],
)
def test_wrong_shapes_are_invalid_requests(body: bytes) -> None:
    with pytest.raises(InvalidRequest) as caught:
        decode(body)
    assert caught.value.code == errors.INVALID_REQUEST


@pytest.mark.spec("2025-11-25", "basic/index", "Request ID MUST NOT be null")
def test_null_request_id_is_an_invalid_request() -> None:
    with pytest.raises(InvalidRequest) as caught:
        decode(b'{"jsonrpc":"2.0","id":null,"method":"ping"}')
    assert caught.value.request_id is None


def test_boolean_id_is_not_an_integer_id() -> None:
    with pytest.raises(InvalidRequest):
        decode(b'{"jsonrpc":"2.0","id":true,"method":"ping"}')


def test_invalid_request_keeps_a_readable_id_for_the_reply() -> None:
    with pytest.raises(InvalidRequest) as caught:
        decode(b'{"jsonrpc":"2.0","id":"r9","method":"ping","params":[1]}')
    assert caught.value.request_id == "r9"


def test_batch_decodes_element_wise() -> None:
    body = b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"n"}]'
    assert decode(body) == [
        Request(id=1, method="ping", params=None),
        Notification(method="n", params=None),
    ]


def test_batch_with_one_bad_element_is_rejected_whole() -> None:
    body = b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2}]'
    with pytest.raises(InvalidRequest) as caught:
        decode(body)
    assert caught.value.request_id is None


def test_encode_result_builds_a_success_response() -> None:
    assert orjson.loads(encode_result("x", {"tools": []})) == {
        "jsonrpc": "2.0",
        "id": "x",
        "result": {"tools": []},
    }


def test_encode_error_carries_code_message_data_and_null_id() -> None:
    assert orjson.loads(encode_error(None, InvalidParams("bad", {"uri": "u"}))) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32602, "message": "bad", "data": {"uri": "u"}},
    }


def test_encode_and_notification_round_trip() -> None:
    message = notification("notifications/progress", {"progressToken": 1, "progress": 2})
    assert orjson.loads(encode(message)) == {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": 1, "progress": 2},
    }
    assert notification("notifications/tools/list_changed") == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
    }


def test_a_batch_past_max_batch_is_invalid_request_before_its_elements_are_read() -> None:
    batch = [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(3)] + ["not a message"]

    with pytest.raises(InvalidRequest, match="at most 3 messages; this one has 4"):
        decode(orjson.dumps(batch), max_batch=3)
    assert len(decode(orjson.dumps(batch[:3]), max_batch=3)) == 3
