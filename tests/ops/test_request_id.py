"""The request id (issue #16): the same value in the ``X-Request-Id`` response header, the
JSON log line of the request and its call-log row; taken from the client's ``X-Request-Id``,
else from its ``traceparent``, else generated. A live server writes the log and the rows.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from mcp_app.models import CallLog, Tool
from mcp_app.services.request_ids import request_id_for, trace_id
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.inprocess import acall, encode_headers
from tests.support.live import asgi_server, flush_database
from tests.support.waiting import wait_until

SLUG = "request-ids"
SERVER_ENV = {
    "LOG_FORMAT": "json",
    "MCP_PYTHON_TOOL_MODULES": "mcp_app.builtin_tools,tests.support.failing_tools",
    "MCPHOST_KEEP_SERVER_LOGS": "1",
}
JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
WAIT_SECONDS = 10.0


def seen(predicate: Any) -> Any:
    """What ``predicate`` finds once it is there: logs and rows are written after the answer."""
    return wait_until(predicate, "seen", timeout=WAIT_SECONDS)


@pytest.fixture(scope="module")
def server(django_db_setup: None, django_db_blocker: Any) -> Iterator[tuple[str, Path]]:
    """A uvicorn process logging JSON; yields its endpoint URL and its log file."""
    with django_db_blocker.unblock():
        endpoint = make_endpoint(SLUG)
        # Not validated against the test process's registry: only the server loads its module.
        explode = Tool.objects.create(
            name="explode", kind=Tool.Kind.PYTHON, config={"function": "test_explode"}
        )
        endpoint.tools.add(explode, make_python_tool("echo", "echo"))
    with asgi_server("uvicorn", extra_env=SERVER_ENV) as base_url:
        port = base_url.rsplit(":", 1)[1]
        log_path = Path(tempfile.gettempdir()) / f"mcphost-uvicorn-{port}.log"
        yield f"{base_url}/mcp/{SLUG}", log_path
    log_path.unlink(missing_ok=True)
    flush_database(django_db_blocker)


def _call(url: str, tool: str, headers: dict[str, str]) -> httpx.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": {"message": "hi"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    modern = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": tool}
    return httpx.post(url, headers={**JSON, **modern, **headers}, json=body, timeout=10)


def _log_lines(log_path: Path) -> list[dict[str, Any]]:
    lines = []
    for raw in log_path.read_bytes().splitlines():
        if raw.startswith(b"{"):
            lines.append(orjson.loads(raw))
    return lines


@pytest.mark.django_db
def test_request_id_is_in_the_header_the_log_line_and_the_call_log_row(
    server: tuple[str, Path],
) -> None:
    url, log_path = server
    response = _call(url, "explode", {"x-request-id": "client-chosen.42"})
    assert response.status_code == 200
    assert response.headers["x-request-id"] == "client-chosen.42"

    # The function's own exception is an error result for the client and a warning here.
    line = seen(
        lambda: [line for line in _log_lines(log_path) if line["message"] == "Tool function failed"]
    )[-1]
    assert line["request_id"] == "client-chosen.42"
    assert (line["level"], line["tool"]) == ("WARNING", "test_explode")
    assert "RuntimeError: exploded as asked" in line["exception"]

    row = seen(
        lambda: CallLog.objects.filter(request_id="client-chosen.42").first(),
    )
    assert (row.rpc_method, row.target) == ("tools/call", "explode")


@pytest.mark.django_db
def test_request_id_follows_traceparent_or_is_generated(server: tuple[str, Path]) -> None:
    url, _ = server
    traced = _call(url, "echo", {"traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01"})
    assert traced.headers["x-request-id"] == TRACE_ID
    fresh = _call(url, "echo", {})
    generated = fresh.headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{16}", generated)
    assert seen(
        lambda: CallLog.objects.filter(request_id=TRACE_ID).exists(),
    )
    assert seen(
        lambda: CallLog.objects.filter(request_id=generated).exists(),
    )


@pytest.mark.django_db
def test_browser_clients_may_read_the_request_id(server: tuple[str, Path]) -> None:
    url, _ = server
    response = _call(url, "echo", {"origin": "http://localhost:6274"})
    exposed = [
        name.strip() for name in response.headers["access-control-expose-headers"].split(",")
    ]
    assert "X-Request-Id" in exposed


def test_unusable_incoming_ids_are_replaced() -> None:
    too_long = "x" * 65
    assert re.fullmatch(r"[0-9a-f]{16}", request_id_for({"x-request-id": [too_long]}))
    assert re.fullmatch(r"[0-9a-f]{16}", request_id_for({"x-request-id": ["has space"]}))
    assert trace_id(f"00-{'0' * 32}-00f067aa0ba902b7-01") == ""
    assert trace_id(f"ff-{TRACE_ID}-00f067aa0ba902b7-01") == ""
    assert trace_id(f"00-{TRACE_ID}-00f067aa0ba902b7-01-extra") == ""
    assert trace_id(f"01-{TRACE_ID}-00f067aa0ba902b7-01-future") == TRACE_ID


async def test_django_pages_carry_a_request_id_too() -> None:
    answer = await acall(
        "/accounts/login/", method="GET", headers=encode_headers({"x-request-id": "page-1"})
    )
    assert (answer.status, answer.header("x-request-id")) == (200, "page-1")
    generated = await acall("/accounts/login/", method="GET")
    assert re.fullmatch(r"[0-9a-f]{16}", generated.header("x-request-id") or "")


def test_generated_ids_do_not_repeat_in_a_process_or_its_forked_child() -> None:
    ids = {request_id_for({}) for _ in range(1000)}
    assert len(ids) == 1000
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child reports its first id, then leaves at once
        os.write(write, request_id_for({}).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    child_id = os.read(read, 64).decode()
    os.close(read)
    # A different per-process prefix: the parent's counter state must not carry over.
    assert child_id[:8] != next(iter(ids))[:8]
    assert child_id not in ids
