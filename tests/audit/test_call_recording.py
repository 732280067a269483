"""Every request to a live server leaves exactly one call-log row per message, with the right
fields: driven by the official SDK client in both eras, and by raw HTTP for rejections."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import Implementation

from mcp_app.models import CallLog, Endpoint
from mcp_app.protocol import errors
from tests.audit.conftest import SLUG, last_id, only, recorded_since, wait_for
from tests.support.live import asgi_server

pytestmark = pytest.mark.django_db

JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def run(coro: Any) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(20):
            return await coro

    return asyncio.run(bounded())


def base(url: str) -> str:
    return url.rsplit("/mcp/", 1)[0]


def calls(rows: list[CallLog], method: str = "tools/call") -> list[CallLog]:
    return [row for row in rows if row.rpc_method == method]


def initialize(client: httpx.Client, url: str, version: str = "2025-11-25") -> str:
    response = client.post(
        url,
        headers=JSON,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "audit-test", "version": "1"},
            },
        },
    )
    assert response.status_code == 200
    return response.headers["mcp-session-id"]


def session_headers(session_id: str, version: str = "2025-11-25") -> dict[str, str]:
    return {**JSON, "mcp-session-id": session_id, "mcp-protocol-version": version}


def modern_call(name: str, arguments: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    headers = {
        **JSON,
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": name,
    }
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": MODERN_META},
    }
    return headers, body


# -- outcomes of tools/call, through the SDK ------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_successful_call_is_one_ok_row_with_arguments_and_result(audit_url, mode):
    mark = last_id()

    async def scenario() -> None:
        async with Client(audit_url, mode=mode) as client:
            result = await client.call_tool("echo", {"message": "hello audit"})
            assert result.content[0].text == "hello audit"

    run(scenario())
    rows = recorded_since(mark, base(audit_url))
    row = only(calls(rows))
    endpoint = Endpoint.objects.get(slug=SLUG)
    assert row.endpoint_id == endpoint.pk
    assert row.endpoint_slug == SLUG
    assert row.status == CallLog.Status.OK
    assert row.target == "echo"
    assert row.message_type == CallLog.MessageType.REQUEST
    assert row.http_method == "POST"
    assert row.http_status == 200
    assert row.error_code is None
    assert row.remote_addr == "127.0.0.1"
    assert row.user_agent
    assert row.duration_ms is not None and row.duration_ms >= 0
    assert row.capture == "full"
    assert row.arguments == {"message": "hello audit"}
    assert row.result["content"] == [{"type": "text", "text": "hello audit"}]
    assert row.arguments_bytes == len(b'{"message":"hello audit"}')
    assert row.principal_id is None and row.client_id == ""
    if mode == "legacy":
        assert (row.era, row.protocol_version) == ("legacy", "2025-11-25")
        assert len(row.session_id) > 20
        # The whole session is recorded: initialize, initialized, the call (and the SDK's
        # own housekeeping), all under the same session id.
        init = only(calls(rows, "initialize"))
        assert init.session_id == row.session_id
        assert init.era == "legacy"
        assert calls(rows, "notifications/initialized")[0].status == CallLog.Status.OK
    else:
        assert (row.era, row.protocol_version, row.session_id) == ("modern", "2026-07-28", "")
    assert rows[0].id > mark


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_tool_error_is_a_tool_error_row_with_its_message(audit_url, mode):
    mark = last_id()

    async def scenario() -> None:
        async with Client(audit_url, mode=mode) as client:
            result = await client.call_tool("add", {"a": 1, "b": "two"})
            assert result.is_error

    run(scenario())
    row = only(calls(recorded_since(mark, base(audit_url))))
    assert row.status == CallLog.Status.TOOL_ERROR
    assert row.target == "add"
    assert "b" in row.error_message
    assert row.error_code is None
    # add keeps metadata only: the argument names and types, not their values.
    assert row.capture == "metadata"
    assert row.arguments == {"a": "<number>", "b": "<string>"}


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_protocol_error_row_carries_the_json_rpc_code(audit_url, mode):
    mark = last_id()

    async def scenario() -> None:
        async with Client(audit_url, mode=mode) as client:
            with pytest.raises(MCPError):
                await client.call_tool("no_such_tool", {})

    run(scenario())
    row = only(calls(recorded_since(mark, base(audit_url))))
    assert row.status == CallLog.Status.PROTOCOL_ERROR
    assert row.error_code == errors.INVALID_PARAMS
    assert row.target == "no_such_tool"
    assert "no_such_tool" in row.error_message


def test_other_methods_are_recorded_with_their_target(audit_url):
    mark = last_id()

    async def scenario() -> None:
        async with Client(audit_url, mode="2026-07-28") as client:
            await client.list_tools()
            with pytest.raises(MCPError):
                await client.read_resource("audit://nothing")

    run(scenario())
    rows = recorded_since(mark, base(audit_url))
    listing = only(calls(rows, "tools/list"))
    assert listing.status == CallLog.Status.OK
    assert listing.capture == "metadata"
    assert listing.result["tools"] == "<array of 6>"
    read = only(calls(rows, "resources/read"))
    assert read.target == "audit://nothing"
    assert read.status == CallLog.Status.PROTOCOL_ERROR


# -- capture policies -----------------------------------------------------------------------


def test_secrets_and_listed_fields_never_reach_the_log(audit_url):
    mark = last_id()
    arguments = {"user": "ada", "pin": "4711-pin", "api_key": "sk-live-123456", "note": "private"}
    with httpx.Client(timeout=10) as client:
        headers, body = modern_call("login", arguments)
        response = client.post(audit_url, headers=headers, json=body)
    assert response.status_code == 200
    row = only(calls(recorded_since(mark, base(audit_url))))
    assert row.arguments == {
        "user": "ada",
        "pin": "[redacted]",  # writeOnly in the input schema
        "api_key": "[redacted]",  # a secret-looking name
        "note": "[redacted]",  # listed in the tool's policy
    }
    stored = json.dumps([row.arguments, row.result])
    for secret in ("4711-pin", "sk-live-123456", "private"):
        assert secret not in stored
    # The result's own token is redacted by name, and the secrets it echoed are scrubbed.
    assert row.result["structuredContent"]["session_token"] == "[redacted]"
    assert row.result["structuredContent"]["echo"] == "[redacted]"


def test_full_capture_is_cut_at_the_byte_cap_and_marked(audit_url):
    mark = last_id()
    message = "x" * 500
    with httpx.Client(timeout=10) as client:
        headers, body = modern_call("small_echo", {"message": message})
        assert client.post(audit_url, headers=headers, json=body).status_code == 200
    row = only(calls(recorded_since(mark, base(audit_url))))
    assert row.truncated
    assert row.arguments["truncated"] is True
    assert row.arguments["bytes"] == row.arguments_bytes == len(message) + len('{"message":""}')
    assert row.arguments["kept_bytes"] == 40
    assert row.arguments["head"] == '{"message":"' + "x" * 28


def test_nul_characters_cannot_keep_a_call_out_of_the_log(audit_url):
    """PostgreSQL refuses U+0000 in text and jsonb; each call is still recorded (as U+FFFD)."""
    mark = last_id()
    with httpx.Client(timeout=10) as client:
        headers, body = modern_call("echo", {"message": "a\u0000b"})  # full capture
        assert client.post(audit_url, headers=headers, json=body).status_code == 200
        headers, body = modern_call("add", {"a": 1, "b\u0000": 2})  # metadata capture
        assert client.post(audit_url, headers=headers, json=body).status_code == 200
        headers, body = modern_call("no\u0000such", {})
        del headers["mcp-name"]  # no header can carry U+0000: a refused request, still recorded
        client.post(audit_url, headers=headers, json=body)
    rows = calls(recorded_since(mark, base(audit_url)))
    assert [row.target for row in rows] == ["echo", "add", "no\ufffdsuch"]
    assert rows[0].arguments == {"message": "a\ufffdb"}
    assert rows[0].status == CallLog.Status.OK
    assert rows[1].arguments == {"a": "<number>", "b\ufffd": "<number>"}


def test_capture_none_keeps_no_payload(audit_url):
    mark = last_id()
    with httpx.Client(timeout=10) as client:
        headers, body = modern_call("quiet_echo", {"message": "nothing to see"})
        assert client.post(audit_url, headers=headers, json=body).status_code == 200
    row = only(calls(recorded_since(mark, base(audit_url))))
    assert row.status == CallLog.Status.OK
    assert (row.capture, row.arguments, row.result, row.arguments_bytes) == ("", None, None, None)


# -- HTTP-level rejections ------------------------------------------------------------------


REJECTIONS = [
    pytest.param({"headers": {**JSON, "host": "evil.example"}}, 403, "audit", id="host"),
    pytest.param({"headers": {**JSON, "origin": "https://x.example"}}, 403, "audit", id="origin"),
    pytest.param({"slug": "no-such-endpoint"}, 404, "no-such-endpoint", id="unknown-endpoint"),
    pytest.param({"content": b"x" * (5 * 1024 * 1024)}, 413, "audit", id="too-large"),
    pytest.param({"headers": {**JSON, "content-type": "text/plain"}}, 415, "audit", id="media"),
    pytest.param({"headers": {**JSON, "accept": "text/html"}}, 406, "audit", id="accept"),
    pytest.param({"content": b"{not json"}, 400, "audit", id="parse-error"),
]


@pytest.mark.parametrize(("request_args", "status", "slug"), REJECTIONS)
def test_http_rejection_is_one_rejected_row(audit_url, request_args, status, slug):
    mark = last_id()
    headers = request_args.get("headers", JSON)
    url = f"{base(audit_url)}/mcp/{request_args.get('slug', SLUG)}"
    content = request_args.get("content", b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}')
    with httpx.Client(timeout=10) as client:
        response = client.post(url, headers=headers, content=content)
    assert response.status_code == status
    row = only(recorded_since(mark, base(audit_url)))
    assert row.status == CallLog.Status.REJECTED
    assert row.http_status == status
    assert row.endpoint_slug == slug
    assert (row.endpoint_id is None) == (slug != SLUG)
    assert row.error_message == response.json()["error"]["message"]
    assert row.error_code == response.json()["error"]["code"]


def test_a_request_refused_before_decoding_keeps_its_method_and_id(audit_url):
    mark = last_id()
    headers = {**JSON, "content-type": "text/plain"}
    with httpx.Client(timeout=10) as client:
        response = client.post(
            audit_url, headers=headers, content=b'{"jsonrpc": "2.0", "id": 41, "method": "ping"}'
        )
    assert response.status_code == 415
    row = only(recorded_since(mark, base(audit_url)))
    assert (row.status, row.rpc_method, row.rpc_id) == (CallLog.Status.REJECTED, "ping", "41")


def test_modern_request_failing_validation_is_rejected_with_its_method(audit_url):
    mark = last_id()
    headers, body = modern_call("echo", {"message": "hi"})
    headers["mcp-name"] = "not-the-same-tool"
    with httpx.Client(timeout=10) as client:
        response = client.post(audit_url, headers=headers, json=body)
    assert response.status_code == 400
    row = only(recorded_since(mark, base(audit_url)))
    assert (row.status, row.rpc_method, row.target, row.rpc_id) == (
        CallLog.Status.REJECTED,
        "tools/call",
        "echo",
        "7",
    )
    assert row.error_code == response.json()["error"]["code"]


# -- legacy sessions: notifications, client responses, batches, GET and DELETE ---------------


def test_every_message_of_a_legacy_session_is_recorded(audit_url):
    mark = last_id()
    with httpx.Client(timeout=10) as client:
        session_id = initialize(client, audit_url, version="2025-03-26")
        headers = session_headers(session_id, "2025-03-26")
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert client.post(audit_url, headers=headers, json=initialized).status_code == 202
        answer = {"jsonrpc": "2.0", "id": "srv-1", "result": {}}
        assert client.post(audit_url, headers=headers, json=answer).status_code == 202
        batch = [
            {"jsonrpc": "2.0", "id": 10, "method": "ping"},
            {"jsonrpc": "2.0", "id": 11, "method": "tools/call",
             "params": {"name": "echo", "arguments": {"message": "in a batch"}}},
            {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
        ]  # fmt: skip
        assert client.post(audit_url, headers=headers, json=batch).status_code == 200
        with client.stream("GET", audit_url, headers={**headers, "accept": "text/event-stream"}):
            pass
        assert client.delete(audit_url, headers=headers).status_code == 204
        missing = client.post(audit_url, headers=headers, json={"jsonrpc": "2.0", "id": 3,
                                                                  "method": "ping"})  # fmt: skip
        assert missing.status_code == 404
    # The GET stream's row is written when the server sees the client leave, which may come
    # after later requests' rows: wait for it before taking the whole list.
    wait_for(lambda: CallLog.objects.filter(id__gt=mark, http_method="GET").exists())
    rows = recorded_since(mark, base(audit_url))
    by_kind = [(r.http_method, r.message_type, r.rpc_method, r.rpc_id, r.status) for r in rows]
    stream = ("GET", "", "", "", CallLog.Status.OK)
    assert stream in by_kind
    by_kind.remove(stream)
    assert by_kind == [
        ("POST", "request", "initialize", "1", "ok"),
        ("POST", "notification", "notifications/initialized", "", "ok"),
        ("POST", "response", "", '"srv-1"', "ok"),
        ("POST", "request", "ping", "10", "ok"),
        ("POST", "request", "tools/call", "11", "ok"),
        ("POST", "notification", "notifications/roots/list_changed", "", "ok"),
        ("DELETE", "", "", "", "ok"),
        ("POST", "request", "ping", "3", "rejected"),
    ]
    assert {r.session_id for r in rows} == {session_id}
    assert {r.protocol_version for r in rows if r.http_status != 404} == {"2025-03-26"}
    # The stream's row may land anywhere (see above): the rejected ping is the last of the rest.
    assert [r for r in rows if r.http_method != "GET"][-1].http_status == 404


def test_modern_call_cancelled_by_closing_the_stream_is_cancelled(audit_url):
    mark = last_id()
    headers, body = modern_call("sleep_with_progress", {"seconds": 5, "steps": 50})
    timeout = httpx.Timeout(10, read=0.5)
    with httpx.Client(timeout=timeout) as client, pytest.raises(httpx.ReadTimeout):
        client.post(audit_url, headers={**headers, "accept": "application/json"}, json=body)
    row = wait_for(
        lambda: CallLog.objects.filter(id__gt=mark, target="sleep_with_progress").first()
    )
    assert row.status == CallLog.Status.CANCELLED
    assert row.duration_ms < 5000


def test_subscriptions_listen_is_one_row_when_the_stream_ends(audit_url):
    mark = last_id()
    headers = {
        **JSON,
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "subscriptions/listen",
    }
    body = {
        "jsonrpc": "2.0",
        "id": "listen-1",
        "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": True}, "_meta": MODERN_META},
    }
    with (
        httpx.Client(timeout=10) as client,
        client.stream("POST", audit_url, headers=headers, json=body) as response,
    ):
        assert response.status_code == 200
        next(response.iter_lines())
    row = wait_for(
        lambda: CallLog.objects.filter(id__gt=mark, rpc_method="subscriptions/listen").first()
    )
    assert (row.status, row.era, row.rpc_id) == (CallLog.Status.OK, "modern", '"listen-1"')


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_a_call_stopped_at_its_time_limit_is_timed_out(audit_url, mode):
    with asgi_server("daphne", {"MCP_INLINE_TOOL_TIMEOUT_SECONDS": "0.2"}) as server:
        url = f"{server}/mcp/{SLUG}"
        mark = last_id()

        async def scenario() -> None:
            async with Client(url, mode=mode) as client:
                result = await client.call_tool("sleep_with_progress", {"seconds": 2, "steps": 1})
                assert result.is_error
                assert "timed out" in result.content[0].text

        run(scenario())
        row = only(calls(recorded_since(mark, server)))
    assert row.status == CallLog.Status.TIMED_OUT
    assert row.error_message == "Tool timed out after 0.2 s"


# -- the client program, in every era -------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_every_row_names_the_client_the_sdk_declared(audit_url, mode):
    mark = last_id()
    declared = Implementation(name="audit-sdk", version="9.1", title="Audit SDK")

    async def scenario() -> None:
        async with Client(audit_url, mode=mode, client_info=declared) as client:
            await client.call_tool("echo", {"message": "who am I"})

    run(scenario())
    rows = recorded_since(mark, base(audit_url))
    assert calls(rows)
    # Every request of the conversation, the legacy session's notifications included.
    assert {(row.client_name, row.client_version) for row in rows} == {("audit-sdk", "9.1")}
    row = only(calls(rows))
    assert row.client_info["title"] == "Audit SDK" and not row.client_from_user_agent


def test_a_request_declaring_no_client_is_named_by_its_user_agent(audit_url):
    mark = last_id()
    headers, body = modern_call("echo", {"message": "anonymous"})
    with httpx.Client(timeout=10) as client:
        response = client.post(
            audit_url, headers={**headers, "user-agent": "curl/8.5.0"}, json=body
        )
    assert response.status_code == 200
    row = only(calls(recorded_since(mark, base(audit_url))))
    assert (row.client_name, row.client_version, row.client_info) == ("curl", "8.5.0", None)
    assert row.client_from_user_agent


def test_a_refused_initialize_still_names_its_client(audit_url):
    mark = last_id()
    with httpx.Client(timeout=10) as client:
        response = client.post(
            audit_url,
            headers={**JSON, "mcp-session-id": "no-such-session"},
            json={
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "refused-client", "version": "3"}},
            },
        )  # fmt: skip
    assert response.status_code == 404
    row = only(recorded_since(mark, base(audit_url)))
    assert (row.status, row.client_name, row.client_version) == ("rejected", "refused-client", "3")
