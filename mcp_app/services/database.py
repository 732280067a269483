"""ORM work called from async code: on the thread pool, with a bounded wait.

The MCP endpoint (endpoint, session and token loads) and the executors' credential and
upstream lookups call the ORM from the event loop through ``in_thread``. Each call runs on
asgiref's thread pool (``thread_sensitive=False``: it is self-contained, its own autocommit
statements or atomic block) with Channels' connection hygiene around it, so its pooled
connection goes back to the pool afterwards.

The wait is bounded by ``DATABASE_WAIT_SECONDS``: a database that stops answering without
closing its connections (a frozen server, a lost host) would otherwise hold the request as
long as it lasts, since PostgreSQL's own statement timeout cannot fire on a server that does
not run. Past the bound the caller gets ``OperationalError``, which every interface turns
into 503 with Retry-After; the thread itself stays blocked until the connection gives way,
so the number of such threads is bounded by the thread pool and the connection pool.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import OperationalError

from mcp_app.services.deadlines import Deadline

P = ParamSpec("P")
R = TypeVar("R")


def in_thread(function: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """Return an async ``function`` run on the thread pool, waited on for a bounded time.

    Raises (from the returned coroutine):
        OperationalError: the call did not finish within ``DATABASE_WAIT_SECONDS``.
    """
    call = database_sync_to_async(function, thread_sensitive=False)

    @functools.wraps(function)
    async def bounded(*args: P.args, **kwargs: P.kwargs) -> R:
        seconds = settings.DATABASE_WAIT_SECONDS
        deadline = Deadline(seconds)
        try:
            async with deadline:
                result: R = await call(*args, **kwargs)  # untyped: channels has no types
                return result
        except TimeoutError:
            if not deadline.expired():
                raise  # the function's own timeout, not ours
            raise OperationalError(f"the database did not answer within {seconds:g} s") from None

    return bounded
