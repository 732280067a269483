"""The product behind PgBouncer in transaction mode (issue #30), the pooler a deployment puts
between many processes and PostgreSQL: a real PgBouncer from Debian in front of the test
database, and a real uvicorn process configured with ``DATABASE_POOLER=transaction``.

Transaction pooling hands each transaction whichever server connection is free, so nothing a
connection keeps between transactions may be relied on: server-side prepared statements (a
prepared statement lives on one server connection and is missing on the next), server-side
cursors, startup options (a stock PgBouncer, as here, refuses a client that sends them: the
product's statement timeout did, so without ``DATABASE_POOLER`` every request got 503). The
MCP path in both eras, the admin, the API and the audit pages are driven through it; enough
calls to pass psycopg's prepare threshold many times over, on several client connections
sharing fewer server connections.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.contrib.auth.models import User
from mcp import Client

from mcp_app.models import CallLog
from mcp_app.services.api_tokens import api_token_create
from scripts import services
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.live import ROOT, asgi_server, database_url

pytestmark = pytest.mark.django_db(transaction=True)

MODES = ["legacy", "2026-07-28"]
# Past psycopg's default prepare threshold (5) many times over, per era.
CALLS = 40
PASSWORD = "pooled-operator-password-1"


@pytest.fixture
def bouncer() -> Iterator[str]:
    with services.pgbouncer(database_url(), pool_mode="transaction") as url:
        yield url


def bouncer_stats(url: str) -> dict[str, int]:
    """PgBouncer's own counters for the test database (its admin console speaks only the
    simple query protocol, which psql uses)."""
    psql = next(Path(p) for p in sorted(Path("/usr/lib/postgresql").glob("*/bin/psql")))
    port = url.rsplit(":", 1)[1].split("/", 1)[0]
    output = subprocess.run(
        [str(psql), "-h", "127.0.0.1", "-p", port, "-U", "postgres", "-d", "pgbouncer",
         "-A", "-F", "|", "-c", "SHOW STATS"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    header, *rows = output.splitlines()
    names = header.split("|")
    database = url.rsplit("/", 1)[1]
    for row in rows:
        values = dict(zip(names, row.split("|"), strict=False))
        if values.get("database") == database:
            return {key: int(value) for key, value in values.items() if value.isdigit()}
    return {}


async def mcp_calls(base_url: str) -> None:
    for mode in MODES:
        async with asyncio.timeout(60), Client(f"{base_url}/mcp/pooled", mode=mode) as client:
            listed = await client.list_tools()
            assert [tool.name for tool in listed.tools] == ["echo"]
            for i in range(CALLS):
                result = await client.call_tool("echo", {"message": f"{mode} {i}"})
                assert not result.is_error, result
                assert result.content[0].text == f"{mode} {i}"


def admin_session(client: httpx.Client) -> None:
    page = client.get("/admin/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token is not None, page.text[:500]
    answer = client.post(
        "/admin/login/?next=/admin/",
        data={"csrfmiddlewaretoken": token[1], "username": "op", "password": PASSWORD},
    )
    assert answer.status_code == 302, answer.text[:500]


def test_mcp_admin_api_and_audit_work_through_pgbouncer_in_transaction_mode(bouncer: str) -> None:
    endpoint = make_endpoint("pooled")
    endpoint.tools.add(make_python_tool("echo", "echo"))
    operator = User.objects.create_superuser("op", password=PASSWORD)
    _, key = api_token_create(user=operator, name="pooled")
    env = {"DATABASE_URL": bouncer, "DATABASE_POOLER": "transaction", "DATABASE_POOL_MAX_SIZE": "4"}
    before = bouncer_stats(bouncer).get("total_xact_count", 0)

    with asgi_server("uvicorn", extra_env=env) as base_url:
        asyncio.run(mcp_calls(base_url))
        with httpx.Client(base_url=base_url, timeout=30) as browser:
            admin_session(browser)
            for path in ("/admin/", "/admin/mcp_app/tool/", "/admin/mcp_app/endpoint/", "/audit/"):
                page = browser.get(path)
                assert page.status_code == 200, (path, page.text[:500])
            assert "echo" in browser.get("/admin/mcp_app/tool/").text
        with httpx.Client(
            base_url=base_url, timeout=30, headers={"Authorization": f"Bearer {key}"}
        ) as api:
            created = api.post(
                "/api/v1/tools/",
                json={"name": "shout", "kind": "template", "description": "Shouts.",
                      "config": {"template": "{{ text }}!"}, "endpoints": ["pooled"],
                      "input_schema": {"type": "object",
                                       "properties": {"text": {"type": "string"}}}},
            )  # fmt: skip
            assert created.status_code == 201, created.text
            listed = api.get("/api/v1/tools/")
            assert listed.status_code == 200
            assert {tool["name"] for tool in listed.json()["results"]} == {"echo", "shout"}
            calls = api.get("/api/v1/call-log/", params={"target": "echo"})
            assert calls.status_code == 200, calls.text

    # Every call was recorded, through the pooler too.
    recorded = CallLog.objects.filter(endpoint_slug="pooled", rpc_method="tools/call").count()
    assert recorded == CALLS * len(MODES)
    # And the server's transactions went through PgBouncer, not around it.
    assert bouncer_stats(bouncer)["total_xact_count"] - before > CALLS * len(MODES)


def test_an_unknown_pooler_mode_is_refused_at_start() -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_POOLER": "statement"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "DATABASE_POOLER='statement': expected 'transaction'" in result.stderr
