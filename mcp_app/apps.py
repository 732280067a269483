"""App configuration: ready() wires system checks and catalog change signals, nothing else."""

from django.apps import AppConfig


class McpAppConfig(AppConfig):
    name = "mcp_app"
    verbose_name = "MCP endpoints"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from mcp_app import checks, signals  # noqa: F401  (registration side effects)
