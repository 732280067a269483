"""App configuration: ready() wires system checks, catalog change signals and the upstream
relay's events (the relay, in executors/, reads and writes no rows: services handle them)."""

from django.apps import AppConfig


class McpAppConfig(AppConfig):
    name = "mcp_app"
    verbose_name = "MCP endpoints"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from mcp_app import checks, signals  # noqa: F401  (registration side effects)
        from mcp_app.services import upstream_subscriptions

        upstream_subscriptions.connect_upstream_events()
