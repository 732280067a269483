"""The overview's live figures and filters: open streams, sessions per client program, and
narrowing by user, OAuth client and clientInfo name/version (the list takes the same filters)."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from mcp_app.models import Endpoint, Session
from tests.audit.factories import make_call

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(admin_user: User) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


@pytest.fixture
def two_clients(endpoint: Endpoint) -> None:
    """Two client programs' sessions and calls; ada works through the Inspector only."""
    ada = User.objects.create_user("ada")
    for sid, name, version, user in [
        ("s-insp-1", "Inspector", "0.9", ada),
        ("s-insp-2", "Inspector", "0.9", None),
        ("s-code-1", "claude-code", "2.0", None),
    ]:
        Session.objects.create(
            id=sid, endpoint=endpoint, protocol_version="2025-11-25",
            client_info={"name": name, "version": version}, user=user,
        )  # fmt: skip
    for _ in range(3):
        make_call(endpoint, target="inspect", session_id="s-insp-1", era="legacy", principal=ada)
    make_call(endpoint, target="inspect", session_id="s-insp-2", era="legacy")
    for _ in range(2):
        make_call(endpoint, target="code", session_id="s-code-1", era="legacy")
    make_call(endpoint, target="modern")  # 2026-07-28: no session, no recorded clientInfo


def test_the_overview_counts_sessions_per_client_program_and_links_their_calls(
    staff_client: Client, two_clients: None
) -> None:
    response = staff_client.get(reverse("mcp_app:audit_overview"))
    overview = response.context["overview"]
    page = response.content.decode()

    apps = [(a.name, a.version, a.sessions, a.active) for a in overview.client_apps]
    assert apps == [("Inspector", "0.9", 2, 2), ("claude-code", "2.0", 1, 1)]
    assert overview.open_streams.count == 0 and not overview.open_streams.all_processes
    assert re.search(r'id="open-streams">0<', page)
    link = re.search(r'<a href="([^"]+)">Inspector</a>', page)
    assert link is not None
    listed = staff_client.get(html.unescape(link.group(1))).context["rows"]
    assert sorted({row.session_id for row in listed}) == ["s-insp-1", "s-insp-2"]


@pytest.mark.parametrize(
    ("params", "busiest", "apps"),
    [
        ({"client_name": "claude-code"}, [("code", 2)], ["claude-code"]),
        ({"client_name": "Inspector", "client_version": "0.9"}, [("inspect", 4)], ["Inspector"]),
        ({"client_version": "1.0"}, [], []),
        ({"user": "ada"}, [("inspect", 3)], ["Inspector"]),
    ],
)
def test_the_overview_narrows_to_a_user_or_client_program(
    staff_client: Client,
    two_clients: None,
    params: dict[str, str],
    busiest: list[tuple[str, int]],
    apps: list[str],
) -> None:
    response = staff_client.get(reverse("mcp_app:audit_overview"), params)
    overview = response.context["overview"]

    assert [(row.name, row.calls) for row in overview.busiest] == busiest
    assert [app.name for app in overview.client_apps] == apps
    assert "open streams and background calls are the whole fleet" in response.content.decode()
    # Every tool link keeps the filter, so the list shows the same calls.
    for row, link in response.context["busiest"]:
        listed = staff_client.get(link).context["rows"]
        assert len(listed) == row.calls


def test_the_call_list_filters_by_client_name_and_version(
    staff_client: Client, two_clients: None
) -> None:
    url = reverse("mcp_app:audit_list")
    by_name = staff_client.get(url, {"client_name": "claude-code"}).context["rows"]
    by_version = staff_client.get(url, {"client_version": "0.9"}).context["rows"]

    assert [row.target for row in by_name] == ["code", "code"]
    assert {row.target for row in by_version} == {"inspect"} and len(by_version) == 4
