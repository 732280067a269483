"""``manage.py purge_sessions``: delete legacy MCP sessions that ended long ago.

Run it from cron or a scheduler (e.g. daily). Sessions idle past MCP_SESSION_IDLE_SECONDS
already answer 404; this removes their rows once they are older than ``--days``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcp_app.services.sessions import session_purge


class Command(BaseCommand):
    help = "Delete MCP sessions closed or unused for more than --days days (default 7)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=float, default=7.0, help="age in days (default 7)")

    def handle(self, *args: Any, days: float, **options: Any) -> None:
        if days < 0:
            raise CommandError("--days must not be negative")
        deleted = session_purge(idle_for=timedelta(days=days))
        self.stdout.write(f"Deleted {deleted} session(s) unused for more than {days:g} days.")
