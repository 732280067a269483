"""Upkeep as Celery tasks, put on Celery beat's schedule by ``CELERY_BEAT_SCHEDULE``.

Each task runs the management command an operator would otherwise run from cron, so the
schedule and a manual run do exactly the same thing. The intervals (and the ``--days`` of the
purges) come from settings; see docs/operations.md.
"""

from __future__ import annotations

import logging
from io import StringIO

from celery import shared_task
from django.core.management import call_command

logger = logging.getLogger(__name__)


def _run(command: str, *args: str) -> None:
    out = StringIO()
    call_command(command, *args, stdout=out)
    logger.info("Upkeep %s: %s", command, out.getvalue().strip() or "done")


@shared_task(name="mcp_app.upkeep.purge_sessions", ignore_result=True)
def purge_sessions(days: float) -> None:
    _run("purge_sessions", "--days", str(days))


@shared_task(name="mcp_app.upkeep.purge_oauth_clients", ignore_result=True)
def purge_oauth_clients(days: float) -> None:
    _run("purge_oauth_clients", "--days", str(days))


@shared_task(name="mcp_app.upkeep.clear_cimd_applications", ignore_result=True)
def clear_cimd_applications() -> None:
    _run("clearcimdapplications")


@shared_task(name="mcp_app.upkeep.clear_tokens", ignore_result=True)
def clear_tokens() -> None:
    _run("cleartokens")


@shared_task(name="mcp_app.upkeep.reap_background_calls", ignore_result=True)
def reap_background_calls() -> None:
    _run("reap_background_calls")


@shared_task(name="mcp_app.upkeep.probe_upstreams", ignore_result=True)
def probe_upstreams() -> None:
    _run("probe_upstreams")


@shared_task(name="mcp_app.upkeep.call_log_partitions", ignore_result=True)
def call_log_partitions() -> None:
    _run("call_log_partitions")


@shared_task(name="mcp_app.upkeep.call_log_rollup", ignore_result=True)
def call_log_rollup() -> None:
    _run("call_log_rollup")


@shared_task(name="mcp_app.upkeep.purge_call_logs", ignore_result=True)
def purge_call_logs(days: float) -> None:
    _run("purge_call_logs", "--days", str(days))
