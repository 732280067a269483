"""The overview's live figures and filters: open streams, calls per client program in every
era, and narrowing by user, OAuth client and client name/version (the list takes the same
filters)."""

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
    inspector = {"client_name": "Inspector", "client_version": "0.9",
                 "client_info": {"name": "Inspector", "version": "0.9"}}  # fmt: skip
    code = {"client_name": "claude-code", "client_version": "2.0",
            "client_info": {"name": "claude-code", "version": "2.0"}}  # fmt: skip
    for _ in range(3):
        make_call(
            endpoint, target="inspect", session_id="s-insp-1", era="legacy", principal=ada,
            **inspector,
        )  # fmt: skip
    make_call(endpoint, target="inspect", session_id="s-insp-2", era="legacy", **inspector)
    for _ in range(2):
        make_call(endpoint, target="code", session_id="s-code-1", era="legacy", **code)
    # 2026-07-28: no session; the client declared itself in the request's _meta.
    make_call(endpoint, target="code", **code)
    # No clientInfo declared: named by the User-Agent.
    make_call(endpoint, target="modern", client_name="curl", client_version="8.5.0")


def test_the_overview_counts_calls_per_client_program_in_every_era_and_links_them(
    staff_client: Client, two_clients: None
) -> None:
    response = staff_client.get(reverse("mcp_app:audit_overview"))
    overview = response.context["overview"]
    page = response.content.decode()

    programs = [(p.name, p.version, p.calls, p.from_user_agent) for p in overview.client_programs]
    assert programs == [
        ("Inspector", "0.9", 4, False),
        ("claude-code", "2.0", 3, False),
        ("curl", "8.5.0", 1, True),
    ]
    assert overview.active_sessions == 3
    assert overview.open_streams.count == 0 and not overview.open_streams.all_processes
    assert re.search(r'id="open-streams">0<', page)
    assert "legacy sessions only" not in page and "does not keep" not in page
    link = re.search(r'<a href="([^"]+)">claude-code</a>', page)
    assert link is not None
    listed = staff_client.get(html.unescape(link.group(1))).context["rows"]
    # The 2026-07-28 call is among them: the client is the call's, not its session's.
    assert sorted(row.session_id for row in listed) == ["", "s-code-1", "s-code-1"]


@pytest.mark.parametrize(
    ("params", "busiest", "apps"),
    [
        ({"client_name": "claude-code"}, [("code", 3)], ["claude-code"]),
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
    assert [program.name for program in overview.client_programs] == apps
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

    assert [row.target for row in by_name] == ["code", "code", "code"]
    assert {row.target for row in by_version} == {"inspect"} and len(by_version) == 4
