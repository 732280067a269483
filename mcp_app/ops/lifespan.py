"""What a web process does as its server stops it, under uvicorn and under Daphne alike.

``server_stopping`` is the one shutdown step: the requests still running are recorded as cut
short by the shutdown (``services/calllog/recorder.record_cut_short``), and the call-log
writer's queue is written, within a bounded wait, while its thread can still run.

uvicorn (production, ``--lifespan on``) cancels the requests still running once its
graceful-shutdown time is up, sends ``lifespan.shutdown`` and then, having been stopped by a
signal, raises that signal again with its default action: the process dies there, and no
``atexit`` handler runs. So its lifespan shutdown is the last moment for that step.

Daphne sends no lifespan events. On SIGTERM or SIGINT its Twisted reactor fires its "before
shutdown" triggers, one of which cancels every running request and waits for them; the
trigger registered here runs first (it is registered when this module is imported, before
Daphne starts its server), so the requests are recorded as cut short before they are
cancelled, and the reactor waits for the writer before it stops. ``atexit`` still runs the
same step for anything left (``recorder.submit_cut_short``).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from mcp_app.services.calllog.recorder import record_cut_short
from mcp_app.services.calllog.writer import call_log_drain

logger = logging.getLogger(__name__)

AsgiApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


async def server_stopping() -> None:
    """Record the requests still running as cut short, and write the call log's queue.

    Runs on the server's event loop: the requests' records are read there, where the requests
    write them. The writing waits in a thread, up to the writer's exit bound.
    """
    try:
        record_cut_short()
        if not await asyncio.to_thread(call_log_drain):
            logger.warning("Call-log records left unwritten as the server stopped")
    except Exception:
        logger.exception("Call-log records of the last requests not written")


def with_lifespan(app: AsgiApp) -> AsgiApp:
    """Answer ``lifespan`` scopes here; hand every other scope to ``app``.

    Also asks Daphne's reactor, if one is installed, to run ``server_stopping`` as it shuts
    down.
    """
    _stop_with_reactor()

    async def lifespan_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await server_stopping()
                await send({"type": "lifespan.shutdown.complete"})
                return

    lifespan_app.__wrapped__ = app  # type: ignore[attr-defined]  # what it hands scopes on to
    return lifespan_app


def _stop_with_reactor() -> None:
    """Run ``server_stopping`` among the Twisted reactor's "before shutdown" triggers.

    Daphne installs its reactor on import, and so does the ``daphne`` app every process loads
    (INSTALLED_APPS): the trigger is registered in every web process, and fires only in one
    whose reactor runs, which is Daphne's. Nothing here imports Twisted where it is not loaded.
    """
    reactor = sys.modules.get("twisted.internet.reactor")
    if reactor is None:
        return
    from twisted.internet.defer import Deferred

    def before_shutdown() -> Deferred[None]:
        # The reactor runs Daphne's asyncio loop and waits for this before it stops it.
        return Deferred.fromFuture(asyncio.ensure_future(server_stopping()))

    reactor.addSystemEventTrigger("before", "shutdown", before_shutdown)
