"""The development worker: Celery inside the web process when no broker is configured.

For trying the product without Redis (the README's run command): a worker thread takes jobs
off Celery's in-memory queue, and ``mcp_app.tasks`` runs each call on the web process's event
loop, where the in-memory channel layer lives. Production runs ``celery -A mcpsite worker``.
"""

from __future__ import annotations

import asyncio
import os
import threading

from django.conf import settings

from mcpsite import celery_app

_embedded_lock = threading.Lock()
_embedded_loop: asyncio.AbstractEventLoop | None = None


def embedded_worker_enabled() -> bool:
    """Whether calls run on a worker inside this web process (no broker configured)."""
    return str(settings.CELERY_BROKER_URL).startswith("memory://")


def embedded_loop() -> asyncio.AbstractEventLoop | None:
    """The web process's event loop, on which the embedded worker runs calls."""
    return _embedded_loop


def ensure_embedded_worker() -> None:
    """Start a Celery worker thread on the in-memory transport, once per process."""
    global _embedded_loop
    with _embedded_lock:
        if _embedded_loop is not None:
            return
        _embedded_loop = asyncio.get_running_loop()

        def run() -> None:
            # Built in its own thread: the worker's init signals close Django's connections,
            # which Django refuses to do from the event loop's thread.
            celery_app.WorkController(
                pool_cls="solo",
                concurrency=1,
                without_heartbeat=True,
                without_mingle=True,
                without_gossip=True,
                hostname=f"embedded@{os.uname().nodename}",
                loglevel="WARNING",
            ).start()

        threading.Thread(target=run, name="mcp-embedded-worker", daemon=True).start()
