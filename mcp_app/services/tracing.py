"""Tracing as the layers below the interfaces see it: off (``tracer is None``) unless
``mcp_app/ops/tracing.py`` turned it on for this process.

Hot-path code (a tool call, a request id, a log line) reads ``tracer`` and does nothing more
while it is None, so an untraced process makes no OpenTelemetry call per request. The SDK,
its exporter and the instrumentations are set up in ``ops`` only (docs/operations.md,
"Traces").
"""

from __future__ import annotations

from opentelemetry import trace

tracer: trace.Tracer | None = None


def enable(new_tracer: trace.Tracer) -> None:
    """Make ``new_tracer`` the one tool calls and request ids use from now on."""
    global tracer
    tracer = new_tracer


def current_ids() -> tuple[str, str] | None:
    """Return the (trace id, span id) of the current span in hex, or None without one."""
    if tracer is None:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return trace.format_trace_id(context.trace_id), trace.format_span_id(context.span_id)


def current_trace_id() -> str:
    """Return the current span's trace id in hex, or "" when not tracing."""
    ids = current_ids()
    return ids[0] if ids else ""


def annotate_request(payload: object) -> None:
    """Put the MCP method, the tool or resource it names and the JSON-RPC id on the current
    span (the request's), for a decoded JSON-RPC message or batch; nothing when not tracing.
    """
    if tracer is None:
        return
    span = trace.get_current_span()
    if not span.is_recording():
        return
    messages = payload if isinstance(payload, list) else [payload]
    if len(messages) != 1 or not isinstance(messages[0], dict):
        span.set_attribute("mcp.batch_size", len(messages))
        return
    message = messages[0]
    if isinstance(method := message.get("method"), str):
        span.set_attribute("mcp.method", method)
    if isinstance(request_id := message.get("id"), str | int) and not isinstance(request_id, bool):
        span.set_attribute("jsonrpc.request.id", str(request_id))
    params = message.get("params")
    if isinstance(params, dict):
        if method == "tools/call" and isinstance(name := params.get("name"), str):
            span.set_attribute("mcp.tool", name)
        elif method == "resources/read" and isinstance(uri := params.get("uri"), str):
            span.set_attribute("mcp.resource", uri)
        elif method == "prompts/get" and isinstance(name := params.get("name"), str):
            span.set_attribute("mcp.prompt", name)
