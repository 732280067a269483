"""The policy admin: saved through the write path, bad config refused beside its field with
nothing saved, each route behind its own permission, and the endpoint's page listing them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from mcp_app.models import Endpoint, Policy
from mcp_app.services.policies.writes import policy_save
from tests.support.catalog import make_endpoint

pytestmark = pytest.mark.django_db

ADD_URL = reverse("admin:mcp_app_policy_add")
LIST_URL = reverse("admin:mcp_app_policy_changelist")


def _payload(endpoint: Endpoint, **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "endpoint": str(endpoint.pk),
        "name": "no-sql",
        "kind": "deny",
        "mode": "enforce",
        "position": "10",
        "target": "",
        "config": {"patterns": [r"(?i)drop\s+table"]},
    }
    data.update(overrides)
    data["config"] = json.dumps(data["config"])
    return data


def _policy(endpoint: Endpoint, name: str = "mask") -> Policy:
    policy = Policy(endpoint=endpoint, name=name, kind="mask")
    policy_save(policy, actor=None, source="test")
    return policy


def _staff(*codenames: str) -> Client:
    user = User.objects.create_user(f"staff-{'-'.join(codenames) or 'none'}", password="pw")
    user.is_staff = True
    user.save()
    user.user_permissions.add(
        # manage_every_team: an operator of every team (issue #27), as before teams
        *Permission.objects.filter(codename__in=[*codenames, "manage_every_team"])
    )
    client = Client()
    client.force_login(user)
    return client


def test_a_policy_added_in_the_admin_is_saved_with_its_history(admin_client: Client) -> None:
    endpoint = make_endpoint("guarded")
    response = admin_client.post(ADD_URL, _payload(endpoint))
    assert response.status_code == 302, response.content.decode()[:2000]
    policy = Policy.objects.get()
    assert (policy.name, policy.kind, policy.config) == (
        "no-sql",
        "deny",
        {"patterns": [r"(?i)drop\s+table"]},
    )
    assert policy.history.get().history_user is not None


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"config": {"patterns": ["("]}}, "config", "patterns: Invalid regular expression"),
        ({"kind": "max_result_size", "config": {}}, "config", "max_bytes: max_bytes must be"),
        ({"kind": "mask", "config": {"patterns": ["ssn"]}}, "config", "patterns: Unknown pattern"),
        ({"kind": "teleport"}, "kind", "Select a valid choice."),
        ({"mode": "sometimes"}, "mode", "Select a valid choice."),
    ],
)
def test_bad_input_is_refused_beside_its_field_and_nothing_is_saved(
    admin_client: Client, overrides: dict[str, Any], field: str, message: str
) -> None:
    endpoint = make_endpoint("guarded")
    response = admin_client.post(ADD_URL, _payload(endpoint, **overrides))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors[field][0].startswith(message), errors
    assert not Policy.objects.exists()


def test_the_endpoint_page_lists_its_policies_in_order(admin_client: Client) -> None:
    endpoint = make_endpoint("guarded")
    second = _policy(endpoint, "second")
    Policy.objects.filter(pk=second.pk).update(position=2)
    first = _policy(endpoint, "first")
    Policy.objects.filter(pk=first.pk).update(position=1)
    page = admin_client.get(reverse("admin:mcp_app_endpoint_change", args=[endpoint.pk]))
    text = page.content.decode()
    assert text.index(reverse("admin:mcp_app_policy_change", args=[first.pk])) < text.index(
        reverse("admin:mcp_app_policy_change", args=[second.pk])
    )


def test_a_policy_deleted_in_the_admin_is_gone_from_the_endpoint(admin_client: Client) -> None:
    endpoint = make_endpoint("guarded")
    policy = _policy(endpoint)
    version = Endpoint.objects.get(pk=endpoint.pk).catalog_version
    url = reverse("admin:mcp_app_policy_delete", args=[policy.pk])
    assert admin_client.post(url, {"post": "yes"}).status_code == 302
    assert not Policy.objects.exists()
    assert Endpoint.objects.get(pk=endpoint.pk).catalog_version > version


@pytest.mark.parametrize(
    ("codenames", "expected"),
    [
        ((), {"list": 403, "add": 403, "change": 403, "post": 403, "delete": 403}),
        (("view_policy",), {"list": 200, "add": 403, "change": 200, "post": 403, "delete": 403}),
        (
            ("view_policy", "add_policy"),
            {"list": 200, "add": 200, "change": 200, "post": 403, "delete": 403},
        ),  # fmt: skip
        (
            ("view_policy", "change_policy"),
            {"list": 200, "add": 403, "change": 200, "post": 302, "delete": 403},
        ),  # fmt: skip
        (
            ("view_policy", "delete_policy"),
            {"list": 200, "add": 403, "change": 200, "post": 403, "delete": 302},
        ),  # fmt: skip
    ],
)
def test_each_admin_route_needs_its_permission(
    codenames: tuple[str, ...], expected: dict[str, int]
) -> None:
    endpoint = make_endpoint("guarded")
    policy = _policy(endpoint)
    client = _staff(*codenames)
    change = reverse("admin:mcp_app_policy_change", args=[policy.pk])
    delete = reverse("admin:mcp_app_policy_delete", args=[policy.pk])
    edit = _payload(endpoint, name="mask", kind="mask", config={"patterns": ["email"]})
    seen = {
        "list": client.get(LIST_URL).status_code,
        "add": client.get(ADD_URL).status_code,
        "change": client.get(change).status_code,
        "post": client.post(change, edit).status_code,
        "delete": client.post(delete, {"post": "yes"}).status_code,
    }
    assert seen == expected
    still = Policy.objects.filter(pk=policy.pk).first()
    assert (still is None) == (expected["delete"] == 302)
    if still is not None:
        assert still.config == ({"patterns": ["email"]} if expected["post"] == 302 else {})


def test_an_endpoint_is_deleted_with_its_policies_without_their_permission() -> None:
    endpoint = make_endpoint("guarded", enabled=False)
    _policy(endpoint)
    client = _staff("view_endpoint", "delete_endpoint")
    url = reverse("admin:mcp_app_endpoint_delete", args=[endpoint.pk])
    assert client.post(url, {"post": "yes"}).status_code == 302
    assert not Endpoint.objects.exists() and not Policy.objects.exists()


def test_a_policys_history_is_shown_and_a_version_restored_through_the_write_path(
    admin_client: Client,
) -> None:
    endpoint = make_endpoint("guarded")
    policy = _policy(endpoint)
    first = policy.history.earliest("history_id")
    policy.config = {"patterns": ["email"]}
    policy_save(policy, actor=None, source="test")
    history = reverse("admin:mcp_app_policy_history", args=[policy.pk])
    assert admin_client.get(history).status_code == 200
    revert = reverse("admin:mcp_app_policy_simple_history", args=[policy.pk, first.history_id])
    response = admin_client.post(revert, _payload(endpoint, name="mask", kind="mask", config={}))
    assert response.status_code == 302
    policy.refresh_from_db()
    assert policy.config == {}
    assert policy.history.count() == 3
