"""Policy decisions in the audit UI and the API's call log: shown on the call's page, and
filterable by policy name (or any policy) in /audit/, its export and /api/v1/call-log/."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from mcp_app.models import CallLog
from mcp_app.services.api_tokens import api_token_create
from tests.audit.factories import make_call
from tests.support.catalog import make_endpoint

pytestmark = pytest.mark.django_db

MASKED = {
    "policy": "mask-secrets",
    "kind": "mask",
    "mode": "enforce",
    "phase": "after",
    "action": "masked",
    "detail": "1 email",
    "applied": True,
}
WATCHED = {**MASKED, "policy": "watch", "mode": "permissive", "applied": False}


@pytest.fixture
def calls() -> dict[str, CallLog]:
    endpoint = make_endpoint("audited")
    return {
        "plain": make_call(endpoint, rpc_id="1"),
        "masked": make_call(endpoint, rpc_id="2", policy_decisions=[MASKED]),
        "watched": make_call(endpoint, rpc_id="3", policy_decisions=[WATCHED]),
    }


def _user(*codenames: str) -> User:
    user = User.objects.create_user(f"user-{'-'.join(codenames)}", password="pw", is_staff=True)
    user.user_permissions.add(
        # manage_every_team: an operator of every team (issue #27), as before teams
        *Permission.objects.filter(codename__in=[*codenames, "manage_every_team"])
    )
    return user


@pytest.fixture
def auditor() -> Client:
    client = Client()
    client.force_login(_user("audit_calls"))
    return client


def _exported(client: Client, **params: str) -> set[str]:
    response = client.get(reverse("mcp_app:audit_export_jsonl"), params)
    assert response.status_code == 200
    body = b"".join(response.streaming_content).decode()  # type: ignore[attr-defined]
    return {json.loads(line)["rpc_id"] for line in body.splitlines()}


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("mask-secrets", {"2"}), ("watch", {"3"}), ("*", {"2", "3"}), ("", {"1", "2", "3"})],
)
def test_the_audit_list_and_export_filter_calls_by_policy(
    auditor: Client, calls: dict[str, CallLog], policy: str, expected: set[str]
) -> None:
    page = auditor.get(reverse("mcp_app:audit_list"), {"policy": policy})
    assert page.status_code == 200
    assert {row.rpc_id for row in page.context["rows"]} == expected
    assert _exported(auditor, policy=policy) == expected


def test_the_call_page_shows_each_decision(auditor: Client, calls: dict[str, CallLog]) -> None:
    page = auditor.get(reverse("mcp_app:audit_detail", args=[calls["watched"].pk]))
    text = page.content.decode()
    assert 'id="policy-decisions"' in text
    assert "?policy=watch" in text and "(not applied: permissive)" in text
    plain = auditor.get(reverse("mcp_app:audit_detail", args=[calls["plain"].pk]))
    assert 'id="policy-decisions"' not in plain.content.decode()


def test_the_api_call_log_carries_decisions_and_filters_by_policy(
    calls: dict[str, CallLog],
) -> None:
    user = _user("view_calllog", "audit_calls")
    _token, key = api_token_create(user=user, name="ci")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    rows = api.get("/api/v1/call-log/", {"policy": "mask-secrets"}).json()["results"]
    assert [(row["rpc_id"], row["policy_decisions"]) for row in rows] == [("2", [MASKED])]
