"""OpenTelemetry traces, exported over OTLP/HTTP when the standard ``OTEL_*`` variables ask.

Off unless ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set
or ``OTEL_TRACES_EXPORTER`` names an exporter, and never with ``OTEL_SDK_DISABLED=true``.
Off means nothing is installed: the ASGI app is not wrapped, no library is patched, and the
hooks in ``services/tracing.py`` stay None. On, each process (web: ``mcpsite/asgi.py``;
Celery worker: ``mcpsite/celery.py``, per pool process) gets a tracer provider for the
service ``mcphost`` (``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` win), the OTLP/HTTP
exporter behind a batch processor (``OTEL_EXPORTER_OTLP_*``, ``OTEL_BSP_*``, sampling by
``OTEL_TRACES_SAMPLER``), and the instrumentations of Celery (its task headers carry the trace
to the worker), httpx and psycopg. The spans are listed in docs/operations.md, "Traces".
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from mcp_app.services import tracing

logger = logging.getLogger(__name__)

DEFAULT_SERVICE_NAME = "mcphost"
# Probes answer every few seconds to load balancers and Prometheus; their spans would drown
# the requests worth reading. OTEL_PYTHON_ASGI_EXCLUDED_URLS replaces this list.
DEFAULT_EXCLUDED_URLS = r"/healthz$,/readyz$,/metrics$"
_MCP_PATH = re.compile(r"/mcp/([^/]+)/?")

_provider: TracerProvider | None = None


def tracing_requested(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the ``OTEL_*`` variables in ``environ`` ask for traces."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if exporters := environ.get("OTEL_TRACES_EXPORTER", "").strip().lower():
        return exporters != "none"
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def _exporters(environ: Mapping[str, str]) -> list[SpanExporter]:
    exporters: list[SpanExporter] = []
    for name in environ.get("OTEL_TRACES_EXPORTER", "otlp").lower().split(","):
        name = name.strip()
        if name == "otlp":
            protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get(
                "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
            )
            if protocol != "http/protobuf":
                logger.warning(
                    "Only OTLP over HTTP with protobuf is installed; exporting with it",
                    extra={"otlp_protocol": protocol},
                )
            # Imported here: the exporter pulls in protobuf and requests, which an untraced
            # process never needs.
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporters.append(OTLPSpanExporter())
        elif name == "console":
            exporters.append(ConsoleSpanExporter())
        elif name and name != "none":
            logger.warning("Unknown OTEL_TRACES_EXPORTER ignored", extra={"exporter": name})
    return exporters


def _resource() -> Resource:
    resource = Resource.create()
    # Resource.create names an unnamed service "unknown_service[:<executable>]".
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    return resource


def configure_tracing(environ: Mapping[str, str] = os.environ) -> bool:
    """Turn tracing on for this process if ``environ`` asks; return whether it is on.

    Idempotent: a second call (the web process and its embedded worker) changes nothing.
    """
    global _provider
    if _provider is not None:
        return True
    if not tracing_requested(environ):
        return False
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

    provider = TracerProvider(resource=_resource())
    for exporter in _exporters(environ):
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    CeleryInstrumentor().instrument(tracer_provider=provider)
    HTTPXClientInstrumentor().instrument(tracer_provider=provider)
    PsycopgInstrumentor().instrument(tracer_provider=provider)
    tracing.enable(provider.get_tracer("mcphost"))
    _provider = provider
    return True


def flush_tracing() -> None:
    """Export the spans still queued (a pool process about to exit)."""
    if _provider is not None:
        _provider.force_flush()


def _span_details(scope: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    """Name a request's span by route: one name for all MCP endpoints, the slug an attribute."""
    method = scope.get("method", "HTTP")
    path = scope.get("path", "")
    if match := _MCP_PATH.fullmatch(path):
        return f"{method} /mcp/{{slug}}", {"http.route": "/mcp/{slug}", "mcp.endpoint": match[1]}
    return f"{method} {path}", {}


def instrument_asgi(app: Any) -> Any:
    """Return ``app`` wrapped in OpenTelemetry's ASGI middleware if tracing is on, else ``app``."""
    if not configure_tracing():
        return app
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

    excluded = (
        os.environ.get("OTEL_PYTHON_ASGI_EXCLUDED_URLS")
        or os.environ.get("OTEL_PYTHON_EXCLUDED_URLS")
        or DEFAULT_EXCLUDED_URLS
    )
    return OpenTelemetryMiddleware(
        app,
        excluded_urls=excluded,
        default_span_details=_span_details,
        # A span per SSE frame and body chunk would outnumber the requests a hundredfold.
        exclude_spans=["receive", "send"],
    )
