"""Celery tasks: a background tool call, run by ``celery -A mcpsite worker``.

The task carries only the call's id: everything else is in its ``BackgroundCall`` row,
written before the job was enqueued (``services.background``).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future

from celery import shared_task

from mcp_app.services import background

# Calls the embedded worker handed to the web loop; referenced until they end.
_embedded_runs: set[Future[None]] = set()


@shared_task(name="mcp_app.run_background_call", acks_late=True, ignore_result=True)
def run_background_call(call_id: str) -> None:
    hostname = run_background_call.request.hostname or "worker"
    loop = background.embedded_loop()
    if loop is not None and background.embedded_worker_enabled():
        # Embedded worker: the call runs on the web process's loop (where the in-memory
        # channel layer lives), concurrently with other calls; this thread moves on.
        run = asyncio.run_coroutine_threadsafe(background.arun_call(call_id, worker=hostname), loop)
        _embedded_runs.add(run)
        run.add_done_callback(_embedded_runs.discard)
        return
    asyncio.run(background.arun_call(call_id, worker=hostname))
