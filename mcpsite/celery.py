"""The Celery application; tasks are discovered in installed apps' ``tasks`` modules."""

import os
from typing import Any

from celery import Celery
from celery.signals import worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")

app = Celery("mcpsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Upkeep jobs of the beat schedule (CELERY_BEAT_SCHEDULE in settings).
app.autodiscover_tasks(["mcp_app.ops"])


# -- Worker heartbeats for /readyz (mcp_app/ops/heartbeat.py) ------------------------------------
@worker_ready.connect
def _start_worker_heartbeat(sender: Any, **kwargs: Any) -> None:
    from mcp_app.ops.heartbeat import start_worker_heartbeat

    start_worker_heartbeat(sender.hostname)


@worker_shutdown.connect
def _stop_worker_heartbeat(sender: Any, **kwargs: Any) -> None:
    from mcp_app.ops.heartbeat import stop_worker_heartbeat

    stop_worker_heartbeat(sender.hostname)
