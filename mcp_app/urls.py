"""URLs of the staff pages (endpoint index, connect page, audit UI) and of every signed-in
user's Connections page. MCP endpoints are routed in asgi.py."""

from django.urls import path
from django.views.generic import RedirectView

from mcp_app import connections, views
from mcp_app.audit import replay as audit_replay
from mcp_app.audit import views as audit

app_name = "mcp_app"

urlpatterns = [
    # The admin's "View site" opens "/"; the staff pages start at the endpoint index.
    path("", RedirectView.as_view(pattern_name="mcp_app:endpoint_index"), name="home"),
    # Browsers ask for /favicon.ico where a page names no icon (a JSON document, say).
    path("favicon.ico", views.favicon, name="favicon"),
    path("endpoints/", views.endpoint_index, name="endpoint_index"),
    path("endpoints/<slug:slug>/connect/", views.endpoint_connect, name="endpoint_connect"),
    path("connections/", connections.connections, name="connections"),
    path("connections/callback/", connections.callback, name="connection_callback"),
    path("connections/<int:pk>/connect/", connections.connect, name="connection_connect"),
    path("connections/<int:pk>/disconnect/", connections.disconnect, name="connection_disconnect"),
    path("audit/", audit.call_list, name="audit_list"),
    path("audit/feed/", audit.call_feed, name="audit_feed"),
    path("audit/stats/", audit.call_stats, name="audit_stats"),
    path("audit/overview/", audit.call_overview, name="audit_overview"),
    path("audit/export.csv", audit.export_csv, name="audit_export_csv"),
    path("audit/export.jsonl", audit.export_jsonl, name="audit_export_jsonl"),
    path("audit/<int:pk>/", audit.call_detail, name="audit_detail"),
    path("audit/replay/<int:draft_id>/", audit_replay.replay_page, name="replay"),
]
