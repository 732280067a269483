"""Call-log retention (``manage.py purge_call_logs``, upkeep): on PostgreSQL whole time
partitions past the window are dropped (``partitions.py``); the rows left past it, in the one
partition that straddles the cutoff (or anywhere on SQLite), are deleted in chunks. Minute
rollups (``rollup.py``) go with the rows they count; hour rollups stay, so the charts by hour
and day reach back past the rows."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Max
from django.utils import timezone

from mcp_app.models import CallLog, CallLogRollup
from mcp_app.services.calllog.partitions import call_log_partitions_drop


def call_log_purge(*, older_than: timedelta, chunk: int = 10_000) -> int:
    """Delete records created more than ``older_than`` ago; return how many.

    A partition whose whole range is past the cutoff is dropped (its rows counted first):
    no row-by-row delete, no vacuum after it. The rest go by id range in chunks, so a purge of
    millions of rows holds no long lock and never builds a huge transaction. Ids grow with
    time, so the scan stops at the newest expired id; the date condition still decides each
    row (a slow request's row is written after quicker, younger ones) and confines the work
    to the partitions the cutoff touches.
    """
    cutoff: datetime = timezone.now() - older_than
    CallLogRollup.objects.filter(
        grain=CallLogRollup.Grain.MINUTE, bucket_start__lte=cutoff - timedelta(minutes=1)
    ).delete()
    deleted, kept_until = call_log_partitions_drop(before=cutoff)
    expired = CallLog.objects.filter(created_at__lt=cutoff)
    if kept_until is not None:
        # A partition whose lock was not granted stays whole for the next run.
        expired = expired.filter(created_at__gte=kept_until)
    newest = expired.aggregate(top=Max("id"))["top"]
    if newest is None:
        return deleted
    while True:
        ids = list(
            expired.filter(id__lte=newest).order_by("id").values_list("id", flat=True)[:chunk]
        )
        if not ids:
            return deleted
        count, _ = expired.filter(id__in=ids).delete()
        deleted += count
