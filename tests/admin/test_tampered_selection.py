"""A tampered bulk-action selection (issue #28): the endpoint and upstream lists answered 500
when ``_selected_action`` held a key that is no number, and ran the action on the rest when it
named a row the list does not show. Now every admin list says so and changes nothing."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from mcp_app.models import Endpoint, Upstream
from tests.support.catalog import make_endpoint

pytestmark = pytest.mark.django_db

TAMPERED = pytest.mark.parametrize(
    "bad",
    ["abc", "²", "1 OR 1=1", "99999999999999999999999", "999999", "1\x00"],
    ids=["text", "unicode-digit", "injection", "too-large", "gone", "nul"],
)


def shown(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def post(client: Client, model: type, action: str, keys: list[str], **data: Any) -> Any:
    url = reverse(f"admin:mcp_app_{model._meta.model_name}_changelist")
    payload = {"action": action, "_selected_action": keys, "index": "0", **data}
    return client.post(url, payload, follow=True)


@TAMPERED
@pytest.mark.parametrize("action", ["export_yaml", "delete_selected"])
def test_the_endpoint_list_refuses_a_tampered_selection(
    admin_client: Client, bad: str, action: str
) -> None:
    endpoint = make_endpoint("shop")

    response = post(admin_client, Endpoint, action, [str(endpoint.pk), bad], post="yes")

    assert response.status_code == 200
    assert "Content-Disposition" not in response.headers
    assert shown(response) == [
        "Some of the selected endpoints do not exist (any more). Nothing was changed."
    ]
    assert Endpoint.objects.filter(pk=endpoint.pk).exists()


@TAMPERED
def test_the_upstream_list_refuses_a_tampered_selection(admin_client: Client, bad: str) -> None:
    upstream = Upstream(
        name="shop",
        url="http://127.0.0.1:9/mcp",
        consecutive_failures=5,
        circuit_open_until=timezone.now() + datetime.timedelta(minutes=5),
    )
    upstream.full_clean()
    upstream.save()

    response = post(admin_client, Upstream, "reset_breaker", [str(upstream.pk), bad])

    assert response.status_code == 200
    assert shown(response) == [
        "Some of the selected upstreams do not exist (any more). Nothing was changed."
    ]
    upstream.refresh_from_db()
    assert upstream.consecutive_failures == 5


def test_an_honest_selection_still_runs(admin_client: Client) -> None:
    shop, cafe = make_endpoint("shop"), make_endpoint("cafe")

    response = post(admin_client, Endpoint, "export_yaml", [str(shop.pk), str(cafe.pk)])

    assert response.status_code == 200
    assert "attachment" in response.headers["Content-Disposition"]
