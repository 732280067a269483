"""Error objects and the modern-era HTTP status table."""

from __future__ import annotations

import pytest

from mcp_app.protocol import errors
from mcp_app.protocol.errors import (
    HeaderMismatch,
    InternalError,
    InvalidParams,
    InvalidRequest,
    McpError,
    MethodNotFound,
    MissingClientCapability,
    ParseError,
    ResourceNotFound,
    UnsupportedProtocolVersion,
    modern_http_status,
)


@pytest.mark.parametrize(
    ("cls", "code"),
    [
        (ParseError, errors.PARSE_ERROR),
        (InvalidRequest, errors.INVALID_REQUEST),
        (MethodNotFound, errors.METHOD_NOT_FOUND),
        (InvalidParams, errors.INVALID_PARAMS),
        (InternalError, errors.INTERNAL_ERROR),
        (ResourceNotFound, errors.RESOURCE_NOT_FOUND),
        (HeaderMismatch, errors.HEADER_MISMATCH),
    ],
)
def test_each_error_class_carries_its_wire_code(cls: type[McpError], code: int) -> None:
    error = cls("something", {"k": 1})
    assert error.code == code
    assert error.to_error_object() == {"code": code, "message": "something", "data": {"k": 1}}


def test_error_object_omits_data_when_there_is_none() -> None:
    assert InvalidParams("bad").to_error_object() == {"code": -32602, "message": "bad"}


def test_named_codes_have_the_spec_values() -> None:
    assert (errors.PARSE_ERROR, errors.INVALID_REQUEST, errors.METHOD_NOT_FOUND) == (
        -32700,
        -32600,
        -32601,
    )
    assert (errors.INVALID_PARAMS, errors.INTERNAL_ERROR, errors.RESOURCE_NOT_FOUND) == (
        -32602,
        -32603,
        -32002,
    )
    assert (
        errors.HEADER_MISMATCH,
        errors.MISSING_CLIENT_CAPABILITY,
        errors.UNSUPPORTED_PROTOCOL_VERSION,
    ) == (-32020, -32021, -32022)


@pytest.mark.spec("2026-07-28", "basic/versioning", "UnsupportedProtocolVersionError data")
def test_unsupported_version_lists_every_served_version_modern_first() -> None:
    error = UnsupportedProtocolVersion("2027-01-15")
    assert error.to_error_object() == {
        "code": -32022,
        "message": "Unsupported protocol version",
        "data": {
            "supported": ["2026-07-28"],
            "requested": "2027-01-15",
        },
    }


@pytest.mark.spec("2026-07-28", "basic/index", "MissingRequiredClientCapabilityError data")
def test_missing_capability_names_the_required_capabilities() -> None:
    error = MissingClientCapability("needs elicitation", {"elicitation": {}})
    assert error.code == errors.MISSING_CLIENT_CAPABILITY
    assert error.data == {"requiredCapabilities": {"elicitation": {}}}


@pytest.mark.spec("2026-07-28", "basic/transports/streamable-http", "error status codes")
@pytest.mark.parametrize(
    ("code", "status"),
    [
        (errors.PARSE_ERROR, 400),
        (errors.INVALID_REQUEST, 400),
        (errors.INVALID_PARAMS, 400),
        (errors.HEADER_MISMATCH, 400),
        (errors.MISSING_CLIENT_CAPABILITY, 400),
        (errors.UNSUPPORTED_PROTOCOL_VERSION, 400),
        (errors.METHOD_NOT_FOUND, 404),
        (errors.INTERNAL_ERROR, 200),
        (errors.RESOURCE_NOT_FOUND, 200),
        (-1, 200),
    ],
)
def test_modern_http_status_follows_the_sdk_table(code: int, status: int) -> None:
    assert modern_http_status(code) == status


def test_request_id_defaults_to_none() -> None:
    assert InvalidParams("x").request_id is None
