"""The audit pages as an operator reads them: names instead of ids, try-it calls marked, times
with their zone."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from oauth2_provider.models import get_application_model

from mcp_app.models import Endpoint
from mcp_app.services.audit import ADMIN_TEST_HTTP_METHOD
from tests.audit.factories import make_call

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(admin_user: User) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


def test_call_detail_names_the_user_and_the_oauth_client(
    staff_client: Client, endpoint: Endpoint
) -> None:
    ada = User.objects.create_user("ada")
    app = get_application_model().objects.create(
        name="Claude Desktop", client_type="public", authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/cb",
    )  # fmt: skip
    record = make_call(endpoint, principal=ada, client_id=app.client_id)

    page = staff_client.get(reverse("mcp_app:audit_detail", args=[record.pk])).content.decode()

    assert "<dt>User</dt>" in page and ">ada <" in page
    assert "Claude Desktop" in page


def test_try_it_calls_are_marked_and_times_carry_their_zone(
    staff_client: Client, endpoint: Endpoint
) -> None:
    make_call(endpoint, http_method=ADMIN_TEST_HTTP_METHOD, target="tried")
    make_call(endpoint, target="called")

    page = staff_client.get(reverse("mcp_app:audit_list")).content.decode()
    feed = staff_client.get(reverse("mcp_app:audit_feed")).json()["rows"]

    assert page.count('class="tag try-it"') == 1
    assert 'tried <span class="tag try-it"' in page
    assert "Time <span" in page and "(UTC)" in page
    assert [(row["target"], row["try_it"]) for row in feed] == [
        ("called", False),
        ("tried", True),
    ]
    assert all(row["created_at"].endswith(" UTC") for row in feed)
