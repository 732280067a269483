"""Django URLs: admin, the per-endpoint connect page. MCP endpoints are routed in asgi.py."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("mcp_app.urls")),
]
