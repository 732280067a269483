"""/api/v1/policies/: policies written through the write path, bad input refused with nothing
saved, and each method behind its own model permission."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from mcp_app.models import Endpoint, Policy
from mcp_app.services.policies.writes import policy_save
from tests.support.catalog import make_endpoint

pytestmark = pytest.mark.django_db

URL = "/api/v1/policies/"
ALL = [f"mcp_app.{action}_policy" for action in ("view", "add", "change", "delete")]


def _body(**overrides: Any) -> dict[str, Any]:
    return {
        "endpoint": "guarded",
        "name": "cap",
        "kind": "max_result_size",
        "mode": "enforce",
        "position": 5,
        "config": {"max_bytes": 4096},
        **overrides,
    }


@pytest.fixture
def endpoint() -> Endpoint:
    return make_endpoint("guarded")


def test_a_policy_is_created_listed_and_changed(
    token_client: Callable[..., APIClient], endpoint: Endpoint
) -> None:
    api = token_client(*ALL)
    created = api.post(URL, _body(), format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["endpoint"] == "guarded"
    assert created["ETag"]
    listed = api.get(URL, {"endpoint": "guarded"}).json()["results"]
    assert [row["name"] for row in listed] == ["cap"]
    url = f"{URL}{created.json()['id']}/"
    changed = api.patch(url, {"mode": "permissive"}, format="json")
    assert changed.status_code == 200
    assert Policy.objects.get().mode == "permissive"
    assert Policy.objects.get().history.count() == 2


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"config": {"max_bytes": -1}}, "config", "max_bytes: max_bytes must be"),
        ({"config": {"max_bytes": 1, "x": 1}}, "config", "x: Unknown key 'x'"),
        ({"kind": "deny", "config": {"patterns": ["(?<"]}}, "config", "patterns: Invalid"),
        ({"kind": "teleport"}, "kind", "Unknown policy kind 'teleport'"),
        ({"mode": "sometimes"}, "mode", '"sometimes" is not a valid choice.'),
        ({"endpoint": "nowhere"}, "endpoint", "Object with slug=nowhere does not exist."),
    ],
)
def test_bad_input_is_refused_with_its_reason_and_nothing_is_saved(
    token_client: Callable[..., APIClient],
    endpoint: Endpoint,
    overrides: dict[str, Any],
    field: str,
    message: str,
) -> None:
    response = token_client(*ALL).post(URL, _body(**overrides), format="json")
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert errors[0]["path"] == field, errors
    assert errors[0]["message"].startswith(message), errors
    assert not Policy.objects.exists()


def test_an_update_with_bad_config_leaves_the_policy_as_it_was(
    token_client: Callable[..., APIClient], endpoint: Endpoint
) -> None:
    policy = Policy(endpoint=endpoint, name="cap", kind="max_result_size",
                    config={"max_bytes": 10})  # fmt: skip
    policy_save(policy, actor=None, source="test")
    response = token_client(*ALL).patch(
        f"{URL}{policy.pk}/", {"config": {"max_bytes": 0}}, format="json"
    )
    assert response.status_code == 400
    assert Policy.objects.get().config == {"max_bytes": 10}


@pytest.mark.parametrize(
    ("method", "needs"),
    [
        ("list", "view"),
        ("read", "view"),
        ("create", "add"),
        ("update", "change"),
        ("delete", "delete"),
    ],  # fmt: skip
)
def test_each_method_needs_its_permission(
    token_client: Callable[..., APIClient], endpoint: Endpoint, method: str, needs: str
) -> None:
    policy = Policy(endpoint=endpoint, name="mask", kind="mask")
    policy_save(policy, actor=None, source="test")
    others = [name for name in ALL if not name.endswith(f".{needs}_policy")]
    refused = token_client(*others, username="without")
    allowed = token_client(*ALL, username="with")

    def call(api: APIClient) -> int:
        item = f"{URL}{policy.pk}/"
        response = {
            "list": lambda: api.get(URL),
            "read": lambda: api.get(item),
            "create": lambda: api.post(URL, _body(), format="json"),
            "update": lambda: api.patch(item, {"position": 3}, format="json"),
            "delete": lambda: api.delete(item),
        }[method]()
        return int(response.status_code)

    assert call(refused) == 403
    assert call(allowed) in (200, 201, 204)
