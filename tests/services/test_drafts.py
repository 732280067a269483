"""Drafts (services/drafts.py) and the review rule (services/review.py), through the service.

A draft is saved by the rules of a live save and changes nothing live; its diff shows each
field beside the live value; a publish goes through catalog import, merged three ways with
what changed live since; an endpoint that requires review takes only drafts a second user
approved, and refuses every direct edit by a user.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import PermissionDenied, ValidationError

from mcp_app.models import Draft, Endpoint, Tool
from mcp_app.services import catalog_writes
from mcp_app.services.drafts import (
    DraftConflict,
    DraftError,
    draft_approve,
    draft_check,
    draft_create,
    draft_diff,
    draft_discard,
    draft_update,
    drafts_publish,
    live_entry,
)
from tests.support.teams import World, make_member, two_teams


@pytest.fixture
def world(db: None) -> World:
    return two_teams()


def tool_draft(world: World, **changes: Any) -> dict[str, Any]:
    entry = live_entry("tools", "alpha-tool", user=world.alpha.member)
    assert entry is not None
    entry.update(changes)
    return {"format": "mcphost-catalog/1", "tools": [entry]}


def test_a_draft_changes_nothing_live_until_published(world: World) -> None:
    member = world.alpha.member
    draft = draft_create(
        title="Reword", document=tool_draft(world, description="Reworded."), actor=member
    )
    world.alpha.tool.refresh_from_db()
    assert world.alpha.tool.description == "The alpha team's tool."
    assert draft.team == world.alpha.group
    assert list(draft.endpoints.values_list("slug", flat=True)) == ["alpha-endpoint"]
    (diff,) = draft_diff(draft, user=member)
    assert (diff.label, diff.action) == ("tool alpha-tool", "update")
    assert [(f.name, f.live, f.draft) for f in diff.fields] == [
        ("description", "The alpha team's tool.", "Reworded.")
    ]
    assert [str(change) for change in draft_check(draft, actor=member).changes] == [
        "update tools alpha-tool (description)"
    ]

    report = drafts_publish([draft], actor=member)

    assert [str(change) for change in report.changes] == ["update tools alpha-tool (description)"]
    world.alpha.tool.refresh_from_db()
    assert world.alpha.tool.description == "Reworded."
    assert draft.status == Draft.Status.PUBLISHED and draft.published_by == member
    record = world.alpha.tool.history.first()  # type: ignore[attr-defined]
    assert record.history_change_reason == f"draft #{draft.pk}"
    assert record.history_user == member
    with pytest.raises(DraftError, match="published"):
        drafts_publish([draft], actor=member)


def test_an_invalid_draft_is_refused_by_the_rules_of_a_live_save(world: World) -> None:
    bad = tool_draft(world, input_schema={"type": "object", "properties": {"x": {"type": 7}}})
    with pytest.raises(DraftError, match=r"tools\[0\]\.input_schema"):
        draft_create(title="Bad", document=bad, actor=world.alpha.member)
    with pytest.raises(DraftError, match="upstreams: a draft holds"):
        draft_create(
            title="Bad", document={"format": "mcphost-catalog/1", "upstreams": []}, actor=None
        )
    with pytest.raises(DraftError, match="changes nothing"):
        draft_create(title="Empty", document={"format": "mcphost-catalog/1"}, actor=None)
    with pytest.raises(DraftError, match="format"):
        draft_create(title="Bad", document={"tools": []}, actor=None)
    with pytest.raises(DraftError, match="at most 200 characters"):
        draft_create(title="x" * 201, document=tool_draft(world, title="T"), actor=None)
    assert not Draft.objects.exists()


def test_a_team_member_cannot_draft_another_teams_rows(world: World) -> None:
    entry = live_entry("tools", "beta-tool", user=None)
    assert entry is not None
    assert live_entry("tools", "beta-tool", user=world.alpha.member) is None
    document = {"format": "mcphost-catalog/1", "tools": [{**entry, "description": "Mine."}]}
    with pytest.raises((DraftError, PermissionDenied)):
        draft_create(title="Steal", document=document, actor=world.alpha.member)
    assert not Draft.objects.exists()
    draft = draft_create(title="Beta's", document=document, actor=world.beta.member)
    with pytest.raises(PermissionDenied):
        drafts_publish([draft], actor=world.alpha.member)
    with pytest.raises(PermissionDenied):
        draft_discard(draft, actor=world.alpha.member)


def test_publish_keeps_live_edits_made_since_and_stops_on_a_conflict(world: World) -> None:
    member = world.alpha.member
    draft = draft_create(
        title="Reword", document=tool_draft(world, description="Drafted."), actor=member
    )
    tool = world.alpha.tool
    tool.title = "Edited live"
    catalog_writes.catalog_row_save(tool, actor=member, source="admin")
    (diff,) = draft_diff(draft, user=member)
    assert diff.changed_live == ("title",) and not diff.conflicts

    drafts_publish([draft], actor=member)

    tool.refresh_from_db()
    assert (tool.title, tool.description) == ("Edited live", "Drafted.")

    second = draft_create(
        title="Again", document=tool_draft(world, description="Second."), actor=member
    )
    tool.description = "Changed live meanwhile."
    catalog_writes.catalog_row_save(tool, actor=member, source="admin")
    (diff,) = draft_diff(second, user=member)
    assert diff.conflicts and diff.fields[0].conflict
    with pytest.raises(DraftConflict, match="description was changed live"):
        drafts_publish([second], actor=member)
    tool.refresh_from_db()
    assert tool.description == "Changed live meanwhile."
    assert Draft.objects.get(pk=second.pk).status == Draft.Status.OPEN


def test_a_draft_moves_membership_and_creates_rows(world: World) -> None:
    member = world.alpha.member
    other = catalog_writes.endpoint_create(
        slug="alpha-second", team=world.alpha.group, auth_mode="public"
    )
    moved = tool_draft(world, endpoints=["alpha-second"])
    moved["tools"].append(
        {
            "name": "alpha-new",
            "kind": "template",
            "config": {"template": "hello"},
            "description": "New.",
            "endpoints": ["alpha-endpoint"],
            "team": "alpha",
        }
    )
    draft = draft_create(title="Move", document=moved, actor=member)
    assert sorted(draft.endpoints.values_list("slug", flat=True)) == [
        "alpha-endpoint",
        "alpha-second",
    ]
    assert not Tool.objects.filter(name="alpha-new").exists()
    assert {d.key: d.action for d in draft_diff(draft, user=member)} == {
        "alpha-tool": "update",
        "alpha-new": "create",
    }

    drafts_publish([draft], actor=member)

    assert list(world.alpha.tool.endpoints.all()) == [other]
    assert list(Tool.objects.get(name="alpha-new").endpoints.all()) == [world.alpha.endpoint]


def test_drafts_of_one_endpoint_publish_together(world: World) -> None:
    member = world.alpha.member
    first = draft_create(title="One", document=tool_draft(world, title="T"), actor=member)
    prompt = live_entry("prompts", "alpha-prompt", user=member)
    assert prompt is not None
    second = draft_create(
        title="Two",
        document={"format": "mcphost-catalog/1", "prompts": [{**prompt, "title": "P"}]},
        actor=member,
    )
    versions = Endpoint.objects.get(pk=world.alpha.endpoint.pk).catalog_version

    drafts_publish([first, second], actor=member)

    assert first.change_set is not None and first.change_set == second.change_set
    world.alpha.tool.refresh_from_db()
    world.alpha.prompt.refresh_from_db()
    assert (world.alpha.tool.title, world.alpha.prompt.title) == ("T", "P")
    assert Endpoint.objects.get(pk=world.alpha.endpoint.pk).catalog_version > versions

    third = draft_create(title="A", document=tool_draft(world, title="A"), actor=member)
    fourth = draft_create(title="B", document=tool_draft(world, title="B"), actor=member)
    with pytest.raises(DraftError, match="both change the tool alpha-tool"):
        drafts_publish([third, fourth], actor=member)
    assert Draft.objects.filter(status=Draft.Status.OPEN).count() == 2


def test_an_endpoint_that_requires_review_takes_only_approved_drafts(world: World) -> None:
    member = world.alpha.member
    endpoint = world.alpha.endpoint
    endpoint.require_review = True
    catalog_writes.catalog_row_save(endpoint, actor=member, source="admin")
    reviewer = make_member("alpha-reviewer", world.alpha.group)

    tool = world.alpha.tool
    tool.description = "Direct."
    with pytest.raises(ValidationError, match="requires review"):
        catalog_writes.catalog_row_save(tool, actor=member, source="admin")
    with pytest.raises(ValidationError, match="requires review"):
        catalog_writes.catalog_row_enable(tool, enabled=False, actor=member, source="admin")
    loose = catalog_writes.tool_create(
        name="alpha-loose",
        kind="template",
        config={"template": "x"},
        description="Loose.",
        team=world.alpha.group,
    )
    with pytest.raises(ValidationError, match="requires review"):
        catalog_writes.catalog_row_attach(
            loose, endpoint_ids=[endpoint.pk], actor=member, source="admin"
        )
    endpoint.require_review = False
    with pytest.raises(ValidationError, match="requires review"):
        catalog_writes.catalog_row_save(endpoint, actor=member, source="admin")

    draft = draft_create(
        title="Reviewed", document=tool_draft(world, description="Reviewed."), actor=member
    )
    with pytest.raises(DraftError, match="requires review"):
        drafts_publish([draft], actor=member)
    with pytest.raises(DraftError, match="another user than its author"):
        draft_approve(draft, actor=member)
    reviewer.user_permissions.remove(Permission.objects.get(codename="approve_draft"))
    reviewer = type(reviewer).objects.get(pk=reviewer.pk)  # drop the permission cache
    with pytest.raises(PermissionDenied, match="approve"):
        draft_approve(draft, actor=reviewer)
    approver = make_member("alpha-approver", world.alpha.group)
    draft_approve(draft, actor=approver)
    assert draft.approved

    # An edit withdraws the approval.
    draft_update(draft, document=tool_draft(world, description="Changed after."), actor=member)
    assert not draft.approved
    with pytest.raises(DraftError, match="requires review"):
        drafts_publish([draft], actor=member)
    draft_approve(draft, actor=approver)

    drafts_publish([draft], actor=member)

    tool.refresh_from_db()
    assert tool.description == "Changed after."
    record = tool.history.first()  # type: ignore[attr-defined]
    assert record.history_change_reason == f"draft #{draft.pk} approved by alpha-approver"
    # Code acting on its own (an upstream sync, the shell) is not a user's edit.
    tool.title = "From the shell"
    catalog_writes.catalog_row_save(tool, actor=None, source="upstream sync")


def test_discard_closes_a_draft(world: World) -> None:
    member = world.alpha.member
    draft = draft_create(title="Drop", document=tool_draft(world, title="X"), actor=member)
    document = copy.deepcopy(draft.document)
    draft_discard(draft, actor=member)
    assert draft.status == Draft.Status.DISCARDED
    with pytest.raises(DraftError, match="discarded"):
        draft_update(draft, document=document, actor=member)
    with pytest.raises(DraftError, match="discarded"):
        drafts_publish([draft], actor=member)
    world.alpha.tool.refresh_from_db()
    assert world.alpha.tool.title != "X"


def approver_without_catalog_permissions(world: World) -> Any:
    """An alpha user who may view and approve drafts, and change no catalog row."""
    user = make_member("approver-only", world.alpha.group)
    user.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="mcp_app", codename__in=["view_draft", "approve_draft"]
        )
    )
    return type(user).objects.get(pk=user.pk)  # permissions cached fresh


def test_a_check_validates_the_draft_as_its_author_whoever_runs_it(world: World) -> None:
    """An approver checks a draft without the catalog permissions of its changes: the check
    uses the author's permissions and teams; one who does not see the draft is refused."""
    draft = draft_create(
        title="Reword", document=tool_draft(world, description="Reworded."),
        actor=world.alpha.member,
    )  # fmt: skip
    approver = approver_without_catalog_permissions(world)
    assert not approver.has_perm("mcp_app.change_tool")

    report = draft_check(draft, actor=approver)

    assert [str(change) for change in report.changes] == ["update tools alpha-tool (description)"]
    world.alpha.tool.refresh_from_db()
    assert world.alpha.tool.description == "The alpha team's tool."
    with pytest.raises(PermissionDenied):
        draft_check(draft, actor=world.beta.member)  # another team's draft
    # The author losing the permission makes the check say so, naming the author.
    world.alpha.member.user_permissions.remove(
        Permission.objects.get(content_type__app_label="mcp_app", codename="change_tool")
    )
    draft.author = type(world.alpha.member).objects.get(pk=world.alpha.member.pk)
    with pytest.raises(PermissionDenied, match="author alpha-member may not make it"):
        draft_check(draft, actor=approver)
