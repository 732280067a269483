"""Teams (issue #27): the selector every interface reads through, and the write path's
refusals, so no interface can reach another team's rows.

A member of team alpha sees only alpha's rows, cannot change, delete, revert or attach beta's
(nor site-wide rows), cannot put a row in beta, and a row they create without a team is
alpha's; a superuser and an operator holding ``manage_every_team`` see and change all.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from mcp_app.models import (
    Credential,
    Endpoint,
    Policy,
    Prompt,
    PromptArgument,
    RateLimit,
    Resource,
    ResourceTemplate,
    Tool,
    Upstream,
)
from mcp_app.services import teams
from mcp_app.services.catalog_writes import (
    catalog_row_attach,
    catalog_row_enable,
    catalog_row_save,
    catalog_rows_publish,
    prompt_part_save,
    tool_create,
    tool_update,
)
from mcp_app.services.policies.writes import policy_delete, policy_save
from mcp_app.services.row_writes import row_delete, row_revert, setting_row_save
from tests.support.teams import World, make_member, two_teams

MODELS = [
    Endpoint,
    Tool,
    Resource,
    ResourceTemplate,
    Prompt,
    Credential,
    Upstream,
    RateLimit,
    Policy,
]


@pytest.fixture
def world(db: None) -> World:
    return two_teams()


def _names(model: type, user: User) -> set[str]:
    return {str(row.pk) for row in teams.visible(model._default_manager.all(), user)}


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model.__name__)
def test_a_member_sees_only_the_rows_of_their_team(world: World, model: type) -> None:
    alpha = {str(row.pk) for row in world.alpha.rows() if isinstance(row, model)}

    assert _names(model, world.alpha.member) == alpha


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model.__name__)
def test_a_superuser_and_an_operator_of_every_team_see_every_row(world: World, model: type) -> None:
    every = {str(pk) for pk in model._default_manager.values_list("pk", flat=True)}

    assert _names(model, world.superuser) == every
    assert _names(model, world.operator) == every
    assert len(every) >= 2


def test_nobody_acting_sees_every_row_and_an_anonymous_user_none(world: World) -> None:
    from django.contrib.auth.models import AnonymousUser

    assert teams.visible(Tool.objects.all(), None).count() == 3
    assert teams.visible(Tool.objects.all(), AnonymousUser()).count() == 0


def test_a_member_cannot_change_another_teams_tool(world: World) -> None:
    tool = Tool.objects.get(pk=world.beta.tool.pk)

    with pytest.raises(PermissionDenied):
        tool_update(tool=tool, data={"description": "taken over"}, actor=world.alpha.member)

    assert Tool.objects.get(pk=tool.pk).description == "The beta team's tool."


def test_a_member_cannot_move_their_row_to_another_team(world: World) -> None:
    tool = Tool.objects.get(pk=world.alpha.tool.pk)
    tool.team = world.beta.group

    with pytest.raises(ValidationError) as caught:
        catalog_row_save(tool, actor=world.alpha.member, source=None)

    assert "team" in caught.value.message_dict
    assert Tool.objects.get(pk=tool.pk).team_id == world.alpha.group.pk


def test_a_member_cannot_take_another_teams_row_into_theirs(world: World) -> None:
    credential = Credential.objects.get(pk=world.beta.credential.pk)
    credential.team = world.alpha.group

    with pytest.raises(PermissionDenied):
        setting_row_save(credential, actor=world.alpha.member, source=None)

    assert Credential.objects.get(pk=credential.pk).team_id == world.beta.group.pk


def test_a_member_cannot_create_a_row_in_another_team(world: World) -> None:
    with pytest.raises(ValidationError) as caught:
        tool_create(
            name="intruder",
            kind="python",
            config={"function": "current_time"},
            team=world.beta.group,
            actor=world.alpha.member,
        )

    assert "team" in caught.value.message_dict
    assert not Tool.objects.filter(name="intruder").exists()


def test_a_row_a_member_of_one_team_creates_is_their_teams(world: World) -> None:
    tool = tool_create(
        name="mine", kind="python", config={"function": "current_time"}, actor=world.alpha.member
    )

    assert tool.team_id == world.alpha.group.pk


def test_a_member_of_two_teams_must_choose_one(world: World) -> None:
    both = make_member("both", world.alpha.group, world.beta.group)

    with pytest.raises(ValidationError) as caught:
        tool_create(name="which", kind="python", config={"function": "current_time"}, actor=both)

    assert caught.value.message_dict["team"] == ["Choose one of your teams."]
    assert not Tool.objects.filter(name="which").exists()


def test_a_member_cannot_publish_their_tool_on_another_teams_endpoint(world: World) -> None:
    tool = world.alpha.tool

    with pytest.raises(PermissionDenied):
        catalog_row_attach(
            tool, endpoint_ids=[world.beta.endpoint.pk], actor=world.alpha.member, source=None
        )
    with pytest.raises(PermissionDenied):
        tool_update(
            tool=tool,
            data={},
            endpoints=[world.alpha.endpoint, world.beta.endpoint],
            actor=world.alpha.member,
        )
    with pytest.raises(PermissionDenied):
        catalog_rows_publish(
            [world.beta.tool], endpoints=[world.alpha.endpoint], actor=world.alpha.member,
            source=None,
        )  # fmt: skip

    assert list(world.beta.endpoint.tools.all()) == [world.beta.tool]
    assert list(world.alpha.endpoint.tools.all()) == [world.alpha.tool]


def test_a_members_tool_cannot_name_another_teams_credential(world: World) -> None:
    with pytest.raises(ValidationError) as caught:
        tool_create(
            name="borrower",
            kind="http",
            description="Borrows a secret.",
            config={
                "method": "GET",
                "url": "https://api.example.com/x",
                "credential": world.beta.credential.name,
            },
            actor=world.alpha.member,
        )

    assert caught.value.message_dict == {
        "config.credential": ["No credential named 'beta-credential' here."]
    }


def test_a_member_cannot_point_an_upstream_at_another_teams_credential(world: World) -> None:
    upstream = Upstream.objects.get(pk=world.alpha.upstream.pk)
    upstream.credential = world.beta.credential

    with pytest.raises(ValidationError) as caught:
        setting_row_save(upstream, actor=world.alpha.member, source=None)

    assert list(caught.value.message_dict) == ["credential"]
    assert Upstream.objects.get(pk=upstream.pk).credential_id is None


def test_a_members_edit_keeps_the_rows_on_their_endpoint_they_cannot_see(world: World) -> None:
    endpoint = world.alpha.endpoint
    endpoint.tools.add(world.site_tool)  # a superuser published a site-wide tool there
    mine = tool_create(
        name="mine", kind="python", config={"function": "current_time"}, actor=world.alpha.member
    )

    catalog_row_save(
        endpoint,
        actor=world.alpha.member,
        source=None,
        relations={"tools": [world.alpha.tool, mine]},
    )

    assert set(endpoint.tools.all()) == {world.alpha.tool, mine, world.site_tool}


@pytest.mark.parametrize(
    "name",
    ["endpoint", "tool", "resource", "template", "prompt", "credential", "upstream", "rate_limit"],
)
def test_a_member_cannot_delete_another_teams_row(world: World, name: str) -> None:
    row = getattr(world.beta, name)

    with pytest.raises(PermissionDenied):
        row_delete(row, actor=world.alpha.member, source=None)

    assert type(row)._default_manager.filter(pk=row.pk).exists()


def test_a_member_cannot_change_or_delete_another_teams_policy(world: World) -> None:
    policy = Policy.objects.get(pk=world.beta.policy.pk)
    policy.mode = Policy.Mode.OFF
    with pytest.raises(PermissionDenied):
        policy_save(policy, actor=world.alpha.member, source=None)
    with pytest.raises(PermissionDenied):
        policy_delete(policy, actor=world.alpha.member, source=None)

    assert Policy.objects.get(pk=policy.pk).mode == Policy.Mode.ENFORCE


def test_a_member_cannot_hang_a_limit_on_another_teams_endpoint(world: World) -> None:
    limit = RateLimit(endpoint=world.beta.endpoint, rate=1)

    with pytest.raises(ValidationError) as caught:
        setting_row_save(limit, actor=world.alpha.member, source=None)

    assert list(caught.value.message_dict) == ["endpoint"]
    assert RateLimit.objects.filter(endpoint=world.beta.endpoint).count() == 1


def test_a_member_cannot_switch_or_revert_another_teams_tool(world: World) -> None:
    tool = world.beta.tool
    [version] = tool.history.all()[:1]

    with pytest.raises(PermissionDenied):
        catalog_row_enable(tool, enabled=False, actor=world.alpha.member, source=None)
    with pytest.raises(PermissionDenied):
        row_revert(tool, history_id=version.history_id, actor=world.alpha.member, source=None)

    assert Tool.objects.get(pk=tool.pk).enabled


def test_a_member_cannot_add_an_argument_to_another_teams_prompt(world: World) -> None:
    with pytest.raises(PermissionDenied):
        prompt_part_save(
            PromptArgument(prompt=world.beta.prompt, name="sneaky"),
            actor=world.alpha.member,
            source=None,
        )

    assert not world.beta.prompt.arguments.exists()


def test_a_member_works_on_their_own_rows(world: World) -> None:
    tool = Tool.objects.get(pk=world.alpha.tool.pk)
    tool_update(tool=tool, data={"description": "Ours."}, actor=world.alpha.member)
    catalog_row_enable(tool, enabled=False, actor=world.alpha.member, source=None)
    limit = RateLimit(endpoint=world.alpha.endpoint, rate=5)
    setting_row_save(limit, actor=world.alpha.member, source=None)
    row_delete(world.alpha.tool, actor=world.alpha.member, source=None)
    row_delete(world.alpha.credential, actor=world.alpha.member, source=None)

    assert (tool.description, tool.enabled) == ("Ours.", False)
    assert not Credential.objects.filter(pk=world.alpha.credential.pk).exists()
    assert not Tool.objects.filter(pk=world.alpha.tool.pk).exists()


def test_an_operator_of_every_team_changes_any_teams_row(world: World) -> None:
    tool = Tool.objects.get(pk=world.beta.tool.pk)
    tool.team = world.alpha.group

    catalog_row_save(tool, actor=world.operator, source=None)

    assert Tool.objects.get(pk=tool.pk).team_id == world.alpha.group.pk


@pytest.mark.django_db(transaction=True)
def test_the_upgrade_keeps_every_existing_operator_seeing_every_row() -> None:
    """Migration 0032: a user holding any mcp_app permission before teams is granted
    manage_every_team; a user holding none is not."""
    before, after = ("mcp_app", "0031_mcp_apps_views"), ("mcp_app", "0032_teams")
    operator = User.objects.create_user("operator", is_staff=True)
    operator.user_permissions.add(Permission.objects.get(codename="view_tool"))
    bystander = User.objects.create_user("bystander", is_staff=True)
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    try:
        executor.migrate([before])
        executor = MigrationExecutor(connection)
        executor.migrate([after])
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(latest)

    operator = User.objects.get(pk=operator.pk)
    bystander = User.objects.get(pk=bystander.pk)
    assert teams.scope_of(operator) is None
    assert teams.scope_of(bystander) == frozenset()
