"""URLs of the staff pages (endpoint index, connect page). MCP endpoints are routed in asgi.py."""

from django.urls import path

from mcp_app import views

app_name = "mcp_app"

urlpatterns = [
    path("endpoints/", views.endpoint_index, name="endpoint_index"),
    path("endpoints/<slug:slug>/connect/", views.endpoint_connect, name="endpoint_connect"),
]
