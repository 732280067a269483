"""Fixtures shared by every test directory: kept small and generic.

Directory-specific fixtures live in that directory's conftest.py.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test import TransactionTestCase

from mcp_app.models import Endpoint
from mcp_app.services.calllog.writer import call_log_flush
from mcp_app.services.catalog_writes import endpoint_create
from mcp_app.services.endpoint_directory import clear_snapshot_cache
from mcp_app.services.sessions import clear_session_cache
from tests.support.emptying import empty_database, remember_clean_state
from tests.support.live import wait_until_servers_idle


def pytest_configure(config: pytest.Config) -> None:
    """Give the test process plain connections, closed after each use, instead of a pool.

    Tests call ORM code from threads the product never uses (every ``async_to_sync`` makes a
    new event loop whose pool threads die with it, and test code reads rows from any thread
    without closing): a pooled connection taken on such a thread is never handed back, and
    the pool would run dry mid-run. The statement time limit goes too: a test builds tables of
    a million rows in one statement. Servers and workers the tests start keep the production
    settings (pool and limits), which is what the connection tests measure.
    """
    database = settings.DATABASES["default"]
    database["CONN_MAX_AGE"] = 0
    options = database.get("OPTIONS", {})
    options.pop("pool", None)
    options.pop("options", None)
    # Every test request comes from 127.0.0.1: the failed-authentication limit would carry one
    # test's made-up tokens into the next tests' valid ones (for its window). Its tests set it
    # themselves (tests/api/test_throttling.py, tests/faults/test_api_redis_outage.py).
    settings.API_THROTTLE_AUTH_FAILURES = ""
    os.environ["API_THROTTLE_AUTH_FAILURES"] = ""
    # The servers and workers the tests start serve the test database (pytest-django's
    # "test_" name), from which they would derive another Redis namespace than this process;
    # they are one installation with it, so they inherit its namespace.
    os.environ["REDIS_NAMESPACE"] = settings.REDIS_NAMESPACE
    TransactionTestCase._fixture_teardown = _empty_after_test  # type: ignore[method-assign]
    # A shell without job control starts its background commands with SIGINT ignored, and an
    # ignored signal stays ignored through every exec: a suite started that way (CI's runner
    # may be one) would start Daphne and ``dev.py run`` deaf to the Ctrl-C their tests send,
    # and Twisted installs its SIGINT handler only over Python's default. A handled signal is
    # reset to the default at exec, so the processes the tests start get a terminal's SIGINT.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


# Test directories whose files share a session-scoped stack, run on one xdist worker together
# so the stack starts once (tests/faults: a private PostgreSQL and Redis and a Celery worker).
ONE_WORKER_DIRECTORIES = ("faults",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep each test file on one xdist worker (``--dist loadgroup``, dev.py's whole-suite run).

    A file's module-scoped fixtures (a live server, a Celery worker, a filled table) are built
    once for the file; spread over workers, each worker would build them again. A test with an
    ``xdist_group`` of its own keeps it.

    Unread under pytest 9: xdist 3.8 tags the group onto ``item._nodeid``, which pytest 9's
    ``nodeid`` no longer reads, so every test is handed out on its own and these fixtures are
    built on both workers. A scheduler of our own that kept the files whole (tried 11-27)
    exposed tests that find an earlier test's late call-log row; that needs fixing first.
    """
    tests = Path(__file__).parent
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        if not item.path.is_relative_to(tests):
            group = item.path.as_posix()
        elif (where := item.path.relative_to(tests)).parts[0] in ONE_WORKER_DIRECTORIES:
            group = where.parts[0]
        else:
            group = where.as_posix()
        item.add_marker(pytest.mark.xdist_group(group))


_django_fixture_teardown = TransactionTestCase._fixture_teardown


def _empty_after_test(self: TransactionTestCase) -> None:
    """``transactional_db``'s teardown, with ``empty_database`` in place of Django's flush.

    The flush truncated all ~90 tables and inserted every permission again after each
    transactional test (tests/support/emptying.py); the outcome is the same. The live servers
    running are waited for first, as flush_database does: a call-log record of this test's
    requests written after the flush would be a row in the next test's empty database.
    """
    wait_until_servers_idle()
    # And this process's own writer: an in-process request's record (tests/support/inprocess)
    # is written by a thread here, maybe after the emptying if not waited for.
    call_log_flush(timeout=10.0)
    if self.available_apps is not None or self.serialized_rollback:
        _django_fixture_teardown(self)  # their flush differs; no test here uses either
        return
    for using in self._databases_names(include_mirrors=False):
        empty_database(using)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """pytest-django's test database, plus: note its content types and permissions for
    ``empty_database``, and drop other sessions before it is destroyed.

    Servers the tests started may still hold pooled connections to it, and ORM calls made
    through ``database_sync_to_async`` hold theirs on worker threads this thread cannot close;
    PostgreSQL refuses to drop a database anyone is still connected to.
    """
    if connection.vendor == "postgresql":
        with django_db_blocker.unblock():
            remember_clean_state()
    yield
    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture
def endpoint(db: None) -> Endpoint:
    """An enabled, empty, public endpoint with slug "test"."""
    return endpoint_create(
        slug="test", title="Test endpoint", instructions="For tests.", auth_mode="public"
    )


@pytest.fixture(autouse=True)
def _forget_process_caches() -> Iterator[None]:
    """Start each test with no endpoint or session remembered from an earlier test's rows.

    Rolled-back or flushed rows fire no signal, and ids and slugs are reused across tests.
    """
    clear_snapshot_cache()
    clear_session_cache()
    yield


@pytest.fixture
def fresh_snapshot_cache() -> Iterator[None]:
    """Start and end the test with this process's snapshot cache empty."""
    clear_snapshot_cache()
    yield
    clear_snapshot_cache()


@pytest.fixture
def browser() -> Iterator[Any]:
    """Headless Chromium for one test (tests/support/browser.py). Function scope: it starts
    after the module's live site, since Playwright's event loop makes Django refuse ORM calls
    while it runs."""
    from tests.support.browser import chromium  # Playwright only where a browser is used

    with chromium() as launched:
        yield launched
