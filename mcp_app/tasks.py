"""Celery tasks: a background tool call, run by ``celery -A mcpsite worker``.

The task carries only the call's id: everything else is in its ``BackgroundCall`` row,
written before the job was enqueued (``services.background.web``, by the task's name), and
``services.background.worker`` runs it.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future

from celery import Task, shared_task

from mcp_app.conf import get_conf
from mcp_app.services.background.calls import RUN_CALL_TASK
from mcp_app.services.background.embedded import embedded_loop, embedded_worker_enabled
from mcp_app.services.background.worker import ClaimDeferred, arun_call

# Calls the embedded worker handed to the web loop; referenced until they end.
_embedded_runs: set[Future[None]] = set()


# A call the database was too unavailable to claim is tried again this often, for as long as
# its start timeout lets it (after that the row is settled as "not started" anyway).
CLAIM_RETRY_SECONDS = 1.0


@shared_task(name=RUN_CALL_TASK, acks_late=True, ignore_result=True, bind=True)
def run_background_call(self: Task, call_id: str) -> None:
    hostname = self.request.hostname or "worker"
    loop = embedded_loop()
    if loop is not None and embedded_worker_enabled():
        # Embedded worker: the call runs on the web process's loop (where the in-memory
        # channel layer lives), concurrently with other calls; this thread moves on.
        run = asyncio.run_coroutine_threadsafe(arun_call(call_id, worker=hostname), loop)
        _embedded_runs.add(run)
        run.add_done_callback(_embedded_runs.discard)
        return
    try:
        asyncio.run(arun_call(call_id, worker=hostname))
    except ClaimDeferred as exc:
        # Nothing ran; leaving the message acknowledged would strand the row in "queued".
        limit = get_conf().MCP_BACKGROUND_START_TIMEOUT_SECONDS
        raise self.retry(
            exc=exc, countdown=CLAIM_RETRY_SECONDS, max_retries=int(limit / CLAIM_RETRY_SECONDS)
        ) from exc
