"""Exports under a real ASGI server stream: complete and correct, and the server's memory grows
by about one chunk of rows, not by the export (Django would read a synchronous iterator whole
before its first byte)."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.urls import reverse

from tests.support.live import asgi_server, flush_database

pytestmark = pytest.mark.django_db

ROWS = 20_000
PAYLOAD_CHARS = 4000

FILL = """
INSERT INTO mcp_app_calllog (
    created_at, duration_ms, endpoint_slug, era, protocol_version, session_id, http_method,
    http_status, message_type, rpc_method, rpc_id, target, client_id, user_agent, status,
    error_message, capture, arguments, arguments_bytes, truncated, task_id, worker, request_id
)
SELECT
    now() - (%(rows)s - n) * interval '1 second', n / 10.0, 'export', 'modern', '2026-07-28',
    '', 'POST', 200, 'request', 'tools/call', n::text, 'tool_' || (n %% 10), '', 'export-test',
    'ok', '', 'full', jsonb_build_object('n', n, 'text', repeat('x', %(chars)s)), %(chars)s,
    false, '', '', ''
FROM generate_series(1, %(rows)s) AS n
"""


def server_pid(port: int) -> int:
    """The pid of the Daphne process this test started on ``port``."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"daphne" in args and str(port).encode() in args:
            return int(proc.name)
    raise AssertionError(f"no daphne process on port {port}")


def peak_rss_kb(pid: int) -> int:
    """The process's resident-set high-water mark (VmHWM), in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


@pytest.fixture(scope="module")
def export_server(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    """A fresh Daphne (so its memory peak is this test's) over ``ROWS`` large records, and
    the session cookie of an auditor allowed to see payloads."""
    with django_db_blocker.unblock():
        with connection.cursor() as cursor:
            cursor.execute(FILL, {"rows": ROWS, "chars": PAYLOAD_CHARS})
        user = User.objects.create_user("exporter", password="pw", is_staff=True)
        user.user_permissions.add(
            *Permission.objects.filter(
                codename__in=["audit_calls", "view_call_payloads", "manage_every_team"]
            )
        )
    try:
        with asgi_server("daphne") as base:
            port = int(base.rsplit(":", 1)[1])
            yield {"base": base, "cookies": log_in(base, "exporter", "pw"), "port": port}
    finally:
        flush_database(django_db_blocker)


def log_in(base: str, username: str, password: str) -> dict[str, str]:
    """Sign in through the admin's login form (the server signs sessions with its own key)."""
    with httpx.Client(base_url=base, timeout=30) as client:
        page = client.get("/admin/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token is not None
        response = client.post(
            "/admin/login/",
            data={
                "csrfmiddlewaretoken": token.group(1),
                "username": username,
                "password": password,
                "next": "/audit/",
            },
            headers={"referer": f"{base}/admin/login/"},
        )
        assert response.status_code == 302, response.text[:500]
        return {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME]}


def get(server: dict[str, Any], name: str, params: dict[str, str]) -> httpx.Response:
    url = server["base"] + reverse(f"mcp_app:{name}")
    return httpx.get(url, params=params, cookies=server["cookies"], timeout=120)


def test_jsonl_export_streams_every_row_in_bounded_memory(export_server):
    pid = server_pid(export_server["port"])
    # Warm up (imports, the first query) with a small export before taking the baseline.
    assert get(export_server, "audit_export_jsonl", {"tool": "none"}).status_code == 200
    before = peak_rss_kb(pid)
    url = export_server["base"] + reverse("mcp_app:audit_export_jsonl")
    pieces: list[bytes] = []
    with httpx.stream("GET", url, cookies=export_server["cookies"], timeout=120) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/x-ndjson")
        # Read as fast as the server sends (Daphne buffers whatever the client leaves
        # unread); parse afterwards.
        pieces.extend(response.iter_raw())
    growth_kb = peak_rss_kb(pid) - before
    body = b"".join(pieces)
    size = len(body)
    rows = [json.loads(line) for line in body.splitlines()]
    ids = [row["id"] for row in rows]
    assert rows[0]["arguments"]["text"] == "x" * PAYLOAD_CHARS
    assert len(ids) == ROWS and len(set(ids)) == ROWS
    assert ids == sorted(ids, reverse=True)
    # Reading the export whole would need at least its size (about 80 MB) at once.
    assert size > 80_000_000
    assert growth_kb * 1024 < size / 3, (growth_kb, size)


def test_csv_export_streams_the_filtered_rows(export_server):
    response = get(export_server, "audit_export_csv", {"tool": "tool_3"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert len(rows) == ROWS // 10
    assert {row["target"] for row in rows} == {"tool_3"}
    first = json.loads(rows[0]["arguments"])
    assert first == {"n": int(rows[0]["rpc_id"]), "text": "x" * PAYLOAD_CHARS}
