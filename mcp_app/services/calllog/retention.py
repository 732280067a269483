"""Call-log retention: deleting old rows in chunks (``manage.py purge_call_logs``, upkeep)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Max
from django.utils import timezone

from mcp_app.models import CallLog


def call_log_purge(*, older_than: timedelta, chunk: int = 10_000) -> int:
    """Delete records created more than ``older_than`` ago; return how many.

    Deletes by id range in chunks, so a purge of millions of rows holds no long lock and
    never builds a huge transaction. Ids grow with time, so the scan stops at the newest
    expired id; the date condition still decides each row (a slow request's row is written
    after quicker, younger ones).
    """
    cutoff: datetime = timezone.now() - older_than
    newest = CallLog.objects.filter(created_at__lt=cutoff).aggregate(top=Max("id"))["top"]
    if newest is None:
        return 0
    deleted = 0
    while True:
        ids = list(
            CallLog.objects.filter(id__lte=newest, created_at__lt=cutoff)
            .order_by("id")
            .values_list("id", flat=True)[:chunk]
        )
        if not ids:
            return deleted
        count, _ = CallLog.objects.filter(id__in=ids).delete()
        deleted += count
