"""The request id (X-Request-Id) on the audit pages: shown on a call, searchable and a filter of
the list, indexed like the list's other filters."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from mcp_app.models import CallLog, Endpoint
from tests.audit.factories import make_call

pytestmark = pytest.mark.django_db

REQUEST_ID = "5f0c2a9e7b1d4c3a8e6f9b0a1c2d3e4f"


@pytest.fixture
def staff_client(admin_user: User) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


def test_a_call_shows_its_request_id_linked_to_every_record_of_that_request(
    staff_client: Client, endpoint: Endpoint
) -> None:
    # A batch: two records of one HTTP request share its id.
    first = make_call(endpoint, target="one", request_id=REQUEST_ID)
    make_call(endpoint, target="two", request_id=REQUEST_ID)
    make_call(endpoint, target="other", request_id="another-request")

    page = staff_client.get(reverse("mcp_app:audit_detail", args=[first.pk])).content.decode()

    link = re.search(r'<dd id="request-id"><a href="([^"]+)"><code>([^<]+)</code>', page)
    assert link is not None and link.group(2) == REQUEST_ID
    listed = staff_client.get(html.unescape(link.group(1))).context["rows"]
    assert sorted(row.target for row in listed) == ["one", "two"]


def test_the_list_filters_and_searches_by_request_id(
    staff_client: Client, endpoint: Endpoint
) -> None:
    make_call(endpoint, target="wanted", request_id=REQUEST_ID)
    make_call(endpoint, target="unwanted", request_id="another-request")

    by_filter = staff_client.get(reverse("mcp_app:audit_list"), {"request_id": REQUEST_ID})
    by_search = staff_client.get(reverse("mcp_app:audit_list"), {"q": REQUEST_ID})
    export = staff_client.get(reverse("mcp_app:audit_export_jsonl"), {"request_id": REQUEST_ID})

    assert [row.target for row in by_filter.context["rows"]] == ["wanted"]
    assert 'name="request_id"' in by_filter.content.decode()
    assert [row.target for row in by_search.context["rows"]] == ["wanted"]
    lines = b"".join(export.streaming_content).decode().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1 and f'"request_id": "{REQUEST_ID}"' in lines[0]


def test_the_request_id_has_an_index_ending_in_id() -> None:
    indexes = {index.name: index.fields for index in CallLog._meta.indexes}
    assert indexes["calllog_request_id"] == ["request_id", "-id"]
