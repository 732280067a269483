"""Hostile input at the endpoint (issue #13, items 6, 7, 10, 11): clear 4xx errors, never 5xx.

The application runs in-process against real PostgreSQL (tests/support/inprocess.py), so a
request can carry what real servers may let through: a header twice, a NUL in a value.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings

from mcp_app.models import CallLog, Session, Tool
from mcp_app.protocol import errors
from mcp_app.services.calllog.writer import call_log_flush
from mcp_app.services.credentials import credential_create
from tests.support.catalog import echo_schema, make_endpoint, make_python_tool
from tests.support.inprocess import Answer, acall, encode_headers
from tests.support.upstream import Upstream, run_upstream

SLUG = "hostile"
PATH = f"/mcp/{SLUG}"
BASE_HEADERS = {
    "host": "127.0.0.1",
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
}
FLUSH_SECONDS = 10.0

pytestmark = pytest.mark.django_db(transaction=True)


def post(
    body: Any, headers: dict[str, str] | None = None, *, raw: list[tuple[str, str]] | None = None
) -> Answer:
    pairs = raw if raw is not None else list({**BASE_HEADERS, **(headers or {})}.items())
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return async_to_sync(acall)(PATH, data, encode_headers(pairs))


def initialize(version: str = "2025-11-25", **params: Any) -> Answer:
    return post(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "hostile-test", "version": "1"},
                **params,
            },
        }
    )


def open_session(version: str = "2025-11-25") -> dict[str, str]:
    answer = initialize(version)
    assert answer.status == 200, answer.body
    return {
        "mcp-session-id": answer.header("mcp-session-id") or "",
        "mcp-protocol-version": version,
    }


def error_code(answer: Answer, index: int | None = None) -> int:
    body = answer.json()
    return (body[index] if index is not None else body)["error"]["code"]


@pytest.fixture
def endpoint() -> Any:
    endpoint = make_endpoint(SLUG)
    endpoint.tools.add(
        make_python_tool("echo", "echo", input_schema=echo_schema()),
        make_python_tool(
            "later",
            "echo",
            input_schema=echo_schema(),
            execution_mode=Tool.Execution.BACKGROUND,
            task_support=Tool.TaskSupport.OPTIONAL,
        ),
    )
    return endpoint


def call(request_id: Any, name: str, message: str = "hi", **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": {"message": message}}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


# -- 6: NUL and lone surrogates in strings the server stores ---------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {"clientInfo": {"name": "a\u0000", "version": "1"}},
        {"capabilities": {"x\u0000": {}}},
    ],
)
def test_initialize_with_nul_in_client_info_or_capabilities_is_invalid_params(
    endpoint: Any, params: dict[str, Any]
) -> None:
    answer = initialize(**params)

    assert answer.status == 400
    assert error_code(answer) == errors.INVALID_PARAMS
    assert Session.objects.count() == 0


def test_subscribing_to_a_uri_with_nul_is_invalid_params(endpoint: Any) -> None:
    session = open_session()

    answer = post(
        {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": "\u0000"}},
        session,
    )

    assert answer.status == 200
    assert error_code(answer) == errors.INVALID_PARAMS


def test_a_background_call_with_nul_in_its_request_id_is_invalid_request(endpoint: Any) -> None:
    session = open_session()

    answer = post(call("id\u0000", "later"), session)

    assert answer.status == 400
    assert answer.json()["id"] is None
    assert error_code(answer) == errors.INVALID_REQUEST


def test_a_background_call_with_nul_in_its_progress_token_is_invalid_params(
    endpoint: Any,
) -> None:
    session = open_session()

    answer = post(call(2, "later", progressToken="p\u0000"), session)

    assert error_code(answer) == errors.INVALID_PARAMS


def test_an_inline_call_echoes_nul_unharmed(endpoint: Any) -> None:
    session = open_session()

    answer = post(call(2, "echo", message="a\u0000b"), session)

    assert answer.status == 200
    assert answer.json()["result"]["content"][0]["text"] == "a\u0000b"


# -- 10: bounded batches ---------------------------------------------------------------------


def last_row_id() -> int:
    return CallLog.objects.order_by("-id").values_list("id", flat=True).first() or 0


@override_settings(MCP_MAX_BATCH_MESSAGES=5)
def test_a_batch_past_the_bound_is_refused_whole_and_runs_nothing(endpoint: Any) -> None:
    session = open_session("2025-03-26")
    call_log_flush(timeout=FLUSH_SECONDS)
    before = last_row_id()

    answer = post([call(i, "echo", message=f"m{i}") for i in range(6)], session)

    assert answer.status == 400
    assert error_code(answer) == errors.INVALID_REQUEST
    assert "at most 5" in answer.json()["error"]["message"]
    assert call_log_flush(timeout=FLUSH_SECONDS)
    rows = CallLog.objects.filter(id__gt=before).order_by("id")
    # One row per message of the refused batch, none of them run.
    assert [(row.rpc_method, row.status) for row in rows] == [("tools/call", "rejected")] * 6


@override_settings(MCP_MAX_BATCH_MESSAGES=5)
def test_a_batch_at_the_bound_is_served(endpoint: Any) -> None:
    session = open_session("2025-03-26")

    answer = post([call(i, "echo", message=f"m{i}") for i in range(5)], session)

    assert answer.status == 200
    assert [reply["result"]["content"][0]["text"] for reply in answer.json()] == [
        f"m{i}" for i in range(5)
    ]


# The follower gives up on a call no worker takes after this long: the batch's one allowed
# background call ends there, with no worker running in this test.
@override_settings(MCP_BACKGROUND_START_TIMEOUT_SECONDS=0.3)
def test_background_calls_past_the_bound_get_their_own_error_and_do_not_run(
    endpoint: Any,
) -> None:
    session = open_session("2025-03-26")
    call_log_flush(timeout=FLUSH_SECONDS)
    before = last_row_id()

    answer = post([call(1, "later"), call(2, "echo"), call(3, "later"), call(4, "later")], session)

    assert answer.status == 200
    replies = {reply["id"]: reply for reply in answer.json()}
    assert "result" in replies[1] and "result" in replies[2]
    assert [replies[i]["error"]["code"] for i in (3, 4)] == [errors.INVALID_REQUEST] * 2
    assert "at most 1 background" in replies[3]["error"]["message"]
    assert call_log_flush(timeout=FLUSH_SECONDS)
    rows = CallLog.objects.filter(id__gt=before, rpc_method="tools/call")
    statuses = dict(rows.values_list("rpc_id", "status"))
    assert statuses["3"] == statuses["4"] == "protocol_error"


# -- 11: repeated headers --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "first", "second"),
    [
        ("host", "127.0.0.1", "evil.example"),
        ("content-type", "application/json", "text/plain"),
        ("mcp-protocol-version", "2025-11-25", "2025-03-26"),
        ("authorization", "Bearer a", "Bearer b"),
        ("origin", "http://127.0.0.1", "https://evil.example"),
    ],
)
def test_a_singleton_header_sent_twice_is_400(
    endpoint: Any, name: str, first: str, second: str
) -> None:
    pairs = [*BASE_HEADERS.items(), (name, first), (name, second)]
    pairs = [pair for pair in pairs if pair[0] != name] + [(name, first), (name, second)]

    answer = post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, raw=pairs)

    assert answer.status == 400
    assert error_code(answer) == errors.INVALID_REQUEST
    assert f"{name} header was sent more than once" in answer.json()["error"]["message"]


def test_a_repeated_accept_header_is_combined(endpoint: Any) -> None:
    pairs = [
        ("host", "127.0.0.1"),
        ("content-type", "application/json"),
        ("accept", "text/event-stream"),
        ("accept", "application/json"),
    ]

    answer = post(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}},
        },
        raw=pairs,
    )

    assert answer.status == 200


def test_a_nul_in_a_header_value_is_400(endpoint: Any) -> None:
    answer = post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"mcp-session-id": "a\u0000"})

    assert answer.status == 400
    assert "NUL" in answer.json()["error"]["message"]


# -- 7: credential values never reach the call log ------------------------------------------


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    with run_upstream() as server:
        yield server


def test_an_api_key_sent_as_a_query_parameter_is_not_in_the_call_log(
    endpoint: Any, upstream: Upstream
) -> None:
    secret = "k3y/with+chars&more"
    credential_create(name="api", kind="api_key_query", query_param="key", secret=secret)
    tool = Tool(
        name="fetch",
        description="Echo upstream",
        kind=Tool.Kind.HTTP,
        config={
            "url": upstream.url("/echo"),
            "credential": "api",
            "allow_networks": ["127.0.0.1/32"],
        },
        capture_mode=Tool.Capture.FULL,
    )
    tool.full_clean()
    tool.save()
    endpoint.tools.add(tool)
    session = open_session()

    answer = post(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "fetch"}}, session
    )

    result = answer.json()["result"]
    assert not result.get("isError"), result
    assert result["structuredContent"]["query"] == {"key": ["[redacted]"]}
    assert call_log_flush(timeout=FLUSH_SECONDS)
    row = CallLog.objects.get(rpc_method="tools/call")
    stored = json.dumps(row.result)
    assert "[redacted]" in stored
    for form in (secret, "k3y/with%2Bchars%26more", "k3y%2Fwith%2Bchars%26more"):
        assert form not in stored and form not in answer.body.decode()
