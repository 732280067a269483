"""URL routing for MCP endpoints, mounted by mcpsite/asgi.py ahead of Django's own handler."""

from django.urls import path

from mcp_app.transport.consumer import StreamableHttpConsumer

# No trailing slash: the endpoint URL is exactly /mcp/<slug>.
mcp_urlpatterns = [path("mcp/<slug:slug>", StreamableHttpConsumer.as_asgi())]
