"""The ASGI lifespan protocol: what a web process does as its server stops it.

uvicorn (production, ``--lifespan on``) cancels the requests still running once its
graceful-shutdown time is up, sends ``lifespan.shutdown`` and then, having been stopped by a
signal, raises that signal again with its default action: the process dies there, and no
``atexit`` handler runs. So this is the last moment the process's call-log records can be
written: the requests cut short are recorded as such and the writer's queue is flushed
(``services/calllog/recorder.submit_cut_short``). Daphne sends no lifespan events; it exits
normally, and the same function runs from ``atexit``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp_app.services.calllog.recorder import submit_cut_short

logger = logging.getLogger(__name__)

AsgiApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


def with_lifespan(app: AsgiApp) -> AsgiApp:
    """Answer ``lifespan`` scopes here; hand every other scope to ``app``."""

    async def lifespan_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                try:
                    await asyncio.to_thread(submit_cut_short)
                except Exception:
                    logger.exception("Call-log records of the last requests not written")
                await send({"type": "lifespan.shutdown.complete"})
                return

    lifespan_app.__wrapped__ = app  # type: ignore[attr-defined]  # what it hands scopes on to
    return lifespan_app
