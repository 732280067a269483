"""``manage.py call_log_partitions``: create the call log's partitions ahead (PostgreSQL).

Run by the upkeep job of the same name (every ``UPKEEP_CALL_LOG_PARTITIONS_SECONDS``) and safe
to run by hand or twice at once: it creates the days from today to
``MCP_CALL_LOG_PARTITIONS_AHEAD_DAYS`` ahead that have no partition yet, and the default
partition if it is missing. Does nothing on SQLite (one plain table).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcp_app.services.calllog.partitions import call_log_partitions, call_log_partitions_ensure


class Command(BaseCommand):
    help = "Create the call log's missing partitions from today to N days ahead (PostgreSQL)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--ahead-days",
            type=int,
            default=None,
            help="days ahead (default MCP_CALL_LOG_PARTITIONS_AHEAD_DAYS)",
        )
        parser.add_argument("--list", action="store_true", help="list the partitions")

    def handle(self, *args: Any, ahead_days: int | None, list: bool, **options: Any) -> None:
        if ahead_days is not None and ahead_days < 0:
            raise CommandError("--ahead-days must not be negative")
        created = call_log_partitions_ensure(ahead_days=ahead_days)
        self.stdout.write(f"Created {len(created)} call-log partition(s).")
        if list:
            for partition in call_log_partitions():
                low = partition.start.isoformat() if partition.start else "MINVALUE"
                high = partition.end.isoformat() if partition.end else ""
                what = "DEFAULT" if partition.is_default else f"{low} .. {high}"
                self.stdout.write(f"{partition.name}  {what}")
