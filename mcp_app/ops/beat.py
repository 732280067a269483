"""Celery beat inside the web process, for the embedded setup (``dev.py run``) only.

That setup has no broker another process could read (Celery's in-memory transport), so the
scheduler here runs each due job itself, on its own thread, instead of sending it to a
worker. Production runs ``celery -A mcpsite beat`` next to the workers.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery.beat import EmbeddedService, PersistentScheduler, ScheduleEntry
from django.conf import settings

logger = logging.getLogger(__name__)

_started = threading.Lock()
_service: Any = None


class InPlaceScheduler(PersistentScheduler):
    """Run due jobs in the scheduler's thread; never connect to a broker."""

    producer = None

    def apply_async(
        self, entry: ScheduleEntry, producer: Any = None, advance: bool = True, **kwargs: Any
    ) -> Any:
        entry = self.reserve(entry) if advance else entry
        task = self.app.tasks[entry.task]
        # apply() runs the task here and records a failure on its result, never raising: one
        # failing job must not stop the others.
        result = task.apply(entry.args, entry.kwargs)
        if result.failed():
            logger.error("Upkeep job %s failed: %s", entry.name, result.traceback)
        return result


def start_embedded_beat() -> None:
    """Start the in-process scheduler once per process (a daemon thread)."""
    global _service
    from mcpsite.celery import app

    with _started:
        if _service is not None:
            return
        # What ``celery beat`` does at startup: import the task modules (mcp_app/ops/tasks.py).
        app.loader.import_default_modules()
        _service = EmbeddedService(
            app,
            thread=True,
            scheduler_cls=InPlaceScheduler,
            schedule_filename=str(settings.CELERY_BEAT_SCHEDULE_FILENAME),
        )
        _service.start()
