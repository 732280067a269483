"""Rate limits through the management API and the admin (issue #27): created, checked, refused.

Bad input gets a 400 (the admin: the form's errors) naming the field, and writes nothing; every
route needs the model permission of its method, and a refusal (403) names the one missing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from mcp_app.models import CallLog, RateLimit
from mcp_app.protocol.results import Outcome
from mcp_app.services.catalog_writes import endpoint_create

pytestmark = pytest.mark.django_db

URL = "/api/v1/rate-limits/"
ALL = [f"mcp_app.{action}_ratelimit" for action in ("view", "add", "change", "delete")]


@pytest.fixture
def endpoint() -> Any:
    return endpoint_create(slug="limited", auth_mode="public")


def _limit(endpoint: Any, **fields: Any) -> RateLimit:
    row = RateLimit(endpoint=endpoint, **{"rate": 10, **fields})
    row.full_clean()
    row.save()
    return row


def test_a_limit_is_created_and_read_back(token_client: Callable[..., APIClient], endpoint: Any):
    client = token_client(*ALL)
    response = client.post(
        URL,
        {
            "endpoint": "limited",
            "scope": "caller",
            "target_kind": "tool",
            "target_name": "echo",
            "rate": 5,
            "window": "minute",
            "burst": 10,
            "max_concurrent": 2,
            "quota": 1000,
            "quota_period": "month",
            "on_redis_down": "closed",
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    row = RateLimit.objects.get()
    assert (row.rate, row.burst, row.max_concurrent, row.quota) == (5, 10, 2, 1000)
    assert row.on_redis_down == "closed"
    assert row.history.count() == 1
    listed = client.get(URL, {"endpoint": "limited"}).json()
    assert [item["id"] for item in listed["results"]] == [row.pk]


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({}, "rate"),  # no bound at all
        ({"burst": 5}, "burst"),  # a burst without a rate
        ({"rate": 0}, "rate"),
        ({"rate": -3}, "rate"),
        ({"rate": 5, "target_kind": "tool"}, "target_name"),
        ({"rate": 5, "target_name": "echo"}, "target_kind"),
        ({"rate": 5, "window": "fortnight"}, "window"),
        ({"rate": 5, "on_redis_down": "maybe"}, "on_redis_down"),
        ({"rate": 5, "endpoint": "nowhere"}, "endpoint"),
        ({"rate": "many"}, "rate"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_writes_nothing(
    token_client: Callable[..., APIClient], endpoint: Any, data: dict[str, Any], field: str
):
    client = token_client(*ALL)
    response = client.post(URL, {"endpoint": "limited", **data}, format="json")
    assert response.status_code == 400
    assert field in {error["path"] for error in response.json()["errors"]}, response.json()
    assert not RateLimit.objects.exists()


def test_a_bad_update_changes_nothing(token_client: Callable[..., APIClient], endpoint: Any):
    row = _limit(endpoint, rate=7)
    client = token_client(*ALL)
    response = client.patch(f"{URL}{row.pk}/", {"rate": None}, format="json")
    assert response.status_code == 400
    row.refresh_from_db()
    assert row.rate == 7
    assert row.history.count() == 1


@pytest.mark.parametrize(
    ("method", "path", "needs"),
    [
        ("get", "", "mcp_app.view_ratelimit"),
        ("get", "{pk}/", "mcp_app.view_ratelimit"),
        ("get", "{pk}/usage/", "mcp_app.view_ratelimit"),
        ("post", "", "mcp_app.add_ratelimit"),
        ("patch", "{pk}/", "mcp_app.change_ratelimit"),
        ("delete", "{pk}/", "mcp_app.delete_ratelimit"),
    ],
)
def test_each_route_needs_its_permission(
    token_client: Callable[..., APIClient], endpoint: Any, method: str, path: str, needs: str
):
    row = _limit(endpoint)
    client = token_client(*[name for name in ALL if name != needs])
    body = {"endpoint": "limited", "rate": 3} if method == "post" else {"rate": 3}
    response = getattr(client, method)(URL + path.format(pk=row.pk), body, format="json")
    assert response.status_code == 403
    assert needs in response.json()["detail"]
    row.refresh_from_db()
    assert row.rate == 10
    assert RateLimit.objects.count() == 1


def test_with_every_permission_each_route_goes_through(
    token_client: Callable[..., APIClient], endpoint: Any
):
    row = _limit(endpoint, quota=5)
    client = token_client(*ALL)
    assert client.get(f"{URL}{row.pk}/usage/").json() == {
        "quota": 5,
        "quota_period": "day",
        "usage": [],
    }
    assert client.patch(f"{URL}{row.pk}/", {"rate": 3}, format="json").status_code == 200
    assert client.delete(f"{URL}{row.pk}/").status_code == 204
    assert not RateLimit.objects.exists()


def test_the_call_log_filters_rate_limited_calls(
    token_client: Callable[..., APIClient], endpoint: Any
):
    # The outcome is one of the call log's statuses (a stored value, never renamed).
    assert Outcome.RATE_LIMITED.value == "rate_limited"
    assert "rate_limited" in dict(CallLog._meta.get_field("status").choices)


# -- the admin --------------------------------------------------------------------------------

ADD_URL = reverse("admin:mcp_app_ratelimit_add")


def _admin_payload(endpoint: Any, **overrides: str) -> dict[str, str]:
    data = {
        "endpoint": str(endpoint.pk),
        "description": "",
        "enabled": "on",
        "scope": "caller",
        "target_kind": "",
        "target_name": "",
        "rate": "",
        "window": "minute",
        "burst": "",
        "max_concurrent": "",
        "quota": "",
        "quota_period": "day",
        "on_redis_down": "open",
    }
    data.update(overrides)
    return data


def test_the_admin_saves_a_limit_through_the_write_path(admin_client: Client, endpoint: Any):
    response = admin_client.post(ADD_URL, _admin_payload(endpoint, rate="5", quota="100"))
    assert response.status_code == 302
    row = RateLimit.objects.get()
    assert (row.rate, row.quota) == (5, 100)
    assert row.history.get().history_change_reason == "admin"
    page = admin_client.get(reverse("admin:mcp_app_ratelimit_change", args=[row.pk]))
    assert b"nothing yet (of 100)" in page.content


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({}, "rate"),
        ({"burst": "4"}, "burst"),
        ({"rate": "0"}, "rate"),
        ({"rate": "5", "target_kind": "prompt"}, "target_name"),
    ],
)
def test_the_admin_refuses_bad_input_beside_the_field(
    admin_client: Client, endpoint: Any, overrides: dict[str, str], field: str
):
    response = admin_client.post(ADD_URL, _admin_payload(endpoint, **overrides))
    assert response.status_code == 200
    assert field in response.context["adminform"].form.errors
    assert not RateLimit.objects.exists()


def test_staff_without_the_permission_cannot_open_the_admin(client: Client, endpoint: Any):
    user = User.objects.create_user("staff", password="unused-password-123", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_endpoint"))
    client.force_login(user)
    assert client.get(reverse("admin:mcp_app_ratelimit_changelist")).status_code == 403
    assert client.post(ADD_URL, _admin_payload(endpoint, rate="5")).status_code == 403
    assert not RateLimit.objects.exists()


def test_a_limit_is_reverted_through_the_write_path(
    token_client: Callable[..., APIClient], endpoint: Any
):
    client = token_client(*ALL)
    created = client.post(URL, {"endpoint": "limited", "rate": 5}, format="json").json()
    assert client.patch(f"{URL}{created['id']}/", {"rate": 9}, format="json").status_code == 200
    versions = client.get(f"{URL}{created['id']}/history/").json()
    first = versions[-1]["history_id"]
    response = client.post(f"{URL}{created['id']}/revert/", {"history_id": first}, format="json")
    assert response.status_code == 200, response.json()
    assert RateLimit.objects.get().rate == 5
    assert client.get(f"{URL}{created['id']}/history/").json()[0]["source"] == "api"


def test_staff_with_view_only_sees_limits_and_changes_none(client: Client, endpoint: Any):
    row = _limit(endpoint, rate=4)
    user = User.objects.create_user("viewer", password="unused-password-123", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(codename="view_ratelimit"),
        Permission.objects.get(codename="manage_every_team"),  # sees every team's rows
    )
    client.force_login(user)
    change_url = reverse("admin:mcp_app_ratelimit_change", args=[row.pk])
    assert client.get(reverse("admin:mcp_app_ratelimit_changelist")).status_code == 200
    assert client.get(change_url).status_code == 200
    assert client.post(change_url, _admin_payload(endpoint, rate="40")).status_code == 403
    assert client.post(ADD_URL, _admin_payload(endpoint, rate="5")).status_code == 403
    delete_url = reverse("admin:mcp_app_ratelimit_delete", args=[row.pk])
    assert client.post(delete_url, {"post": "yes"}).status_code == 403
    row.refresh_from_db()
    assert row.rate == 4
    assert RateLimit.objects.count() == 1
