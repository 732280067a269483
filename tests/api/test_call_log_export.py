"""Call-log export through the API (issue #14): the formats, filters and payload permission of
the /audit/ exports, from the same code (``mcp_app/audit/exports.py``)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from mcp_app.models import Endpoint
from mcp_app.services.api_tokens import api_token_create
from tests.api.conftest import make_user
from tests.audit.factories import make_call, make_calls

pytestmark = pytest.mark.django_db

AUDIT = "mcp_app.audit_calls"
PAYLOADS = "mcp_app.view_call_payloads"
VIEW = "mcp_app.view_calllog"
URL = "/api/v1/call-log/export/"


@pytest.fixture
def endpoint() -> Endpoint:
    return Endpoint.objects.create(slug="exported", title="Exported")


def _body(response: Any) -> bytes:
    return b"".join(response.streaming_content)


def test_csv_and_jsonl_hold_the_filtered_calls_as_audit_exports_them(
    token_client: Callable[..., APIClient], endpoint: Endpoint
) -> None:
    make_calls(endpoint, 5)
    make_call(endpoint, target="other", arguments={"x": 1})
    client = token_client(VIEW, AUDIT, PAYLOADS)

    response = client.get(URL, {"tool": "other"})
    assert response.status_code == 200
    assert response["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(_body(response).decode())))
    assert [(r["target"], r["arguments"]) for r in rows] == [("other", '{"x": 1}')]

    api = client.get(URL, {"format": "jsonl", "endpoint": "exported"})
    assert api["content-type"].startswith("application/x-ndjson")
    assert api["content-disposition"].startswith('attachment; filename="call-log-')
    lines = [json.loads(line) for line in _body(api).splitlines()]
    assert len(lines) == 6 and "arguments" in lines[0]


def test_the_api_and_audit_export_the_same_bytes(endpoint: Endpoint) -> None:
    make_calls(endpoint, 5)
    user = make_user("auditor", [VIEW, AUDIT, PAYLOADS])
    user.is_staff = True
    user.save()
    _token, key = api_token_create(user=user, name="ci")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    browser = Client()
    browser.force_login(user)

    for fmt, audit_url in [("csv", "audit_export_csv"), ("jsonl", "audit_export_jsonl")]:
        params = {"endpoint": "exported", "tool": "echo"}
        from_api = _body(api.get(URL, {**params, "format": fmt}))
        from_audit = _body(browser.get(reverse(f"mcp_app:{audit_url}"), params))
        assert from_api == from_audit and from_api


def test_payloads_need_their_permission_and_the_export_needs_the_audit_one(
    token_client: Callable[..., APIClient], endpoint: Endpoint
) -> None:
    make_call(endpoint, target="other", arguments={"x": 1})

    bare = token_client(VIEW, AUDIT).get(URL, {"format": "jsonl"})
    line = json.loads(_body(bare))
    assert "arguments" not in line and "result" not in line
    assert token_client(VIEW, username="viewer").get(URL).status_code == 403


def test_an_unknown_format_or_filter_value_is_a_field_error(
    token_client: Callable[..., APIClient],
) -> None:
    client = token_client(VIEW, AUDIT)
    assert client.get(URL, {"format": "xml"}).json()["errors"][0]["path"] == "format"
    assert client.get(URL, {"status": "nonsense"}).status_code == 400
