"""``manage.py purge_oauth_clients``: delete self-registered OAuth clients nobody used.

Run it from cron or a scheduler (e.g. daily), next to DOT's ``cleartokens`` (expired tokens)
and ``clearcimdapplications`` (CIMD clients). A client that registered through DCR more than
``--days`` ago and never got a user's grant or token is deleted; clients an administrator
created are never touched.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcp_app.auth.clients import purge_stale_registrations


class Command(BaseCommand):
    help = "Delete DCR clients older than --days days (default 7) that were never used."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=float, default=7.0, help="age in days (default 7)")

    def handle(self, *args: Any, days: float, **options: Any) -> None:
        if days < 0:
            raise CommandError("--days must not be negative")
        deleted = purge_stale_registrations(older_than=timedelta(days=days))
        self.stdout.write(
            f"Deleted {deleted} unused client registration(s) older than {days:g} days."
        )
