"""Teams in /audit/ (issue #27): a member of team alpha sees only the calls of alpha's
endpoints in the list, the live tail, the detail page (another team's call: 404), the
exports, the stats and the overview; a superuser and an operator of every team see all."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from mcp_app.models import CallLog
from mcp_app.services.calllog.writer import call_log_flush
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


@pytest.mark.django_db(transaction=True)
def test_a_member_sees_their_teams_try_it_runs_and_not_another_teams(world: World) -> None:
    """A try-it run has no endpoint: it is seen by its tool's team (and an operator), in
    the list, the detail page, the exports and the API's call log, not by another team."""
    for team in (world.alpha, world.beta):
        answer = signed_in(team.member).post(
            reverse("admin:mcp_app_tool_try", args=[team.tool.pk]), {"arguments": "{}"}
        )
        assert answer.status_code == 200
    assert call_log_flush(timeout=5.0)
    tries = {row.target: row for row in CallLog.objects.filter(http_method="ADMIN")}
    assert set(tries) == {"alpha-tool", "beta-tool"}
    client = signed_in(world.alpha.member)

    listed = client.get(reverse("mcp_app:audit_list")).context["rows"]
    exported = client.get(reverse("mcp_app:audit_export_jsonl"))
    everything = signed_in(world.operator).get(reverse("mcp_app:audit_list")).context["rows"]

    assert sorted(row.target for row in listed) == ["alpha-tool", "alpha-tool"]
    body = b"".join(exported.streaming_content).decode()
    assert "alpha-tool" in body and "beta-tool" not in body
    detail = reverse("mcp_app:audit_detail", args=[tries["alpha-tool"].pk])
    assert client.get(detail).status_code == 200
    detail = reverse("mcp_app:audit_detail", args=[tries["beta-tool"].pk])
    assert client.get(detail).status_code == 404
    assert {"alpha-tool", "beta-tool", "nowhere-tool"} <= {row.target for row in everything}
    api = APIClient()
    api.force_authenticate(world.alpha.member)
    api_rows = api.get("/api/v1/call-log/").json()["results"]
    assert sorted(row["target"] for row in api_rows) == ["alpha-tool", "alpha-tool"]
    assert api.get(f"/api/v1/call-log/{tries['alpha-tool'].pk}/").status_code == 200
    assert api.get(f"/api/v1/call-log/{tries['beta-tool'].pk}/").status_code == 404
