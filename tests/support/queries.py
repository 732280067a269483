"""Count SQL queries from every thread, not only the test's own.

The MCP consumer runs its ORM calls on asgiref's thread pool (not thread-sensitive), so
``django_assert_num_queries``, which watches one thread's connection, would see none of them.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from django.db.backends.utils import CursorWrapper

from mcp_app.services import invalidation
from mcp_app.services.calllog.writer import WRITER_THREAD
from tests.support.waiting import wait_until


class QueryLog:
    def __init__(self) -> None:
        self.statements: list[str] = []
        self._lock = threading.Lock()

    def add(self, sql: str) -> None:
        with self._lock:
            self.statements.append(sql)

    def __len__(self) -> int:
        return len(self.statements)


@contextlib.contextmanager
def all_threads_queries() -> Iterator[QueryLog]:
    """Record the SQL of every query a request runs while the block runs, in any thread.

    The call log's writer thread is left out: it serves no request, writes batches of records
    whenever it likes, and its cost is measured by the benchmark instead.
    """
    log = QueryLog()
    original = CursorWrapper._execute_with_wrappers

    def recording(self: CursorWrapper, sql: str, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name != WRITER_THREAD:
            log.add(sql)
        return original(self, sql, *args, **kwargs)

    CursorWrapper._execute_with_wrappers = recording  # type: ignore[method-assign]
    try:
        yield log
    finally:
        CursorWrapper._execute_with_wrappers = original  # type: ignore[method-assign]


@contextlib.contextmanager
def own_pushes_settled() -> Iterator[None]:
    """Run writes, then wait until this process has received back every invalidation they
    published (it subscribes to its own channel).

    A push is applied by the subscriber thread whenever it arrives: one arriving after a test
    warmed its caches drops the entry again, and the measured request then queries.
    """
    sent, received = invalidation.pushes_sent(), invalidation.pushes_received()
    yield
    wait_until(
        lambda: invalidation.pushes_received() - received >= invalidation.pushes_sent() - sent,
        "this process's own invalidations to come back",
        interval=0.01,
    )
