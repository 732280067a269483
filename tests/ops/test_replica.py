"""The product with a streaming read replica (issue #30): the audit's call-log reads, the
exports and the API's call-log endpoints read from it; everything else stays on the primary.

The primary is the test database's own throwaway cluster; the replica is made from it as an
operator makes one (``pg_basebackup -R``, scripts/services.py) and runs as a hot standby on
another loopback port. Pausing its replay (``pg_wal_replay_pause()``) makes it stale for
real: a row deleted on the primary is then still on the replica, so a page showing that row
read the replica, and a page not showing it read the primary; the WAL waiting to be replayed
is real lag, which a server whose bound is 0 refuses and one whose bound is an hour accepts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
from django.contrib.auth.models import User
from mcp import Client

from mcp_app.models import CallLog, Tool
from mcp_app.services.api_tokens import api_token_create
from scripts import services
from tests.audit.factories import make_call
from tests.support.admin_forms import tool_form
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.live import ROOT, asgi_server, database_url
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "replica-operator-password-1"
# Every request measures the lag afresh (no per-process cache), so each sees the state the
# test has just made.
FRESH = {"MCP_REPLICA_CHECK_SECONDS": "0"}


@pytest.fixture(scope="module")
def standby(django_db_setup: None) -> Iterator[services.Standby]:
    with services.postgres_replica(database_url()) as replica:
        yield replica


def server_env(standby: services.Standby, max_lag: str, name: str) -> dict[str, str]:
    return {
        **FRESH,
        "DATABASE_REPLICA_URL": standby.url,
        "MCP_REPLICA_MAX_LAG_SECONDS": max_lag,
        "DATABASE_APPLICATION_NAME": name,
    }


@pytest.fixture(scope="module")
def lenient(standby: services.Standby) -> Iterator[str]:
    """A server that reads from the replica while it is up to an hour behind."""
    with asgi_server("uvicorn", extra_env=server_env(standby, "3600", "mcphost-lenient")) as url:
        yield url


@pytest.fixture(scope="module")
def strict(standby: services.Standby) -> Iterator[str]:
    """A server that reads from the replica only while it has replayed all it received."""
    with asgi_server("uvicorn", extra_env=server_env(standby, "0", "mcphost-strict")) as url:
        yield url


def sql(url: str, query: str, *params: Any) -> Any:
    with psycopg.connect(url, autocommit=True) as connection:
        return connection.execute(query, params).fetchone()


def primary_url() -> str:
    return database_url().replace("postgres://", "postgresql://", 1)


def wait_for_replica(standby: services.Standby, column: str) -> None:
    """Wait until the replica has ``column`` (received or replayed) all the primary wrote."""
    (lsn,) = sql(primary_url(), "SELECT pg_current_wal_insert_lsn()::text")
    wait_until(
        lambda: sql(standby.url, f"SELECT pg_last_wal_{column}_lsn() >= %s::pg_lsn", lsn)[0],
        f"the replica to have {column} the primary's WAL up to {lsn}",
    )


@pytest.fixture
def replay_resumed(standby: services.Standby) -> Iterator[None]:
    """Replay resumed and caught up after the test, whatever it paused."""
    yield
    sql(standby.url, "SELECT pg_wal_replay_resume()")
    wait_for_replica(standby, "replay")


@contextlib.contextmanager
def signed_in(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=30) as client:
        sign_in(client)
        yield client


def sign_in(client: httpx.Client) -> None:
    page = client.get("/admin/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token is not None, page.text[:500]
    answer = client.post(
        "/admin/login/?next=/admin/",
        data={"csrfmiddlewaretoken": token[1], "username": "op", "password": PASSWORD},
    )
    assert answer.status_code == 302, answer.text[:500]


def csrf(client: httpx.Client, path: str) -> str:
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', client.get(path).text)
    assert token is not None
    return token[1]


def api_client(base_url: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=base_url, timeout=30, headers={"Authorization": f"Bearer {key}"})


def stale_replica(standby: services.Standby) -> str:
    """Make a call-log row that, replay paused, only the replica still holds; return its
    target. A row only the primary holds is also written ("primary-only")."""
    wait_for_replica(standby, "replay")
    sql(standby.url, "SELECT pg_wal_replay_pause()")
    CallLog.objects.filter(target="replica-only").delete()
    make_call(target="primary-only")
    wait_for_replica(standby, "receive")
    return "replica-only"


def targets(api: httpx.Client) -> tuple[set[str], str]:
    """Which of this test's two rows the API lists (other rows, such as a late record of an
    earlier test's request, say nothing of where the read went), and the read's source."""
    answer = api.get("/api/v1/call-log/")
    assert answer.status_code == 200, answer.text
    listed = {row["target"] for row in answer.json()["results"]}
    return listed & {"replica-only", "primary-only"}, answer.headers["X-Read-Source"]


def test_audit_pages_exports_and_the_api_read_the_call_log_from_the_replica(
    standby: services.Standby, lenient: str, strict: str, replay_resumed: None
) -> None:
    User.objects.create_superuser("op", password=PASSWORD)
    _, key = api_token_create(user=User.objects.get(username="op"), name="replica")
    make_call(target="replica-only")
    wait_for_replica(standby, "replay")
    stale_replica(standby)

    # Signing in writes a session the replica has not replayed: sessions stay on the primary.
    with signed_in(lenient) as browser, api_client(lenient, key) as api:
        listed = browser.get("/audit/")
        assert listed.status_code == 200
        assert "replica-only" in listed.text and "primary-only" not in listed.text
        assert "Figures from the read replica" in listed.text
        assert listed.headers["X-Read-Source"].startswith("replica; lag=")
        filtered = browser.get("/audit/", params={"tool": "replica-only"})
        assert "replica-only" in filtered.text
        assert "Figures from the read replica" in browser.get("/audit/stats/").text
        assert "Figures from the read replica" in browser.get("/audit/overview/").text
        exported = browser.get("/audit/export.csv")
        assert exported.headers["X-Read-Source"].startswith("replica;")
        assert "replica-only" in exported.text and "primary-only" not in exported.text
        seen, source = targets(api)
        assert seen == {"replica-only"} and source.startswith("replica;")
        api_export = api.get("/api/v1/call-log/export/", params={"format": "jsonl"})
        assert "replica-only" in api_export.text and "primary-only" not in api_export.text

    # The same moment through a server that allows no lag: the primary's rows, and it says so.
    with signed_in(strict) as browser, api_client(strict, key) as api:
        listed = browser.get("/audit/")
        assert "primary-only" in listed.text and "replica-only" not in listed.text
        assert re.search(
            r"Figures from the primary: the read replica is [\d.]+ s behind", listed.text
        )
        assert listed.headers["X-Read-Source"].startswith("primary; reason=lagging; lag=")
        exported = browser.get("/audit/export.csv")
        assert "primary-only" in exported.text and "replica-only" not in exported.text
        seen, source = targets(api)
        assert seen == {"primary-only"} and source.startswith("primary; reason=lagging")
        ready = httpx.get(f"{strict}/readyz", timeout=10)
        assert ready.status_code == 200, ready.text
        assert ready.json()["status"] == "degraded" and ready.json()["failed"] == ["replica"]
        metrics = httpx.get(f"{strict}/metrics", timeout=10).text
        assert re.search(
            r'mcphost_replica_reads_total\{reason="lagging",source="primary"\} [1-9]', metrics
        )

    # Replay resumed and caught up: both servers read the replica, which has the primary's rows.
    sql(standby.url, "SELECT pg_wal_replay_resume()")
    wait_for_replica(standby, "replay")
    with signed_in(strict) as browser:
        # Any WAL in flight (the session just written, a checkpoint) is lag to this server.
        listed = wait_until(
            lambda: (
                (page := browser.get("/audit/")).headers["X-Read-Source"] == "replica; lag=0.0"
                and page
            ),
            "the strict server to read the caught-up replica",
        )
        assert "primary-only" in listed.text and "replica-only" not in listed.text
        assert "Figures from the read replica, 0.0 s behind" in listed.text


def replica_connections(standby: services.Standby, name: str) -> int:
    query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
    return int(sql(standby.url, query, name)[0])


async def mcp_calls(base_url: str, slug: str, tool: str, arguments: dict[str, str]) -> str:
    texts = []
    for mode in ("legacy", "2026-07-28"):
        async with asyncio.timeout(60), Client(f"{base_url}/mcp/{slug}", mode=mode) as client:
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, result
            texts.append(result.content[0].text)
    assert texts[0] == texts[1]
    return texts[0]


def test_the_mcp_path_and_writes_then_reads_stay_on_the_primary(
    standby: services.Standby, replay_resumed: None
) -> None:
    """With the replica stale, an MCP call, an admin save then an MCP call of what it saved,
    and an API write then read all see their own writes; none of it opens a connection to the
    replica, which the first audit page does."""
    endpoint = make_endpoint("replicated")
    endpoint.tools.add(make_python_tool("echo", "echo"))
    User.objects.create_superuser("op", password=PASSWORD)
    _, key = api_token_create(user=User.objects.get(username="op"), name="replica")
    wait_for_replica(standby, "replay")
    sql(standby.url, "SELECT pg_wal_replay_pause()")
    name = "mcphost-hot-path"
    with asgi_server("uvicorn", extra_env=server_env(standby, "3600", name)) as base_url:
        assert asyncio.run(mcp_calls(base_url, "replicated", "echo", {"message": "hi"})) == "hi"
        with signed_in(base_url) as browser:
            token = csrf(browser, "/admin/mcp_app/tool/add/")
            saved = browser.post(
                "/admin/mcp_app/tool/add/",
                data={**tool_form(endpoint.pk), "csrfmiddlewaretoken": token},
            )
            assert saved.status_code == 302, saved.text[:2000]
            shouted = asyncio.run(mcp_calls(base_url, "replicated", "shout", {"word": "hey"}))
            assert shouted == "HEY!"
            with api_client(base_url, key) as api:
                renamed = api.patch(
                    f"/api/v1/tools/{Tool.objects.get(name='shout').pk}/",
                    json={"description": "Shouts louder."},
                )
                assert renamed.status_code == 200, renamed.text
                fetched = api.get(f"/api/v1/tools/{Tool.objects.get(name='shout').pk}/")
                assert fetched.json()["description"] == "Shouts louder."
            # Every call has its row on the primary (the writer flushes within its bound).
            wait_until(
                lambda: CallLog.objects.filter(rpc_method="tools/call").count() == 4,
                "the four tools/call rows on the primary",
            )
            assert replica_connections(standby, name) == 0
            assert browser.get("/audit/").headers["X-Read-Source"].startswith("replica;")
            assert replica_connections(standby, name) > 0


def test_a_replica_that_does_not_answer_sends_reads_to_the_primary(
    standby: services.Standby, lenient: str
) -> None:
    User.objects.create_superuser("op", password=PASSWORD)
    make_call(target="primary-row")
    standby.stop()
    try:
        with signed_in(lenient) as browser:
            listed = browser.get("/audit/")
            assert listed.status_code == 200
            assert "primary-row" in listed.text
            assert "Figures from the primary: the read replica does not answer." in listed.text
            assert listed.headers["X-Read-Source"].startswith("primary; reason=unreachable")
            ready = httpx.get(f"{lenient}/readyz", timeout=10)
            assert ready.status_code == 200 and ready.json()["failed"] == ["replica"]
    finally:
        standby.start()
    with signed_in(lenient) as browser:
        # The pool reconnects with a backoff of its own.
        wait_until(
            lambda: browser.get("/audit/").headers["X-Read-Source"].startswith("replica;"),
            "reads to return to the restarted replica",
            timeout=60,
        )


def test_the_ordinary_suite_runs_with_the_replica_alias_mirroring_the_test_database() -> None:
    """With ``DATABASE_REPLICA_URL`` set, the alias is a ``TEST["MIRROR"]`` of the test
    database: pytest-django makes no second test database, the audit reads the test's own
    rows in a transaction or not (tests/ops/replica_mirror_suite.py), and the API's
    call-log tests pass unchanged."""
    url = database_url().rsplit("/", 1)[0] + "/mirror_check"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
         "tests/ops/replica_mirror_suite.py", "tests/api/test_call_log_export.py"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": url, "DATABASE_REPLICA_URL": url},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout
