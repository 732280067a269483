"""The official SDK client, in its default 2026-07-28 mode and in legacy mode, calls a live
server; the operator then finds those calls by the client's name: in the call list's filter
and column, the overview, an export and the API.

Spec: 2026-07-28 basic/index "Per-request protocol fields": a request declares its client in
``params._meta`` (``io.modelcontextprotocol/clientInfo``); there is no initialize.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connections
from django.test import Client as DjangoClient
from django.urls import reverse
from mcp import Client
from mcp.types import Implementation
from rest_framework.test import APIClient

from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.live import flush_database, wait_until_idle

pytestmark = pytest.mark.django_db
SLUG = "e2e-audit-clients"


@pytest.fixture(scope="module")
def server(live_server_url: str, django_db_blocker: Any) -> Iterator[str]:
    with django_db_blocker.unblock():
        endpoint = make_endpoint(SLUG)
        endpoint.tools.add(make_python_tool("echo", "echo"), make_python_tool("add", "add"))
    yield live_server_url
    flush_database(django_db_blocker)


async def test_the_audit_finds_an_sdk_clients_calls_by_its_name_in_both_eras(server):
    url = f"{server}/mcp/{SLUG}"
    modern = Implementation(name="e2e-modern-agent", version="3.1", title="Modern agent")
    legacy = Implementation(name="e2e-legacy-agent", version="0.7")
    async with asyncio.timeout(30):
        async with Client(url, client_info=modern) as client:  # the SDK's default: 2026-07-28
            assert client.session.protocol_version == "2026-07-28"
            await client.call_tool("echo", {"message": "from 2026"})
            failed = await client.call_tool("add", {"a": 1, "b": "two"})
            assert failed.is_error
        async with Client(url, mode="legacy", client_info=legacy) as client:
            await client.call_tool("echo", {"message": "from a session"})
    await asyncio.to_thread(wait_until_idle, server)

    def scan() -> None:
        auditor = User.objects.create_user("e2e-client-auditor", is_staff=True)
        auditor.user_permissions.add(
            *Permission.objects.filter(
                codename__in=["audit_calls", "view_calllog", "manage_every_team"]
            )
        )
        browser = DjangoClient()
        browser.force_login(auditor)
        listed = browser.get(reverse("mcp_app:audit_list"), {"client_name": "e2e-modern-agent"})
        rows = listed.context["rows"]
        calls = sorted(row.target for row in rows if row.rpc_method == "tools/call")
        assert calls == ["add", "echo"]
        assert {(row.era, row.client_version) for row in rows} == {("modern", "3.1")}
        page = listed.content.decode()
        assert '<a href="?client_name=e2e-modern-agent">e2e-modern-agent</a>' in page
        # "What failed in the last hour, from that client": the error, without opening it.
        failures = browser.get(
            reverse("mcp_app:audit_list"),
            {"client_name": "e2e-modern-agent", "status": "failed", "range": "1h"},
        ).context["rows"]
        assert [(row.target, row.status) for row in failures] == [("add", "tool_error")]

        sessions = browser.get(reverse("mcp_app:audit_list"), {"client_name": "e2e-legacy-agent"})
        legacy_rows = sessions.context["rows"]
        assert {row.era for row in legacy_rows} == {"legacy"}
        assert "initialize" in {row.rpc_method for row in legacy_rows}

        overview = browser.get(reverse("mcp_app:audit_overview")).context["overview"]
        programs = {(p.name, p.version): p.calls for p in overview.client_programs}
        assert programs[("e2e-modern-agent", "3.1")] >= 2
        assert programs[("e2e-legacy-agent", "0.7")] >= 3

        export = browser.get(
            reverse("mcp_app:audit_export_jsonl"), {"client_name": "e2e-modern-agent"}
        )
        lines = [json.loads(line) for line in b"".join(export.streaming_content).splitlines()]  # type: ignore[attr-defined]
        assert lines and {line["client_info"]["title"] for line in lines} == {"Modern agent"}

        api = APIClient()
        api.force_authenticate(user=auditor)
        found = api.get("/api/v1/call-log/", {"client_name": "e2e-legacy-agent"}).json()
        assert found["results"]
        assert {item["client_version"] for item in found["results"]} == {"0.7"}

    def scan_and_close() -> None:
        try:
            scan()
        finally:
            connections.close_all()  # this thread's own connection

    await asyncio.to_thread(scan_and_close)
