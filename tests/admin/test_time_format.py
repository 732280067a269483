"""One time format on every page (issue #28): the admin, the audit list and the live tail all
print the audit's ``2026-11-26 06:00:01 UTC`` (mcpsite/formats), not three different ones."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.test import Client
from django.urls import reverse

from mcp_app.models import Tool
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from tests.audit.factories import make_call

pytestmark = pytest.mark.django_db

AT = datetime(2026, 11, 26, 6, 0, 1, tzinfo=UTC)
SHOWN = "2026-11-26 06:00:01 UTC"
FORMAT = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


def test_the_admin_prints_times_as_the_audit_does(admin_client: Client) -> None:
    tool = tool_create(
        name="greet",
        kind=Tool.Kind.TEMPLATE,
        config={"template": "Hello!", "output": "text"},
        description="Greets.",
        input_schema={"type": "object", "properties": {}},
        endpoints=[],
    )
    tool.history.update(history_date=AT)

    page = admin_client.get(reverse("admin:mcp_app_tool_history", args=[tool.pk]))

    assert SHOWN in page.content.decode()
    assert "a.m." not in page.content.decode()


def test_the_audit_list_and_the_live_tail_print_the_same_format(admin_client: Client) -> None:
    endpoint = endpoint_create(slug="times")
    first = make_call(endpoint, created_at=AT)

    listed = admin_client.get(reverse("mcp_app:audit_list")).content.decode()
    make_call(endpoint, created_at=AT)
    tail = admin_client.get(reverse("mcp_app:audit_feed"), {"after": first.pk}).json()

    assert SHOWN in listed
    assert tail["rows"][0]["created_at"] == SHOWN
    assert FORMAT.fullmatch(tail["updated"]), tail["updated"]
