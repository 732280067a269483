"""ASGI entry point: MCP endpoints go straight to their consumer, the rest to Django.

``/mcp/<slug>`` never passes through Django's request handler: its per-request thread hops
cost several times the whole MCP exchange (docs/architecture.md, "Request path of an MCP call").
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402
from django.urls import re_path  # noqa: E402

from mcp_app.ops.collector import tune_collector  # noqa: E402
from mcp_app.ops.lifespan import with_lifespan  # noqa: E402
from mcp_app.ops.probes import probe_app  # noqa: E402
from mcp_app.ops.tracing import instrument_asgi  # noqa: E402
from mcp_app.transport.routing import mcp_first  # noqa: E402

if settings.EMBEDDED_BEAT:
    # The embedded setup (dev.py run) has no beat process: the upkeep schedule runs here.
    from mcp_app.ops.beat import start_embedded_beat

    start_embedded_beat()

if settings.SERVE_STATIC:
    # Daphne serves no files itself; with no proxy in front (the run command, a single
    # container) Django answers STATIC_URL from the staticfiles finders.
    django_asgi_app = ASGIStaticFilesHandler(django_asgi_app)

application = mcp_first(
    ProtocolTypeRouter(
        {
            "http": URLRouter(
                [
                    # Probes and metrics skip Django's host check and middleware:
                    # mcp_app/ops/probes.py.
                    # Channels' URLRouter routes to ASGI apps; django-stubs types re_path for
                    # views.
                    re_path(r"^(healthz|readyz|metrics)$", probe_app),  # type: ignore[arg-type]
                    re_path(r"", django_asgi_app),  # type: ignore[arg-type]
                ]
            ),
        }
    )
)

# Wrapped in OpenTelemetry's middleware only when OTEL_* variables ask for traces; otherwise
# nothing is put in front of the router (mcp_app/ops/tracing.py).
application = with_lifespan(instrument_asgi(application))

# Last: what is loaded by now stays loaded, and the collector stops walking it
# (mcp_app/ops/collector.py).
tune_collector()
