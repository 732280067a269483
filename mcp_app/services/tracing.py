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


# The span attribute naming what a request acts on, by method (protocol.methods.TARGET_PARAMS).
_TARGET_ATTRIBUTES = {
    "tools/call": "mcp.tool",
    "prompts/get": "mcp.prompt",
    "resources/read": "mcp.resource",
    "resources/subscribe": "mcp.resource",
    "resources/unsubscribe": "mcp.resource",
}


def annotate_request(payload: object, target: str | None = None) -> None:
    """Put the MCP method, the tool, prompt or resource it names and the JSON-RPC id on the
    current span (the request's), for a decoded message or batch; nothing when not tracing.

    ``target`` is what the message names, as inbound classification resolved it
    (``inbound.Resolved.target``; None: it names nothing).
    """
    if tracer is None:
        return
    span = trace.get_current_span()
    if not span.is_recording():
        return
    if isinstance(payload, list):
        span.set_attribute("mcp.batch_size", len(payload))
        return
    method = getattr(payload, "method", None)
    if not isinstance(method, str):
        return  # a client's response to one of our requests
    span.set_attribute("mcp.method", method)
    request_id = getattr(payload, "id", None)
    if isinstance(request_id, str | int) and not isinstance(request_id, bool):
        span.set_attribute("jsonrpc.request.id", str(request_id))
    if target is not None:
        span.set_attribute(_TARGET_ATTRIBUTES[method], target)
