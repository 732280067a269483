"""``manage.py reap_background_calls``: settle calls whose worker died, delete expired ones.

Run it from cron or a scheduler (e.g. every minute). Calls someone follows or polls are settled
on the spot; this one catches calls nobody looks at, and keeps the table to the calls and
tasks still within their lifetime (a task's ttl, MCP_BACKGROUND_KEEP_SECONDS for the rest).
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand

from mcp_app.services.background.calls import areap


class Command(BaseCommand):
    help = "Fail background calls whose worker is gone, and delete expired calls and tasks."

    def handle(self, *args: Any, **options: Any) -> None:
        settled, deleted = async_to_sync(areap)()
        self.stdout.write(
            f"Settled {settled} background call(s) whose worker was gone; "
            f"deleted {deleted} expired call(s)."
        )
