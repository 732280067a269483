"""App configuration: ready() wires system checks, catalog change signals, the upstream
relay's events (the relay, in executors/, reads and writes no rows: services handle them) and
the call log's partitions made ahead after each migrate."""

from django.apps import AppConfig


class McpAppConfig(AppConfig):
    name = "mcp_app"
    verbose_name = "MCP endpoints"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from mcp_app import checks, signals  # noqa: F401  (registration side effects)
        from mcp_app.services import upstream_subscriptions

        upstream_subscriptions.connect_upstream_events()

        from django.db.models.signals import post_migrate

        from mcp_app.services.calllog.partitions import call_log_partitions_after_migrate

        # Every migrate tops up the call log's partitions ahead (PostgreSQL), beat or not.
        post_migrate.connect(
            call_log_partitions_after_migrate, sender=self, dispatch_uid="mcp_call_log_ahead"
        )
