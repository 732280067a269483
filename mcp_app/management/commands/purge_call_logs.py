"""``manage.py purge_call_logs``: the call log's retention, deleting records older than N days.

Run it from cron or a scheduler (e.g. daily). Records are append-only everywhere else (the
admin cannot change or delete them); this is the one way they leave the database.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcp_app.services.calllog.retention import call_log_purge


class Command(BaseCommand):
    help = "Delete call-log records older than --days days (default 90)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=float, default=90.0, help="age in days (default 90)")

    def handle(self, *args: Any, days: float, **options: Any) -> None:
        if days < 0:
            raise CommandError("--days must not be negative")
        deleted = call_log_purge(older_than=timedelta(days=days))
        self.stdout.write(f"Deleted {deleted} call-log record(s) older than {days:g} days.")
