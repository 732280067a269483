"""OpenTelemetry traces (issue #16): a live uvicorn process and a Celery worker export over
OTLP/HTTP to a receiver this test runs on 127.0.0.1; an MCP request, its tool call and a
background call on the worker arrive as one trace, whose id is the request id. With no
``OTEL_*`` variable nothing is installed.
"""

from __future__ import annotations

import gzip
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from channels.routing import ProtocolTypeRouter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from mcp_app.models import CallLog, Tool
from mcp_app.ops.tracing import instrument_asgi, tracing_requested
from mcp_app.services import tracing
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.live import asgi_server, flush_database
from tests.support.waiting import wait_until
from tests.support.worker import BACKGROUND_ENV, celery_worker

SLUG = "traced"
TOOL_MODULES = {"MCP_PYTHON_TOOL_MODULES": "mcp_app.builtin_tools,tests.support.failing_tools"}
JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
WAIT_SECONDS = 20.0


def seen(predicate: Any) -> Any:
    """What ``predicate`` finds once it is there: logs and rows are written after the answer."""
    return wait_until(predicate, "seen", timeout=WAIT_SECONDS)


RUN_TASK = "run/mcp_app.run_background_call"
ENQUEUE_TASK = "apply_async/mcp_app.run_background_call"


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    attributes: dict[str, Any]
    service: str


class OtlpReceiver:
    """An OTLP/HTTP trace receiver: ``POST /v1/traces`` with an ExportTraceServiceRequest."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.changed = threading.Condition()

    def receive(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        received = []
        for resource_spans in request.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            attributes=_attributes(span.attributes),
                            service=resource.get("service.name", ""),
                        )
                    )
        with self.changed:
            self.spans.extend(received)
            self.changed.notify_all()

    def wait_for(self, predicate: Callable[[list[ReceivedSpan]], Any]) -> Any:
        deadline = time.monotonic() + WAIT_SECONDS
        with self.changed:
            while not (found := predicate(list(self.spans))):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    names = sorted({(span.trace_id, span.name) for span in self.spans})
                    raise AssertionError(f"not exported within {WAIT_SECONDS} s; got {names}")
                self.changed.wait(remaining)
            return found


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: getattr(pair.value, pair.value.WhichOneof("value")) for pair in pairs}


@pytest.fixture(scope="module")
def receiver() -> Iterator[tuple[OtlpReceiver, str]]:
    spans = OtlpReceiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path == "/v1/traces":
                spans.receive(body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield spans, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def traced(
    django_db_setup: None, django_db_blocker: Any, receiver: tuple[OtlpReceiver, str]
) -> Iterator[tuple[str, OtlpReceiver, Path]]:
    """uvicorn and a worker exporting to the receiver; yields the endpoint URL, the receiver
    and the server's log file."""
    spans, otlp_url = receiver
    with django_db_blocker.unblock():
        endpoint = make_endpoint(SLUG)
        # Not validated against the test process's registry: only the server loads its module.
        explode = Tool.objects.create(
            name="explode", kind=Tool.Kind.PYTHON, config={"function": "test_explode"}
        )
        background = make_python_tool("bg_echo", "echo", execution_mode=Tool.Execution.BACKGROUND)
        endpoint.tools.add(explode, background, make_python_tool("echo", "echo"))
    env = {
        **TOOL_MODULES,
        **BACKGROUND_ENV,
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_url,
        # Export within a tenth of a second rather than the default five.
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "LOG_FORMAT": "json",
        "MCPHOST_KEEP_SERVER_LOGS": "1",
    }
    for name in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_SDK_DISABLED"):
        env[name] = ""
    with celery_worker(extra_env=env), asgi_server("uvicorn", extra_env=env) as base_url:
        port = base_url.rsplit(":", 1)[1]
        log_path = Path(tempfile.gettempdir()) / f"mcphost-uvicorn-{port}.log"
        yield f"{base_url}/mcp/{SLUG}", spans, log_path
    log_path.unlink(missing_ok=True)
    flush_database(django_db_blocker)


def _call(url: str, tool: str, headers: dict[str, str] | None = None) -> httpx.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 7,
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
    return httpx.post(url, headers={**JSON, **modern, **(headers or {})}, json=body, timeout=20)


def _in_trace(trace_id: str, *names: str) -> Callable[[list[ReceivedSpan]], Any]:
    """A predicate: the spans of ``trace_id`` by name, once every one of ``names`` is there."""

    def found(spans: list[ReceivedSpan]) -> dict[str, ReceivedSpan] | None:
        by_name = {span.name: span for span in spans if span.trace_id == trace_id}
        return by_name if all(name in by_name for name in names) else None

    return found


@pytest.mark.django_db
def test_mcp_request_and_tool_call_spans_continue_the_callers_trace(
    traced: tuple[str, OtlpReceiver, Path],
) -> None:
    url, spans, _ = traced
    response = _call(url, "echo", {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"})
    assert response.status_code == 200
    assert response.headers["x-request-id"] == CALLER_TRACE

    found = spans.wait_for(_in_trace(CALLER_TRACE, "POST /mcp/{slug}", "tools/call echo"))
    request, tool = found["POST /mcp/{slug}"], found["tools/call echo"]
    assert (request.kind, request.parent_id) == (Span.SPAN_KIND_SERVER, CALLER_SPAN)
    assert request.attributes["http.route"] == "/mcp/{slug}"
    assert request.attributes["mcp.endpoint"] == SLUG
    assert (request.attributes["mcp.method"], request.attributes["mcp.tool"]) == (
        "tools/call",
        "echo",
    )
    assert "jsonrpc.request.id" in request.attributes
    assert request.service == "mcphost"
    assert tool.parent_id == request.span_id
    assert tool.attributes == {"mcp.tool": "echo", "mcp.tool.kind": "python"}


@pytest.mark.django_db
def test_a_background_call_is_one_trace_from_request_to_worker(
    traced: tuple[str, OtlpReceiver, Path],
) -> None:
    url, spans, _ = traced
    response = _call(url, "bg_echo")
    assert response.status_code == 200
    assert orjson.loads(response.content)["result"]["content"] == [{"type": "text", "text": "hi"}]
    # Without an incoming id or traceparent, the request id is the new trace's id.
    trace_id = response.headers["x-request-id"]
    assert len(trace_id) == 32

    found = spans.wait_for(
        _in_trace(trace_id, "POST /mcp/{slug}", ENQUEUE_TASK, RUN_TASK, "tools/call bg_echo")
    )
    request, enqueue = found["POST /mcp/{slug}"], found[ENQUEUE_TASK]
    run, tool = found[RUN_TASK], found["tools/call bg_echo"]
    assert enqueue.kind == Span.SPAN_KIND_PRODUCER
    assert (run.kind, run.parent_id) == (Span.SPAN_KIND_CONSUMER, enqueue.span_id)
    assert tool.parent_id == run.span_id
    assert {run.service, tool.service, request.service} == {"mcphost"}
    # The worker's queries are in the trace too (psycopg instrumentation).
    assert spans.wait_for(
        lambda received: [
            span
            for span in received
            if span.trace_id == trace_id and span.attributes.get("db.system") == "postgresql"
        ]
    )

    row = seen(
        lambda: CallLog.objects.filter(request_id=trace_id).first(),
    )
    assert row.target == "bg_echo"


@pytest.mark.django_db
def test_json_log_lines_carry_the_trace_and_span_ids(
    traced: tuple[str, OtlpReceiver, Path],
) -> None:
    url, spans, log_path = traced
    response = _call(url, "explode")
    trace_id = response.headers["x-request-id"]
    tool = spans.wait_for(_in_trace(trace_id, "tools/call explode"))["tools/call explode"]

    def failure_lines() -> list[dict[str, Any]]:
        lines = [orjson.loads(raw) for raw in log_path.read_bytes().splitlines() if raw[:1] == b"{"]
        # uvicorn's access line of the request carries the ids too; the tool's line is wanted.
        return [
            line
            for line in lines
            if line.get("trace_id") == trace_id and line["logger"] != "uvicorn.access"
        ]

    line = seen(failure_lines)[-1]
    assert line["message"] == "Tool function failed"
    assert (line["request_id"], line["span_id"]) == (trace_id, tool.span_id)


def test_without_otel_variables_nothing_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    router = ProtocolTypeRouter({})
    assert instrument_asgi(router) is router
    assert tracing.tracer is None
    assert tracing.current_ids() is None

    import mcpsite.asgi

    # This process started without OTEL_* variables: nothing wraps the application (the MCP
    # route in front of the router, mcp_app/transport/routing.py) but the lifespan handler.
    served = mcpsite.asgi.application.__wrapped__
    assert served.__qualname__ == "mcp_first.<locals>.app"


def test_which_variables_turn_tracing_on() -> None:
    assert not tracing_requested({})
    assert tracing_requested({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert tracing_requested({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"})
    assert tracing_requested({"OTEL_TRACES_EXPORTER": "console"})
    assert not tracing_requested(
        {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    )
    assert not tracing_requested(
        {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    )
