"""``manage.py call_log_rollup``: roll up the call log's closed minutes and hours for the charts.

Run by the upkeep job of the same name (every ``UPKEEP_CALL_LOG_ROLLUP_SECONDS``, 60 by
default) and safe to run by hand or twice at once (``services/calllog/rollup.py``). The first
run rolls up the last ``--backfill-days`` (7) of rows already there; ``--rebuild`` deletes every
rollup first and starts again that far back.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from mcp_app.models import CallLogRollup, CallLogRollupMark
from mcp_app.services.calllog.rollup import DEFAULT_BACKFILL, call_log_rollup


class Command(BaseCommand):
    help = "Roll up the call log's closed minutes and hours (the audit charts read them)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--backfill-days",
            type=float,
            default=DEFAULT_BACKFILL.days,
            help="how far back a first run (or --rebuild) starts (default 7)",
        )
        parser.add_argument("--rebuild", action="store_true", help="delete every rollup first")

    def handle(self, *args: Any, backfill_days: float, rebuild: bool, **options: Any) -> None:
        if backfill_days < 0:
            raise CommandError("--backfill-days must not be negative")
        if rebuild:
            with transaction.atomic():
                CallLogRollupMark.objects.select_for_update().all().delete()
                CallLogRollup.objects.all().delete()
        run = call_log_rollup(backfill=timedelta(days=backfill_days))
        self.stdout.write(
            f"Rolled up {run.minutes} minute(s) and {run.hours} hour(s): {run.rows} row(s)."
        )
