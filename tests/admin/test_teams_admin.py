"""Teams in the admin (issue #27): a member of team alpha lists and opens only alpha's rows;
beta's change, delete, history, compare, version and try-it pages answer as for a missing
row, bulk actions leave them alone, and forms offer only alpha's team and rows. A superuser
and an operator of every team see every row."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from mcp_app.models import Tool
from mcp_app.services.catalog_writes import tool_create
from tests.admin.conftest import tool_payload
from tests.support.teams import World, make_member, two_teams

pytestmark = pytest.mark.django_db

# Admin model name of each row kind, and the team row attribute.
MODELS = {
    "endpoint": "endpoint",
    "tool": "tool",
    "resource": "resource",
    "resourcetemplate": "template",
    "prompt": "prompt",
    "credential": "credential",
    "upstream": "upstream",
    "ratelimit": "rate_limit",
    "policy": "policy",
}
MISSING = 999_999


@pytest.fixture
def world(db: None) -> World:
    return two_teams()


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _listed(response: Any) -> set[int]:
    assert response.status_code == 200
    return {row.pk for row in response.context["cl"].result_list}


@pytest.mark.parametrize("model", MODELS)
def test_a_members_lists_hold_only_their_teams_rows(world: World, model: str) -> None:
    client = signed_in(world.alpha.member)

    listed = _listed(client.get(reverse(f"admin:mcp_app_{model}_changelist")))

    assert listed == {getattr(world.alpha, MODELS[model]).pk}


@pytest.mark.parametrize("model", MODELS)
def test_another_teams_row_answers_as_a_missing_one_on_every_page(world: World, model: str) -> None:
    client = signed_in(world.alpha.member)
    row = getattr(world.beta, MODELS[model])

    def pages(pk: int) -> list[tuple[int, str]]:
        answers = [
            client.get(reverse(f"admin:mcp_app_{model}_change", args=[pk])),
            client.get(reverse(f"admin:mcp_app_{model}_delete", args=[pk])),
            client.post(reverse(f"admin:mcp_app_{model}_delete", args=[pk]), {"post": "yes"}),
        ]
        return [(answer.status_code, answer.get("Location", "")) for answer in answers]

    assert pages(row.pk) == pages(MISSING)
    assert client.get(reverse(f"admin:mcp_app_{model}_history", args=[row.pk])).status_code == 404
    compare = reverse(f"admin:mcp_app_{model}_history_compare", args=[row.pk])
    assert client.get(compare, {"a": 1, "b": 2}).status_code == 404
    version = row.history.order_by("history_id").first()
    revert = reverse(f"admin:mcp_app_{model}_simple_history", args=[row.pk, version.history_id])
    assert client.get(revert).status_code == 404
    assert client.post(revert, {}).status_code == 404
    assert type(row)._default_manager.filter(pk=row.pk).exists()


def test_a_bulk_action_leaves_another_teams_rows_alone(world: World) -> None:
    """A selection naming another team's row is stale, as one naming a missing row: nothing
    changes."""
    client = signed_in(world.alpha.member)
    changelist = reverse("admin:mcp_app_tool_changelist")

    def disable(*pks: int) -> list[str]:
        answer = client.post(
            changelist, {"action": "disable_selected", "_selected_action": pks}, follow=True
        )
        return [str(message) for message in answer.context["messages"]]

    assert disable(world.alpha.tool.pk, world.beta.tool.pk) == disable(world.alpha.tool.pk, MISSING)
    assert Tool.objects.get(pk=world.alpha.tool.pk).enabled
    assert Tool.objects.get(pk=world.beta.tool.pk).enabled
    disable(world.alpha.tool.pk)
    assert not Tool.objects.get(pk=world.alpha.tool.pk).enabled


def test_a_member_cannot_try_another_teams_tool(world: World) -> None:
    client = signed_in(world.alpha.member)

    beta = client.get(reverse("admin:mcp_app_tool_try", args=[world.beta.tool.pk]))
    alpha = client.get(reverse("admin:mcp_app_tool_try", args=[world.alpha.tool.pk]))

    assert (beta.status_code, alpha.status_code) == (404, 200)


def test_a_members_form_offers_only_their_team_and_rows(world: World) -> None:
    client = signed_in(world.alpha.member)

    page = client.get(reverse("admin:mcp_app_tool_add"))

    form = page.context["adminform"].form
    assert list(form.fields["team"].queryset) == [world.alpha.group]
    assert list(form.fields["endpoints"].queryset) == [world.alpha.endpoint]
    assert "beta" not in page.content.decode()


def test_a_member_cannot_create_a_row_in_another_team(world: World) -> None:
    client = signed_in(world.alpha.member)
    add = reverse("admin:mcp_app_tool_add")

    refused = client.post(add, tool_payload(name="intruder", team=str(world.beta.group.pk)))
    created = client.post(add, tool_payload(name="ours", team=str(world.alpha.group.pk)))

    assert refused.status_code == 200
    assert "team" in refused.context["adminform"].form.errors
    assert not Tool.objects.filter(name="intruder").exists()
    assert created.status_code == 302
    assert Tool.objects.get(name="ours").team_id == world.alpha.group.pk


def test_a_member_cannot_publish_their_tool_on_another_teams_endpoint(world: World) -> None:
    client = signed_in(world.alpha.member)

    answer = client.post(
        reverse("admin:mcp_app_tool_add"),
        tool_payload(
            name="spread",
            team=str(world.alpha.group.pk),
            endpoints=[str(world.beta.endpoint.pk)],
        ),
    )

    assert "endpoints" in answer.context["adminform"].form.errors
    assert not Tool.objects.filter(name="spread").exists()


@pytest.mark.parametrize("who", ["superuser", "operator"])
def test_a_superuser_and_an_operator_list_every_row(world: World, who: str) -> None:
    client = signed_in(getattr(world, who))

    listed = _listed(client.get(reverse("admin:mcp_app_tool_changelist")))

    assert listed == set(Tool.objects.values_list("pk", flat=True))
    assert len(listed) == 3


def test_a_members_list_costs_a_bounded_number_of_queries(world: World) -> None:
    client = signed_in(world.alpha.member)

    with CaptureQueriesContext(connection) as queries:
        assert client.get(reverse("admin:mcp_app_tool_changelist")).status_code == 200

    assert len(queries) <= 20


def test_a_members_recent_changes_name_only_their_teams_rows(world: World) -> None:
    client = signed_in(world.alpha.member)

    page = client.get(reverse("admin:mcp_app_recent_changes")).content.decode()
    everything = signed_in(world.operator).get(reverse("admin:mcp_app_recent_changes"))

    assert "alpha-tool" in page
    assert "beta-" not in page
    assert "beta-tool" in everything.content.decode()


@pytest.mark.parametrize("model", ["tool", "policy", "resourcetemplate"])
def test_a_members_list_filters_name_only_their_teams_rows(world: World, model: str) -> None:
    page = signed_in(world.alpha.member).get(reverse(f"admin:mcp_app_{model}_changelist"))

    assert page.status_code == 200
    assert "beta-" not in page.content.decode()
    assert "site-tool" not in page.content.decode()
    assert "site-endpoint" not in page.content.decode()


# Admin model name of each row kind with a team of its own.
TEAM_ROWS = [model for model in MODELS if model not in ("ratelimit", "policy")]


@pytest.mark.parametrize("model", TEAM_ROWS)
def test_a_user_of_several_teams_sees_a_team_column_and_filter(world: World, model: str) -> None:
    """An operator and a member of both teams see which team each row is in, and filter by
    it; a member of one team (the same team on every row) sees neither."""
    both = make_member("both", world.alpha.group, world.beta.group)
    changelist = reverse(f"admin:mcp_app_{model}_changelist")

    def team_column(user: User) -> tuple[bool, list[str]]:
        page = signed_in(user).get(changelist)
        assert page.status_code == 200
        filters = [spec.title for spec in page.context["cl"].filter_specs]
        return "team" in page.context["cl"].list_display, filters

    for user in (world.operator, both):
        shown, filters = team_column(user)
        assert shown and "team" in filters
    shown, filters = team_column(world.alpha.member)
    assert not shown and "team" not in filters
    filtered = signed_in(both).get(changelist, {"team__id__exact": world.beta.group.pk})
    assert _listed(filtered) == {getattr(world.beta, MODELS[model]).pk}
    # Each row names its team once, and the filter offers only the user's teams.
    page = signed_in(both).get(changelist).content.decode()
    assert ">alpha<" in page and ">beta<" in page


def test_a_team_column_costs_no_query_per_row(world: World) -> None:
    def queries(count: int) -> int:
        for n in range(count):
            tool_create(name=f"extra-{count}-{n}", kind="python",
                        config={"function": "current_time"}, description="x",
                        team=world.beta.group)  # fmt: skip
        with CaptureQueriesContext(connection) as captured:
            signed_in(world.operator).get(reverse("admin:mcp_app_tool_changelist"))
        return len(captured)

    assert queries(1) == queries(5)


def test_a_members_allowed_groups_offer_only_their_teams(world: World) -> None:
    """Who may call a tool: a member picks among their own teams, an operator among all."""
    Group.objects.create(name="outsiders")
    add = reverse("admin:mcp_app_tool_add")

    member = signed_in(world.alpha.member).get(add).context["adminform"].form
    operator = signed_in(world.operator).get(add).context["adminform"].form

    assert [g.name for g in member.fields["allowed_groups"].queryset] == ["alpha"]
    assert [g.name for g in operator.fields["allowed_groups"].queryset] == [
        "alpha", "beta", "outsiders"
    ]  # fmt: skip


def test_a_member_cannot_allow_another_group_and_keeps_the_ones_set_for_them(
    world: World,
) -> None:
    """A member naming another group's id gets a form error and nothing changes; their edit
    keeps a group an operator set that they cannot see."""
    outsiders = Group.objects.create(name="outsiders")
    tool = world.alpha.tool
    tool.allowed_groups.set([outsiders])
    client = signed_in(world.alpha.member)
    change = reverse("admin:mcp_app_tool_change", args=[tool.pk])
    payload = tool_payload(name=tool.name, team=str(world.alpha.group.pk),
                           endpoints=[str(world.alpha.endpoint.pk)])  # fmt: skip

    refused = client.post(change, {**payload, "allowed_groups": [str(world.beta.group.pk)]})
    saved = client.post(change, {**payload, "allowed_groups": [str(world.alpha.group.pk)]})

    assert "allowed_groups" in refused.context["adminform"].form.errors
    assert saved.status_code == 302
    assert {g.name for g in tool.allowed_groups.all()} == {"alpha", "outsiders"}
