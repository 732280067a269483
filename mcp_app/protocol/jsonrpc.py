"""JSON-RPC 2.0 envelopes as MCP uses them: decode a POST body, encode replies.

Decoding checks the *envelope* only (``jsonrpc``, ``id``, ``method``, ``params`` shape);
what the params must contain is the handlers' business. MCP narrows JSON-RPC in two ways
enforced here: a request id is a string or an integer, never null (basic/index, "Requests"),
and ``params`` is an object, never an array. This server adds one rule of its own: an id
holds no NUL or unpaired surrogate (``storable.py``), since ids are stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from mcp_app.protocol.errors import InvalidRequest, McpError, ParseError
from mcp_app.protocol.storable import is_storable_text

RequestId = str | int


@dataclass(frozen=True, slots=True)
class Request:
    id: RequestId
    method: str
    params: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Notification:
    method: str
    params: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Response:
    """A client's answer to a server-to-client request (sampling, elicitation, roots)."""

    id: RequestId | None
    result: Any = None
    error: dict[str, Any] | None = None


Message = Request | Notification | Response


def _is_request_id(value: object) -> bool:
    # bool is a subclass of int, but `true` is not a valid JSON-RPC id.
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _is_usable_id(value: object) -> bool:
    """A request id this server can store and echo: no NUL or unpaired surrogate in it.

    Ids are written to the call log and to background calls (PostgreSQL refuses U+0000),
    and an unpaired surrogate cannot even be encoded in the reply.
    """
    return _is_request_id(value) and (not isinstance(value, str) or is_storable_text(value))


def _invalid(message: str, obj: Mapping[str, Any] | None = None) -> InvalidRequest:
    error = InvalidRequest(message)
    if obj is not None and _is_usable_id(obj.get("id")):
        error.request_id = obj["id"]
    return error


def _check_id(obj: Mapping[str, Any], what: str) -> None:
    if type(obj["id"]) is int:
        return  # an integer (never a bool: its type is bool) is a usable id
    if not _is_request_id(obj["id"]):
        raise _invalid(f"A {what} id must be a string or an integer", obj)
    if not _is_usable_id(obj["id"]):
        raise _invalid(f"A {what} id must not contain NUL characters or unpaired surrogates")


def _decode_one(obj: Any) -> Message:
    if not isinstance(obj, dict):
        raise _invalid("A JSON-RPC message must be an object")
    if obj.get("jsonrpc") != "2.0":
        raise _invalid('The "jsonrpc" member must be exactly "2.0"', obj)
    if "method" in obj:
        method = obj["method"]
        if not isinstance(method, str):
            raise _invalid('The "method" member must be a string', obj)
        params = obj.get("params")
        # A null params is read as absent: JSON-RPC makes params optional and several clients
        # serialise "no params" as null.
        if params is not None and not isinstance(params, dict):
            raise _invalid('The "params" member must be an object', obj)
        if "id" not in obj:
            return Notification(method=method, params=params)
        _check_id(obj, "request")
        return Request(id=obj["id"], method=method, params=params)
    if "id" in obj and ("result" in obj) != ("error" in obj):
        request_id = obj["id"]
        if "result" in obj:
            _check_id(obj, "response")
            return Response(id=request_id, result=obj["result"])
        error = obj["error"]
        if (
            not isinstance(error, dict)
            or not isinstance(error.get("code"), int)
            or isinstance(error.get("code"), bool)
            or not isinstance(error.get("message"), str)
        ):
            raise _invalid('The "error" member must be an object with a code and a message', obj)
        if request_id is not None and not _is_request_id(request_id):
            raise _invalid("A response id must be a string, an integer or null", obj)
        if request_id is not None:
            _check_id(obj, "response")
        return Response(id=request_id, error=error)
    raise _invalid("Not a JSON-RPC request, notification or response", obj)


def decode(body: bytes, *, max_batch: int | None = None) -> Message | list[Message]:
    """Decode one POST body into a message, or a list of them for a JSON-RPC batch.

    A batch with any malformed element is rejected as a whole with ``InvalidRequest``:
    batches only exist for 2025-03-26 sessions, and answering a half-valid batch
    element by element buys clients nothing while complicating every transport path. So is
    a batch of more than ``max_batch`` messages, before any element is looked at.

    Raises:
        ParseError: the body is not JSON (or not UTF-8).
        InvalidRequest: the JSON is not a valid JSON-RPC message, or a batch too large;
            ``request_id`` carries the id when one could be read.
    """
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ParseError("Parse error: the body is not valid JSON") from None
    if isinstance(data, list):
        if not data:
            raise _invalid("An empty batch is not a valid JSON-RPC message")
        if max_batch is not None and len(data) > max_batch:
            raise _invalid(
                f"A batch may hold at most {max_batch} messages; this one has {len(data)}"
            )
        try:
            return [_decode_one(item) for item in data]
        except InvalidRequest as error:
            raise _invalid(f"Invalid batch element: {error.message}") from None
    return _decode_one(data)


def encode(obj: Any) -> bytes:
    """Serialise any JSON value (dicts, lists, str keys) with orjson."""
    return orjson.dumps(obj)


def encode_result(id: RequestId, result: Mapping[str, Any]) -> bytes:
    """Encode a success response."""
    return orjson.dumps({"jsonrpc": "2.0", "id": id, "result": result})


def encode_error(id: RequestId | None, error: McpError) -> bytes:
    """Encode an error response; ``id`` is ``None`` when the request's id was unreadable."""
    return orjson.dumps({"jsonrpc": "2.0", "id": id, "error": error.to_error_object()})


def notification(method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Build a server-to-client notification message (what ``RequestContext.send`` takes)."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = dict(params)
    return message
