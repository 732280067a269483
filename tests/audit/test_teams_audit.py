"""Teams in /audit/ (issue #27): a member of team alpha sees only the calls of alpha's
endpoints in the list, the live tail, the detail page (another team's call: 404), the
exports, the stats and the overview; a superuser and an operator of every team see all."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from mcp_app.models import CallLog
from tests.audit.factories import make_call
from tests.support.teams import World, two_teams

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None) -> World:
    world = two_teams()
    for team in (world.alpha, world.beta):
        make_call(team.endpoint, target=f"{team.group.name}-tool")
    make_call(None, endpoint_slug="nowhere", target="nowhere-tool")
    return world


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _call(team: str) -> CallLog:
    return CallLog.objects.get(target=f"{team}-tool")


def test_a_members_list_and_tail_hold_only_their_endpoints_calls(world: World) -> None:
    client = signed_in(world.alpha.member)

    listed = client.get(reverse("mcp_app:audit_list"))
    tail = client.get(reverse("mcp_app:audit_feed"), {"after": 0}).json()
    other = client.get(reverse("mcp_app:audit_list"), {"endpoint": "beta-endpoint"})

    assert [row.target for row in listed.context["rows"]] == ["alpha-tool"]
    assert [row["target"] for row in tail["rows"]] == ["alpha-tool"]
    assert [row.target for row in other.context["rows"]] == ["alpha-tool"]  # the filter is refused
    assert "endpoint" in other.context["form"].errors


def test_another_teams_call_is_not_found(world: World) -> None:
    client = signed_in(world.alpha.member)

    assert client.get(reverse("mcp_app:audit_detail", args=[_call("beta").pk])).status_code == 404
    assert (
        client.get(reverse("mcp_app:audit_detail", args=[_call("nowhere").pk])).status_code == 404
    )
    assert client.get(reverse("mcp_app:audit_detail", args=[_call("alpha").pk])).status_code == 200


@pytest.mark.parametrize("name", ["mcp_app:audit_export_csv", "mcp_app:audit_export_jsonl"])
def test_a_members_export_holds_only_their_endpoints_calls(world: World, name: str) -> None:
    body = b"".join(signed_in(world.alpha.member).get(reverse(name)).streaming_content).decode()

    assert "alpha-tool" in body
    assert "beta-tool" not in body
    assert "nowhere-tool" not in body


def test_a_members_stats_and_overview_count_only_their_endpoints_calls(world: World) -> None:
    client = signed_in(world.alpha.member)

    stats = client.get(reverse("mcp_app:audit_stats")).context["stats"]
    overview = client.get(reverse("mcp_app:audit_overview")).content.decode()

    assert [row.name for row in stats.per_tool] == ["alpha-tool"]
    assert [row.name for row in stats.per_endpoint] == ["alpha-endpoint"]
    assert "alpha-tool" in overview
    assert "beta-tool" not in overview


@pytest.mark.parametrize("who", ["superuser", "operator"])
def test_a_superuser_and_an_operator_see_every_call(world: World, who: str) -> None:
    client = signed_in(getattr(world, who))

    listed = client.get(reverse("mcp_app:audit_list"))

    assert {row.target for row in listed.context["rows"]} == {
        "alpha-tool",
        "beta-tool",
        "nowhere-tool",
    }
    assert client.get(reverse("mcp_app:audit_detail", args=[_call("beta").pk])).status_code == 200
