"""Properties of the protocol layer under any input (hypothesis), without a database.

Whatever a client sends, the pure core answers with a result or a protocol error (an
``McpError``), never another exception: any byte string or JSON value as a body, any string
with any code point (NUL, lone surrogates) in every field. And what the core lets through to
be stored is storable (``protocol/storable.py``). Our choice (issue #13).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_app.protocol import jsonrpc
from mcp_app.protocol.catalog import CatalogSnapshot
from mcp_app.protocol.context import LegacySession, RequestContext
from mcp_app.protocol.dispatch import handle_request
from mcp_app.protocol.errors import INTERNAL_ERROR, McpError
from mcp_app.protocol.handlers.lifecycle import parse_initialize
from mcp_app.protocol.inbound import check_modern_request, classify
from mcp_app.protocol.jsonrpc import Request
from mcp_app.protocol.methods import known_methods
from mcp_app.protocol.storable import unstorable_path
from mcp_app.protocol.versions import Era

from .conftest import (
    CURSOR_SECRET,
    SERVER_INFO,
    InMemoryResourceReader,
    InMemorySessionStore,
    InMemoryToolRunner,
    reference_catalog,
)

# No example database: runs stay independent and leave nothing in the tree.
PROPERTY_SETTINGS = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
META_PREFIX = "io.modelcontextprotocol/"
CATALOG: CatalogSnapshot = reference_catalog()

# Any code point, surrogates included, with the troublesome ones drawn often.
ANY_CHAR = st.one_of(
    st.characters(exclude_categories=()),
    st.sampled_from(["\x00", "\ud800", "\udfff", "\r", "\n", "\ufffd", "{", "%"]),
)
TEXT = st.text(ANY_CHAR, max_size=12)
NAMES = st.one_of(
    st.sampled_from(
        ["add", "echo", "weather", "fail", "steps", "file:///readme.txt", "users://1/profile"]
    ),
    TEXT,
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(TEXT | NAMES, children, max_size=4)
    ),
    max_leaves=12,
)
META = st.fixed_dictionaries(
    {},
    optional={
        "progressToken": st.one_of(TEXT, st.integers(), JSON_VALUES),
        f"{META_PREFIX}protocolVersion": st.one_of(st.sampled_from(VERSIONS), TEXT),
        f"{META_PREFIX}clientCapabilities": JSON_VALUES,
        f"{META_PREFIX}clientInfo": JSON_VALUES,
        f"{META_PREFIX}logLevel": st.one_of(st.sampled_from(["info", "debug"]), TEXT),
    },
)
PARAMS = st.fixed_dictionaries(
    {},
    optional={
        "name": NAMES,
        "uri": NAMES,
        "arguments": st.one_of(st.dictionaries(TEXT | NAMES, JSON_VALUES, max_size=3), SCALARS),
        "cursor": TEXT,
        "taskId": TEXT,
        "level": TEXT,
        "protocolVersion": st.one_of(st.sampled_from(VERSIONS), TEXT),
        "capabilities": JSON_VALUES,
        "clientInfo": JSON_VALUES,
        "ref": JSON_VALUES,
        "argument": JSON_VALUES,
        "task": JSON_VALUES,
        "inputResponses": JSON_VALUES,
        "requestState": TEXT,
        "_meta": st.one_of(META, JSON_VALUES),
        TEXT: JSON_VALUES,
    },
)
METHODS = st.one_of(
    st.sampled_from(sorted(known_methods(Era.LEGACY) | known_methods(Era.MODERN))), TEXT
)
IDS = st.one_of(st.integers(min_value=-(2**53), max_value=2**53), TEXT)
HEADERS = st.dictionaries(
    st.sampled_from(["mcp-protocol-version", "mcp-method", "mcp-name", "mcp-param-text"]),
    st.lists(TEXT, min_size=1, max_size=2),
    max_size=4,
)


def _context(version: str, request: Request) -> RequestContext:
    progress = None
    if isinstance(request.params, Mapping) and isinstance(request.params.get("_meta"), Mapping):
        token = request.params["_meta"].get("progressToken")
        if isinstance(token, str | int) and not isinstance(token, bool):
            progress = token
    legacy = version != "2026-07-28"
    return RequestContext(
        version=version,
        catalog=CATALOG,
        tools=InMemoryToolRunner(),
        resources=InMemoryResourceReader(),
        server_info=SERVER_INFO,
        cursor_secret=CURSOR_SECRET,
        request_id=request.id,
        progress_token=progress,
        session=LegacySession(id="s-1", protocol_version=version) if legacy else None,
        sessions=InMemorySessionStore() if legacy else None,
    )


@PROPERTY_SETTINGS
@given(st.binary(max_size=200))
def test_any_bytes_decode_to_messages_or_a_protocol_error(body: bytes) -> None:
    with contextlib.suppress(McpError):
        jsonrpc.decode(body, max_batch=10)


@PROPERTY_SETTINGS
@given(st.one_of(JSON_VALUES, st.lists(JSON_VALUES, max_size=3)))
def test_any_json_value_decodes_to_messages_or_a_protocol_error(value: Any) -> None:
    # ensure_ascii keeps lone surrogates as \\ud800 escapes, as a hostile client would send.
    body = json.dumps(value).encode()
    try:
        decoded = jsonrpc.decode(body, max_batch=10)
    except McpError as exc:
        assert exc.request_id is None or unstorable_path(exc.request_id, "id") is None
        return
    for message in decoded if isinstance(decoded, list) else [decoded]:
        if isinstance(message, Request):
            assert unstorable_path(message.id, "id") is None


@PROPERTY_SETTINGS
@given(method=METHODS, params=st.one_of(st.none(), PARAMS), version=st.sampled_from(VERSIONS))
def test_any_request_is_answered_with_a_result_or_a_protocol_error(
    method: str, params: dict[str, Any] | None, version: str
) -> None:
    request = Request(id=1, method=method, params=params)
    ctx = _context(version, request)
    try:
        result = asyncio.run(handle_request(ctx, method, params))
    except McpError as exc:
        # The reference catalog's "crash" tool fails on purpose; nothing else may.
        assert exc.code != INTERNAL_ERROR or (params or {}).get("name") == "crash"
        return
    assert isinstance(result, dict)


@PROPERTY_SETTINGS
@given(st.one_of(st.none(), PARAMS))
def test_initialize_accepts_only_what_a_session_row_can_store(params: Any) -> None:
    try:
        _version, capabilities, client_info = parse_initialize(params)
    except McpError:
        return
    assert unstorable_path(capabilities, "capabilities") is None
    assert unstorable_path(client_info, "clientInfo") is None


@PROPERTY_SETTINGS
@given(method=METHODS, params=st.one_of(st.none(), PARAMS), headers=HEADERS)
def test_the_modern_ladder_passes_or_refuses_with_a_protocol_error(
    method: str, params: dict[str, Any] | None, headers: dict[str, list[str]]
) -> None:
    request = Request(id=1, method=method, params=params)
    classify(request, headers.get("mcp-protocol-version", [None])[0])
    try:
        envelope = check_modern_request(request, headers, CATALOG)
    except McpError:
        return
    assert unstorable_path(envelope.client_capabilities, "capabilities") is None
    assert unstorable_path(envelope.client_info, "clientInfo") is None
