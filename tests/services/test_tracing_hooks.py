"""``services/tracing.py``: the request-span attributes the consumer may set (issue #16),
and nothing at all while tracing is off."""

from __future__ import annotations

import orjson
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_app.protocol import jsonrpc, methods
from mcp_app.services import tracing


@pytest.fixture
def exported(monkeypatch: pytest.MonkeyPatch) -> tuple[trace.Tracer, InMemorySpanExporter]:
    # A provider of the test's own: the process-wide one stays unset for the other tests.
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    monkeypatch.setattr(tracing, "tracer", tracer)
    return tracer, exporter


def _annotated(tracer: trace.Tracer, exporter: InMemorySpanExporter, body: object) -> dict:
    # What the transport passes: the decoded message (or batch), and the target it resolved.
    message = jsonrpc.decode(orjson.dumps(body))
    target = None
    if isinstance(message, jsonrpc.Request):
        target = methods.target_of(message.method, message.params)
    with tracer.start_as_current_span("POST /mcp/{slug}"):
        tracing.annotate_request(message, target)
    return dict(exporter.get_finished_spans()[-1].attributes or {})


def test_request_span_names_the_method_tool_and_id(
    exported: tuple[trace.Tracer, InMemorySpanExporter],
) -> None:
    tracer, exporter = exported
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo"}}
    assert _annotated(tracer, exporter, call) == {
        "mcp.method": "tools/call",
        "jsonrpc.request.id": "7",
        "mcp.tool": "echo",
    }
    read = {"jsonrpc": "2.0", "id": "r", "method": "resources/read", "params": {"uri": "x://a"}}
    assert _annotated(tracer, exporter, read)["mcp.resource"] == "x://a"
    prompt = {"jsonrpc": "2.0", "id": 2, "method": "prompts/get", "params": {"name": "greet"}}
    assert _annotated(tracer, exporter, prompt)["mcp.prompt"] == "greet"
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert _annotated(tracer, exporter, note) == {"mcp.method": "notifications/initialized"}
    answer = {"jsonrpc": "2.0", "id": 3, "result": {}}
    assert _annotated(tracer, exporter, answer) == {}
    batch = [
        {"jsonrpc": "2.0", "method": "ping", "id": 1},
        {"jsonrpc": "2.0", "method": "ping", "id": 2},
    ]
    assert _annotated(tracer, exporter, batch) == {"mcp.batch_size": 2}


def test_nothing_is_read_or_set_while_tracing_is_off() -> None:
    assert tracing.tracer is None
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("test").start_as_current_span("request"):
        tracing.annotate_request(
            jsonrpc.decode(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}')
        )
        assert tracing.current_ids() is None
        assert tracing.current_trace_id() == ""
    assert exporter.get_finished_spans()[0].attributes == {}
