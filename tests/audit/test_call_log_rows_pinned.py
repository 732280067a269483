"""The call log's rows, every column, for a representative set of requests: pinned whole.

The other call-log tests check the columns each feature adds; this one holds the complete row
of each kind of request (a success, a tool error, a protocol error, a call refused by a rate
limit, a call whose arguments a policy masked, a 2026-07-28 call cancelled by its client, a
legacy session from initialize to DELETE, HTTP refusals), so moving where the recorder builds
its rows (issue #29) cannot change one of them unnoticed. Driven in-process through the
project's ASGI application; the writer thread writes to the committed test database. Only
what differs per run is normalised: ids, times, the session and request ids.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.forms.models import model_to_dict

from mcp_app.models import CallLog, Policy, RateLimit, Tool
from mcp_app.services.calllog.writer import call_log_flush
from mcp_app.services.history import latest_history_ids
from mcp_app.services.policies.writes import policy_save
from tests.support.catalog import echo_schema, make_endpoint, make_python_tool
from tests.support.inprocess import acall, encode_headers, http_scope
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

SLUG = "pinned-rows"
AGENT = "pinned-rows-test/1.0"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "pinned", "version": "2"},
}
BASE_HEADERS = {
    "host": "127.0.0.1",
    "user-agent": AGENT,
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
}
# Columns that differ per run: compared as "set or not".
VOLATILE = ("created_at", "request_id", "session_id")


def _modern(name: str, arguments: Any, rpc_id: int) -> tuple[dict[str, str], dict[str, Any]]:
    headers = {
        **BASE_HEADERS,
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": name,
    }
    params = {"name": name, "arguments": arguments, "_meta": META}
    return headers, {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": params}


async def _post(headers: dict[str, str], body: Any, method: str = "POST") -> Any:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return await acall(f"/mcp/{SLUG}", raw, encode_headers(headers), method=method)


async def _cancelled_call() -> None:
    """A 2026-07-28 call whose client goes away while it runs (its stream closed).

    The call asks for log messages at ``info``: the tool's first line ("Sleeping ...") opens
    the stream, which shows the tool is running; only then does the client go away."""
    from mcpsite.asgi import application

    headers, body = _modern("sleep_with_progress", {"seconds": 5, "steps": 5}, 40)
    body["params"]["_meta"] = {**META, "io.modelcontextprotocol/logLevel": "info"}
    raw = json.dumps(body).encode()
    incoming = [{"type": "http.request", "body": raw, "more_body": False}]
    sent: list[dict[str, Any]] = []
    running = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop()
        await running.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and message.get("body"):
            running.set()

    async with asyncio.timeout(10):
        await application(http_scope(f"/mcp/{SLUG}", encode_headers(headers)), receive, send)
    streamed = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    assert b"Sleeping 5 s" in streamed
    assert b'"result"' not in streamed  # cancelled before its answer


async def _traffic() -> None:
    # 2026-07-28: success, tool error (the echo executor refuses no message, add fails on
    # a string), protocol error (no such tool), masked arguments, a rate-limited call.
    for name, arguments, rpc_id in (
        ("echo", {"message": "hello"}, 1),
        ("add", {"a": "x", "b": 1}, 2),
        ("nope", {}, 3),
        ("masked", {"message": "mail ops@example.org"}, 4),
        ("limited", {"message": "one"}, 5),
        ("limited", {"message": "two"}, 6),
    ):
        answer = await _post(*_modern(name, arguments, rpc_id))
        assert answer.status in (200, 400, 429), answer.body
    # HTTP refusals: a wrong media type (the body not decoded), a missing version header.
    assert (await _post({**BASE_HEADERS, "content-type": "text/plain"}, b"{}")).status == 415
    _, body = _modern("echo", {"message": "x"}, 7)
    assert (await _post(BASE_HEADERS, body)).status == 400
    await _cancelled_call()
    # A legacy session: initialize, initialized, a call, a list, DELETE.
    init = {
        "jsonrpc": "2.0",
        "id": 10,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "pinned-legacy", "version": "3"},
        },
    }
    answer = await _post(BASE_HEADERS, init)
    assert answer.status == 200
    session = {
        **BASE_HEADERS,
        "mcp-session-id": answer.header("mcp-session-id") or "",
        "mcp-protocol-version": "2025-11-25",
    }
    await _post(session, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    call = {"name": "echo", "arguments": {"message": "legacy"}}
    await _post(session, {"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": call})
    await _post(session, {"jsonrpc": "2.0", "id": 12, "method": "tools/list"})
    assert (await _post(session, b"", method="DELETE")).status == 204


def _normalised(row: CallLog, names: dict[tuple[str, Any], str]) -> dict[str, Any]:
    values = model_to_dict(row)
    for key in VOLATILE:
        values[key] = bool(values[key])
    del values["id"]
    values["duration_ms"] = row.duration_ms is not None and row.duration_ms >= 0
    # How long a refused caller waits depends on when in the window it called.
    values["error_message"] = re.sub(r"after \d+ s", "after N s", values["error_message"])
    for key in ("endpoint", "rate_limit", "tool_history_id", "catalog_version"):
        if values[key] is not None:
            values[key] = names.get((key, values[key]), "?")
    return values


def test_every_column_of_every_kind_of_row_is_as_pinned() -> None:
    endpoint = make_endpoint(SLUG)
    echo = make_python_tool("echo", "echo", input_schema=echo_schema(), capture_mode="full")
    add = make_python_tool(
        "add",
        "add",
        input_schema={"type": "object", "properties": {"a": {}, "b": {}}},
        capture_mode="full",
    )
    masked = make_python_tool("masked", "echo", input_schema=echo_schema(), capture_mode="full")
    limited = make_python_tool("limited", "echo", input_schema=echo_schema())
    sleeper = make_python_tool("sleep_with_progress", "sleep_with_progress")
    endpoint.tools.add(echo, add, masked, limited, sleeper)
    policy_save(
        Policy(endpoint=endpoint, name="mask-mail", kind="mask", position=0, target="masked"),
        actor=None,
        source="test",
    )
    limit = RateLimit(
        # Seven digits whatever ran before: the refusal's result holds the id, and its size
        # is pinned; and counts of no earlier test's limit in this Redis.
        pk=secrets.randbelow(9 * 10**6) + 10**6,
        endpoint=endpoint,
        scope="caller",
        target_kind="tool",
        target_name="limited",
        rate=1,
        window="hour",
    )
    limit.full_clean()
    limit.save()
    mark = CallLog.objects.order_by("-id").values_list("id", flat=True).first() or 0

    async_to_sync(_traffic)()
    # The cancelled call's row is queued when its task has ended, maybe after the flush.
    wait_until(
        lambda: (
            call_log_flush(timeout=10)
            and CallLog.objects.filter(id__gt=mark, user_agent=AGENT).count() >= len(PINNED)
        ),
        "every row written",
    )
    rows = list(CallLog.objects.filter(id__gt=mark, user_agent=AGENT).order_by("id"))
    endpoint.refresh_from_db()
    names: dict[tuple[str, Any], str] = {
        ("endpoint", endpoint.pk): "ENDPOINT",
        ("rate_limit", limit.pk): "LIMIT",
        ("catalog_version", endpoint.catalog_version): "VERSION",
    }
    tools = {tool.pk: tool.name for tool in (echo, add, masked, limited, sleeper)}
    for pk, history in latest_history_ids(Tool, list(tools)).items():
        names[("tool_history_id", history)] = f"HISTORY:{tools[pk]}"
    got = [_normalised(row, names) for row in rows]
    # The cancelled call's row is written when its task ends: order by what the row is.
    got.sort(key=lambda row: (row["http_method"], row["rpc_method"], row["rpc_id"]))
    assert got == PINNED


PINNED: list[dict[str, Any]] = [
    {
        "created_at": True,
        "duration_ms": True,
        "endpoint": "ENDPOINT",
        "endpoint_slug": "pinned-rows",
        "tool_team": None,
        "era": "legacy",
        "protocol_version": "2025-11-25",
        "session_id": True,
        "http_method": "DELETE",
        "http_status": 204,
        "message_type": "",
        "rpc_method": "",
        "rpc_id": "",
        "target": "",
        "principal": None,
        "client_id": "",
        "remote_addr": "127.0.0.1",
        "user_agent": "pinned-rows-test/1.0",
        "client_name": "pinned-legacy",
        "client_version": "3",
        "client_info": {"name": "pinned-legacy", "version": "3"},
        "status": "ok",
        "upstream": "",
        "rate_limit": None,
        "error_code": None,
        "error_message": "",
        "capture": "",
        "arguments": None,
        "result": None,
        "arguments_bytes": None,
        "result_bytes": None,
        "truncated": False,
        "task_id": "",
        "worker": "",
        "request_id": True,
        "progress": None,
        "catalog_version": "VERSION",
        "tool_history_id": None,
        "policy_decisions": None,
    },
    {
        "created_at": True,
        "duration_ms": True,
        "endpoint": "ENDPOINT",
        "endpoint_slug": "pinned-rows",
        "tool_team": None,
        "era": "",
        "protocol_version": "",
        "session_id": False,
        "http_method": "POST",
        "http_status": 415,
        "message_type": "",
        "rpc_method": "",
        "rpc_id": "",
        "target": "",
        "principal": None,
        "client_id": "",
        "remote_addr": "127.0.0.1",
        "user_agent": "pinned-rows-test/1.0",
        "client_name": "pinned-rows-test",
        "client_version": "1.0",
        "client_info": None,
        "status": "rejected",
        "upstream": "",
        "rate_limit": None,
        "error_code": -32600,
        "error_message": "Content-Type must be application/json",
        "capture": "",
        "arguments": None,
        "result": None,
        "arguments_bytes": None,
        "result_bytes": None,
        "truncated": False,
        "task_id": "",
        "worker": "",
        "request_id": True,
        "progress": None,
        "catalog_version": "VERSION",
        "tool_history_id": None,
        "policy_decisions": None,
    },
    {
        "created_at": True,
        "duration_ms": True,
        "endpoint": "ENDPOINT",
        "endpoint_slug": "pinned-rows",
        "tool_team": None,
        "era": "legacy",
        "protocol_version": "2025-11-25",
        "session_id": True,
        "http_method": "POST",
        "http_status": 200,
        "message_type": "request",
        "rpc_method": "initialize",
        "rpc_id": "10",
        "target": "",
        "principal": None,
        "client_id": "",
        "remote_addr": "127.0.0.1",
        "user_agent": "pinned-rows-test/1.0",
        "client_name": "pinned-legacy",
        "client_version": "3",
        "client_info": {"name": "pinned-legacy", "version": "3"},
        "status": "ok",
        "upstream": "",
        "rate_limit": None,
        "error_code": None,
        "error_message": "",
        "capture": "metadata",
        "arguments": {
            "clientInfo": {"name": "<string>", "version": "<string>"},
            "capabilities": {},
            "protocolVersion": "<string>",
        },
        "result": None,
        "arguments_bytes": 102,
        "result_bytes": None,
        "truncated": False,
        "task_id": "",
        "worker": "",
        "request_id": True,
        "progress": None,
        "catalog_version": "VERSION",
        "tool_history_id": None,
        "policy_decisions": None,
    },
    {
        "created_at": True,
        "duration_ms": True,
        "endpoint": "ENDPOINT",
        "endpoint_slug": "pinned-rows",
        "tool_team": None,
        "era": "legacy",
        "protocol_version": "2025-11-25",
        "session_id": True,
        "http_method": "POST",
        "http_status": 202,
        "message_type": "notification",
        "rpc_method": "notifications/initialized",
        "rpc_id": "",
        "target": "",
        "principal": None,
        "client_id": "",
        "remote_addr": "127.0.0.1",
        "user_agent": "pinned-rows-test/1.0",
        "client_name": "pinned-legacy",
        "client_version": "3",
        "client_info": {"name": "pinned-legacy", "version": "3"},
        "status": "ok",
        "upstream": "",
        "rate_limit": None,
        "error_code": None,
        "error_message": "",
        "capture": "",
        "arguments": None,
        "result": None,
        "arguments_bytes": None,
        "result_bytes": None,
        "truncated": False,
        "task_id": "",
        "worker": "",
        "request_id": True,
        "progress": None,
        "catalog_version": "VERSION",
        "tool_history_id": None,
        "policy_decisions": None,
    },
    {
        "created_at": True,
        "duration_ms": True,
        "endpoint": "ENDPOINT",
        "endpoint_slug": "pinned-rows",
        "tool_team": None,
        "era": "modern",
        "protocol_version": "2026-07-28",
        "session_id": False,
        "http_method": "POST",
        "http_status": 200,
        "message_type": "request",
        "rpc_method": "tools/call",
        "rpc_id": "1",
        "target": "echo",
        "principal": None,
        "client_id": "",
        "remote_addr": "127.0.0.1",
        "user_agent": "pinned-rows-test/1.0",
        "client_name": "pinned",
        "client_version": "2",
        "client_info": {"name": "pinned", "version": "2"},
        "status": "ok",
        "upstream": "",
        "rate_limit": None,
        "error_code": None,
        "error_message": "",
        "capture": "full",
        "arguments": {"message": "hello"},
        "result": {
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {
                    "name": "mcphost",
                    "title": "pinned-rows endpoint",
                    "version": "0.1.0",
                }
            },
            "content": [{"text": "hello", "type": "text"}],
            "isError": False,
            "resultType": "complete",
        },
        "arguments_bytes": 19,
        "result_bytes": 199,
        "truncated": False,
        "task_id": "",
        "worker": "",
        "request_id": True,
        "progress": None,
        "catalog_version": "VERSION",
        "tool_history_id": "HISTORY:echo",
        "policy_decisions": None,
    },
    {
        "created_at": True,
        "duration_ms": True,
        "endpoint": "ENDPOINT",
        "endpoint_slug": "pinned-rows",
        "tool_team": None,
        "era": "legacy",
        "protocol_version": "2025-11-25",
        "session_id": True,
        "http_method": "POST",
        "http_status": 200,
        "message_type": "request",
        "rpc_method": "tools/call",
        "rpc_id": "11",
        "target": "echo",
        "principal": None,
        "client_id": "",
        "remote_addr": "127.0.0.1",
        "user_agent": "pinned-rows-test/1.0",
        "client_name": "pinned-legacy",
        "client_version": "3",
        "client_info": {"name": "pinned-legacy", "version": "3"},
        "status": "ok",
        "upstream": "",
        "rate_limit": None,
        "error_code": None,
        "error_message": "",
        "capture": "full",
        "arguments": {"message": "legacy"},
        "result": {"content": [{"text": "legacy", "type": "text"}], "isError": False},
        "arguments_bytes": 20,
        "result_bytes": 61,
        "truncated": False,
        "task_id": "",
        "worker": "",
        "request_id": True,
        "progress": None,
        "catalog_version": "VERSION",
        "tool_history_id": "HISTORY:echo",
        "policy_decisions": None,
    },
    {
        "created_at": True,
        "duration_ms": True,
        "endpoint": "ENDPOINT",
        "endpoint_slug": "pinned-rows",
        "tool_team": None,
        "era": "modern",
        "protocol_version": "2026-07-28",
        "session_id": False,
        "http_method": "POST",
        "http_status": 200,
        "message_type": "request",
        "rpc_method": "tools/call",
        "rpc_id": "2",
        "target": "add",
        "principal": None,
        "client_id": "",
        "remote_addr": "127.0.0.1",
        "user_agent": "pinned-rows-test/1.0",
        "client_name": "pinned",
        "client_version": "2",
        "client_info": {"name": "pinned", "version": "2"},
        "status": "tool_error",
        "upstream": "",
        "rate_limit": None,
        "error_code": None,
        "error_message": "Invalid arguments: at 'a': 'x' is not of type 'number'",
        "capture": "full",
        "arguments": {"a": "x", "b": 1},
        "result": {
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {
                    "name": "mcphost",
                    "title": "pinned-rows endpoint",
                    "version": "0.1.0",
                }
            },
            "content": [
                {"text": "Invalid arguments: at 'a': 'x' is not of type 'number'", "type": "text"}
            ],
            "isError": True,
            "resultType": "complete",
        },
        "arguments_bytes": 15,
        "result_bytes": 247,
        "truncated": False,
        "task_id": "",
        "worker": "",
        "request_id": True,
        "progress": None,
        "catalog_version": "VERSION",
        "tool_history_id": "HISTORY:add",
        "policy_decisions": None,
    },
    {
        "created_at": True,
        "duration_ms": True,
        "endpoint": "ENDPOINT",
        "endpoint_slug": "pinned-rows",
        "tool_team": None,
        "era": "modern",
        "protocol_version": "2026-07-28",
        "session_id": False,
        "http_method": "POST",
        "http_status": 400,
        "message_type": "request",
        "rpc_method": "tools/call",
        "rpc_id": "3",
        "target": "nope",
        "principal": None,
        "client_id": "",
        "remote_addr": "127.0.0.1",
        "user_agent": "pinned-rows-test/1.0",
        "client_name": "pinned",
        "client_version": "2",
        "client_info": {"name": "pinned", "version": "2"},
        "status": "protocol_error",
        "upstream": "",
        "rate_limit": None,
        "error_code": -32602,
        "error_message": "Unknown tool: nope",
        "capture": "metadata",
        "arguments": {},
        "result": None,
        "arguments_bytes": 2,
        "result_bytes": None,
        "truncated": False,
        "task_id": "",
        "worker": "",
        "request_id": True,
        "progress": None,
        "catalog_version": "VERSION",
        "tool_history_id": None,
        "policy_decisions": None,
    },
    {
        "created_at": True,
        "duration_ms": True,
        "endpoint": "ENDPOINT",
        "endpoint_slug": "pinned-rows",
        "tool_team": None,
        "era": "modern",
        "protocol_version": "2026-07-28",
        "session_id": False,
        "http_method": "POST",
        "http_status": 200,
        "message_type": "request",
        "rpc_method": "tools/call",
        "rpc_id": "4",
        "target": "masked",
        "principal": None,
        "client_id": "",
        "remote_addr": "127.0.0.1",
        "user_agent": "pinned-rows-test/1.0",
        "client_name": "pinned",
        "client_version": "2",
        "client_info": {"name": "pinned", "version": "2"},
        "status": "ok",
        "upstream": "",
        "rate_limit": None,
        "error_code": None,
        "error_message": "",
        "capture": "full",
        "arguments": {"message": "mail [masked:email]"},
        "result": {
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {
                    "name": "mcphost",
                    "title": "pinned-rows endpoint",
                    "version": "0.1.0",
                }
            },
            "content": [{"text": "mail [masked:email]", "type": "text"}],
            "isError": False,
            "resultType": "complete",
        },
        "arguments_bytes": 33,
        "result_bytes": 213,
        "truncated": False,
        "task_id": "",
        "worker": "",
        "request_id": True,
        "progress": None,
        "catalog_version": "VERSION",
        "tool_history_id": "HISTORY:masked",
        "policy_decisions": [
            {
                "kind": "mask",
                "mode": "enforce",
                "phase": "after",
                "action": "masked",
                "detail": "1 email",
                "policy": "mask-mail",
                "applied": True,
            }
        ],
    },
    {
        "created_at": True,
        "duration_ms": True,
        "endpoint": "ENDPOINT",
        "endpoint_slug": "pinned-rows",
        "tool_team": None,
        "era": "modern",
        "protocol_version": "2026-07-28",
        "session_id": False,
        "http_method": "POST",
        "http_status": 200,  # the stream had opened (the log line)
        "message_type": "request",
        "rpc_method": "tools/call",
        "rpc_id": "40",
        "target": "sleep_with_progress",
        "principal": None,
        "client_id": "",
        "remote_addr": "127.0.0.1",
        "user_agent": "pinned-rows-test/1.0",
        "client_name": "pinned",
        "client_version": "2",
        "client_info": {"name": "pinned", "version": "2"},
        "status": "cancelled",
        "upstream": "",
        "rate_limit": None,
        "error_code": None,
        "error_message": "",
        "capture": "metadata",
        "arguments": {"steps": "<number>", "seconds": "<number>"},
        "result": None,
        "arguments_bytes": 23,
        "result_bytes": None,
        "truncated": False,
        "task_id": "",
        "worker": "",
        "request_id": True,
        "progress": None,
        "catalog_version": "VERSION",
        "tool_history_id": "HISTORY:sleep_with_progress",
        "policy_decisions": None,
    },
    {
        "created_at": True,
        "duration_ms": True,
        "endpoint": "ENDPOINT",
        "endpoint_slug": "pinned-rows",
        "tool_team": None,
        "era": "modern",
        "protocol_version": "2026-07-28",
        "session_id": False,
        "http_method": "POST",
        "http_status": 200,
        "message_type": "request",
        "rpc_method": "tools/call",
        "rpc_id": "5",
        "target": "limited",
        "principal": None,
        "client_id": "",
        "remote_addr": "127.0.0.1",
        "user_agent": "pinned-rows-test/1.0",
        "client_name": "pinned",
        "client_version": "2",
        "client_info": {"name": "pinned", "version": "2"},
        "status": "ok",
        "upstream": "",
        "rate_limit": None,
        "error_code": None,
        "error_message": "",
        "capture": "metadata",
        "arguments": {"message": "<string>"},
        "result": {
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {
                    "name": "<string>",
                    "title": "<string>",
                    "version": "<string>",
                }
            },
            "content": "<array of 1>",
            "isError": "<boolean>",
            "resultType": "<string>",
        },
        "arguments_bytes": 17,
        "result_bytes": 197,
        "truncated": False,
        "task_id": "",
        "worker": "",
        "request_id": True,
        "progress": None,
        "catalog_version": "VERSION",
        "tool_history_id": "HISTORY:limited",
        "policy_decisions": None,
    },
    {
        "created_at": True,
        "duration_ms": True,
        "endpoint": "ENDPOINT",
        "endpoint_slug": "pinned-rows",
        "tool_team": None,
        "era": "modern",
        "protocol_version": "2026-07-28",
        "session_id": False,
        "http_method": "POST",
        "http_status": 200,
        "message_type": "request",
        "rpc_method": "tools/call",
        "rpc_id": "6",
        "target": "limited",
        "principal": None,
        "client_id": "",
        "remote_addr": "127.0.0.1",
        "user_agent": "pinned-rows-test/1.0",
        "client_name": "pinned",
        "client_version": "2",
        "client_info": {"name": "pinned", "version": "2"},
        "status": "rate_limited",
        "upstream": "",
        "rate_limit": "LIMIT",
        "error_code": None,
        "error_message": "Rate limit reached (per caller, tool limited: 1/hour); retry after N s.",
        "capture": "metadata",
        "arguments": {"message": "<string>"},
        "result": {
            "_meta": {
                "mcphost/rateLimit": {
                    "limit": "<object of 5 keys>",
                    "retryAfterSeconds": "<number>",
                },
                "io.modelcontextprotocol/serverInfo": {
                    "name": "<string>",
                    "title": "<string>",
                    "version": "<string>",
                },
            },
            "content": "<array of 1>",
            "isError": "<boolean>",
            "resultType": "<string>",
        },
        "arguments_bytes": 17,
        "result_bytes": 461,
        "truncated": False,
        "task_id": "",
        "worker": "",
        "request_id": True,
        "progress": None,
        "catalog_version": "VERSION",
        "tool_history_id": "HISTORY:limited",
        "policy_decisions": None,
    },
    {
        "created_at": True,
        "duration_ms": True,
        "endpoint": "ENDPOINT",
        "endpoint_slug": "pinned-rows",
        "tool_team": None,
        "era": "modern",
        "protocol_version": "",
        "session_id": False,
        "http_method": "POST",
        "http_status": 400,
        "message_type": "request",
        "rpc_method": "tools/call",
        "rpc_id": "7",
        "target": "echo",
        "principal": None,
        "client_id": "",
        "remote_addr": "127.0.0.1",
        "user_agent": "pinned-rows-test/1.0",
        "client_name": "pinned",
        "client_version": "2",
        "client_info": {"name": "pinned", "version": "2"},
        "status": "rejected",
        "upstream": "",
        "rate_limit": None,
        "error_code": -32020,
        "error_message": "MCP-Protocol-Version header is required",
        "capture": "full",
        "arguments": {"message": "x"},
        "result": None,
        "arguments_bytes": 15,
        "result_bytes": None,
        "truncated": False,
        "task_id": "",
        "worker": "",
        "request_id": True,
        "progress": None,
        "catalog_version": "VERSION",
        "tool_history_id": "HISTORY:echo",
        "policy_decisions": None,
    },
    {
        "created_at": True,
        "duration_ms": True,
        "endpoint": "ENDPOINT",
        "endpoint_slug": "pinned-rows",
        "tool_team": None,
        "era": "legacy",
        "protocol_version": "2025-11-25",
        "session_id": True,
        "http_method": "POST",
        "http_status": 200,
        "message_type": "request",
        "rpc_method": "tools/list",
        "rpc_id": "12",
        "target": "",
        "principal": None,
        "client_id": "",
        "remote_addr": "127.0.0.1",
        "user_agent": "pinned-rows-test/1.0",
        "client_name": "pinned-legacy",
        "client_version": "3",
        "client_info": {"name": "pinned-legacy", "version": "3"},
        "status": "ok",
        "upstream": "",
        "rate_limit": None,
        "error_code": None,
        "error_message": "",
        "capture": "metadata",
        "arguments": None,
        "result": {"tools": "<array of 5>"},
        "arguments_bytes": None,
        "result_bytes": 772,
        "truncated": False,
        "task_id": "",
        "worker": "",
        "request_id": True,
        "progress": None,
        "catalog_version": "VERSION",
        "tool_history_id": None,
        "policy_decisions": None,
    },
]
