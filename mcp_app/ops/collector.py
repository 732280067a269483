"""The cyclic garbage collector, set for a long-running web process.

CPython collects its young objects every 700 net allocations of containers and, once enough
objects have survived into the old generation, walks every object the process holds. A web
process holds Django, the apps and the endpoints' catalog snapshots (up to tens of thousands
of tools): that full walk stalls the event loop, and every request with it, for tens of
milliseconds, and the young passes cost a few percent of each request's CPU. Almost nothing a
request allocates forms a reference cycle (reference counting frees it), so collecting less
often loses little:

- What the process loaded at start (modules, settings, URL patterns) is moved out of the
  collector's sight with ``gc.freeze()``, after one collection so that no garbage is frozen.
- The young generation is collected every ``MCP_GC_YOUNG_THRESHOLD`` allocations. Objects
  that outlive a request (a queued call-log record, a snapshot) then rarely reach the old
  generation, whose growth is what triggers a full walk.

Called once per web process (uvicorn, Daphne, ``runserver``) at the end of
``mcpsite/asgi.py``; Celery workers and other commands keep Python's settings.
"""

from __future__ import annotations

import gc
import logging

from mcp_app.conf import get_conf

logger = logging.getLogger(__name__)


def tune_collector() -> None:
    """Freeze what is loaded and space out young collections (a no-op when set to 0)."""
    young = get_conf().MCP_GC_YOUNG_THRESHOLD
    if young <= 0:
        return
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, old)
    logger.debug(
        "Garbage collector: %d objects frozen, thresholds %s",
        gc.get_freeze_count(),
        gc.get_threshold(),
    )
