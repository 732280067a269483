"""Re-syncing an upstream's tools (issue #26): what a re-sync offers besides schemas, tools that
come back, names prefixed only on a real conflict, and imported prompts' arguments in history.

The upstream's list is given as it comes off the wire (``tools/list`` entries): the plan and
the apply are what the admin, the API and the sync policy run on it.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest
from django.contrib.auth.models import User

from mcp_app.models import (
    MembershipChange,
    Prompt,
    PromptArgument,
    Resource,
    ResourceTemplate,
    Tool,
    Upstream,
)
from mcp_app.services import history
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from mcp_app.services.upstream_sync import (
    UpstreamOffer,
    _remote_key,
    offer_fingerprint,
    tools_fingerprint,
    upstream_items_apply,
    upstream_offer_apply,
    upstream_offer_plan,
    upstream_policy_apply,
    upstream_sync_apply,
    upstream_sync_plan,
)

pytestmark = pytest.mark.django_db

ECHO: dict[str, Any] = {
    "name": "echo",
    "description": "Returns the text.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}
# The same tool after an upgrade of the upstream: every field an operator reviews changed.
ECHO_V2: dict[str, Any] = {
    **ECHO,
    "title": "Echo",
    "description": "Returns the text, unchanged.",
    "annotations": {"destructiveHint": True, "readOnlyHint": False},
    "icons": [{"src": "https://example.com/echo.png", "mimeType": "image/png"}],
    "_meta": {"com.example/version": "2"},
    "execution": {"taskSupport": "required"},
}


@pytest.fixture
def upstream(db: None) -> Upstream:
    row = Upstream(name="up", url="https://up.example.com/mcp")
    row.full_clean()
    row.save()
    return row


def imported(upstream: Upstream, *remote: dict[str, Any], **options: Any) -> list[Tool]:
    names = {tool["name"] for tool in remote}
    outcome = upstream_sync_apply(
        upstream, list(remote), add=names, update=set(), remove=set(), **options
    )
    assert not outcome.skipped
    return outcome.created


def test_a_name_taken_off_the_target_endpoints_is_kept(upstream: Upstream) -> None:
    elsewhere = endpoint_create(slug="elsewhere")
    target = endpoint_create(slug="target")
    tool_create(
        name="echo", kind="template", config={"template": "x"}, description="Ours.",
        endpoints=[elsewhere],
    )  # fmt: skip

    [tool] = imported(upstream, ECHO, endpoints=[target])

    # Tool names are unique per endpoint: "echo" is free on the target endpoint.
    assert tool.name == "echo"
    assert list(tool.endpoints.all()) == [target]


def test_a_name_taken_on_a_target_endpoint_is_prefixed(upstream: Upstream) -> None:
    target = endpoint_create(slug="target")
    other = endpoint_create(slug="other")
    tool_create(
        name="echo", kind="template", config={"template": "x"}, description="Ours.",
        endpoints=[target],
    )  # fmt: skip

    [tool] = imported(upstream, ECHO, endpoints=[other, target], enabled=True)

    assert tool.name == "up_echo"
    assert set(tool.endpoints.all()) == {other, target}
    assert tool.enabled


def test_a_resync_offers_and_applies_everything_the_upstream_changed(upstream: Upstream) -> None:
    [tool] = imported(upstream, ECHO)
    assert upstream_sync_plan(upstream, [ECHO]).changed == []

    plan = upstream_sync_plan(upstream, [ECHO_V2])

    assert [row.pk for row, _remote in plan.changed] == [tool.pk]
    assert {name: theirs for name, (_ours, theirs) in plan.fields["echo"].items()} == {
        "title": "Echo",
        "description": "Returns the text, unchanged.",
        "destructive_hint": True,
        "read_only_hint": False,
        "icons": ECHO_V2["icons"],
        "meta": {"com.example/version": "2"},
        "execution_mode": Tool.Execution.BACKGROUND,
        "task_support": Tool.TaskSupport.REQUIRED,
    }
    upstream_sync_apply(upstream, [ECHO_V2], add=set(), update={"echo"}, remove=set())

    tool.refresh_from_db()
    assert (tool.title, tool.description, tool.destructive_hint) == (
        "Echo",
        "Returns the text, unchanged.",
        True,
    )
    assert (tool.meta, tool.icons, tool.task_support) == (
        {"com.example/version": "2"},
        ECHO_V2["icons"],
        "required",
    )
    latest = tool.history.latest()
    assert (latest.description, latest.history_change_reason) == (
        "Returns the text, unchanged.",
        "upstream sync",
    )
    assert upstream_sync_plan(upstream, [ECHO_V2]).changed == []


def test_an_operators_edit_the_upstream_did_not_change_is_not_offered(
    upstream: Upstream,
) -> None:
    [tool] = imported(upstream, ECHO)
    tool.description = "Our own words."
    tool.save()
    renamed = {**ECHO, "title": "Echo"}

    plan = upstream_sync_plan(upstream, [renamed])
    upstream_sync_apply(upstream, [renamed], add=set(), update={"echo"}, remove=set())

    assert set(plan.fields["echo"]) == {"title"}
    tool.refresh_from_db()
    assert (tool.title, tool.description) == ("Echo", "Our own words.")


def test_a_tool_back_on_the_upstream_gets_the_state_it_had_before_it_went(
    upstream: Upstream,
) -> None:
    add = {**ECHO, "name": "add"}
    echo, adder = imported(upstream, ECHO, add, enabled=True)
    adder.enabled = False  # switched off by an operator before it went missing
    adder.save()

    upstream_sync_apply(upstream, [], add=set(), update=set(), remove={"echo", "add"})
    echo.refresh_from_db()
    assert not echo.enabled

    plan = upstream_sync_plan(upstream, [ECHO, add])
    assert plan.fields == {"echo": {"enabled": (False, True)}}
    upstream_sync_apply(upstream, [ECHO, add], add=set(), update={"echo"}, remove=set())

    echo.refresh_from_db()
    adder.refresh_from_db()
    assert (echo.enabled, adder.enabled) == (True, False)
    assert upstream_sync_plan(upstream, [ECHO, add]).changed == []


def test_an_imported_prompts_arguments_are_recorded_in_its_history(upstream: Upstream) -> None:
    review = {
        "name": "review",
        "arguments": [{"name": "code", "required": True}, {"name": "language"}],
    }
    upstream_items_apply(
        upstream,
        UpstreamOffer(prompts=[review]),
        add_resources=set(), remove_resources=set(), add_templates=set(),
        remove_templates=set(), add_prompts={"review"}, update_prompts=set(),
        remove_prompts=set(),
    )  # fmt: skip
    prompt = Prompt.objects.get(name="review")
    assert sorted(
        PromptArgument.history.filter(prompt_id=prompt.pk).values_list("name", "history_type")
    ) == [("code", "+"), ("language", "+")]

    changed = copy.deepcopy(review)
    changed["arguments"].pop()
    upstream_items_apply(
        upstream,
        UpstreamOffer(prompts=[changed]),
        add_resources=set(), remove_resources=set(), add_templates=set(),
        remove_templates=set(), add_prompts=set(), update_prompts={"review"},
        remove_prompts=set(),
    )  # fmt: skip
    # The prompt's new version comes before its parts, as an admin save writes them.
    version = prompt.history.latest()
    parts = PromptArgument.history.filter(
        prompt_id=prompt.pk, history_date__gt=version.history_date
    )
    assert {(row.name, row.history_type) for row in parts} == {
        ("code", "-"),
        ("language", "-"),
        ("code", "+"),
    }


def test_a_row_synced_before_definitions_were_kept_is_offered_whole_but_never_auto_applied(
    upstream: Upstream,
) -> None:
    [tool] = imported(upstream, ECHO)
    tool.description = "Our own words."
    tool.save()
    # As an upstream synced before this version left it: no definition kept.
    Upstream.objects.filter(pk=upstream.pk).update(synced_tools={})
    upstream.refresh_from_db()
    schema = {"type": "object", "properties": {"text": {"type": "string", "maxLength": 9}}}
    upgraded = {**ECHO, "inputSchema": schema}

    offered = upstream_sync_plan(upstream, [upgraded])
    cautious = upstream_sync_plan(upstream, [upgraded], cautious=True)
    upstream_sync_apply(
        upstream, [upgraded], add=set(), update={"echo"}, remove=set(), cautious=True
    )

    # By hand the operator sees every difference (and may untick it)...
    assert set(offered.fields["echo"]) == {"description", "input_schema"}
    # ...the sync policy takes only the schema.
    assert set(cautious.fields["echo"]) == {"input_schema"}
    tool.refresh_from_db()
    assert (tool.description, tool.input_schema) == ("Our own words.", schema)


@pytest.mark.parametrize("policy", ["mark", "apply"])
def test_the_apply_policy_takes_additions_and_changes_and_leaves_removals(
    upstream: Upstream, policy: str
) -> None:
    add = {**ECHO, "name": "add"}
    echo, adder = imported(upstream, ECHO, add, enabled=True)
    Upstream.objects.filter(pk=upstream.pk).update(sync_policy=policy)
    later = {**ECHO, "name": "later"}

    outcomes = upstream_policy_apply(upstream.pk, UpstreamOffer(tools=[ECHO_V2, later]))

    echo.refresh_from_db()
    adder.refresh_from_db()
    upstream.refresh_from_db()
    if policy == "mark":
        assert outcomes is None
        assert echo.description == "Returns the text." and not upstream.tools_out_of_sync
        assert not Tool.objects.filter(name="later").exists()
        return
    assert outcomes is not None
    assert echo.description == "Returns the text, unchanged."
    assert not Tool.objects.get(name="later").enabled  # a draft, as by hand
    # "add" is gone upstream: still enabled, and the upstream out of sync until reviewed.
    assert adder.enabled and upstream.tools_out_of_sync


REVIEW: dict[str, Any] = {
    "name": "review",
    "title": "Review",
    "description": "Reviews code.",
    "arguments": [{"name": "code", "required": True}],
}
NOTES: dict[str, Any] = {"uri": "up://notes", "name": "notes", "mimeType": "text/plain"}
PAGES: dict[str, Any] = {"uriTemplate": "up://pages/{n}", "name": "pages"}


def offered(upstream: Upstream, offer: UpstreamOffer, **options: Any) -> tuple[Any, Any]:
    """Apply every addition and change of ``offer`` and every removal, as an operator
    ticking everything would."""
    plan = upstream_offer_plan(upstream, offer)
    choice = replace(
        plan.additions_and_changes(),
        remove=frozenset(_remote_key(row) for row in plan.tools.removed),
        remove_resources=frozenset(_remote_key(row) for row in plan.resources.removed),
        remove_templates=frozenset(_remote_key(row) for row in plan.templates.removed),
        remove_prompts=frozenset(_remote_key(row) for row in plan.prompts.removed),
    )
    return upstream_offer_apply(upstream, offer, choice=choice, **options)


def test_a_sync_writes_every_row_with_the_operator_and_its_source(
    upstream: Upstream, admin_user: User
) -> None:
    endpoint = endpoint_create(slug="main")
    offer = UpstreamOffer(tools=[ECHO], resources=[NOTES], resource_templates=[PAGES],
                          prompts=[REVIEW])  # fmt: skip
    offered(upstream, offer, endpoints=[endpoint], enabled=True, actor=admin_user)
    changed = UpstreamOffer(tools=[ECHO_V2], prompts=[{**REVIEW, "arguments": []}])
    offered(upstream, changed, actor=admin_user)

    rows = [
        Tool.objects.get(name="echo"),
        Resource.objects.get(uri="up://notes"),
        ResourceTemplate.objects.get(uri_template="up://pages/{n}"),
        Prompt.objects.get(name="review"),
    ]
    for row in rows:
        stamps = {(h.history_change_reason, h.history_user) for h in row.history.all()}
        assert stamps == {(history.UPSTREAM_SYNC, admin_user)}, row
    arguments = PromptArgument.history.filter(prompt_id=rows[-1].pk)
    assert {(h.history_type, h.history_user) for h in arguments} == {
        ("+", admin_user),
        ("-", admin_user),
    }
    # Created enabled; the resource and template the upstream dropped were disabled.
    assert [row.enabled for row in rows] == [True, False, False, True]
    assert (
        MembershipChange.objects.filter(source=history.UPSTREAM_SYNC, changed_by=admin_user).count()
        == 4
    )


def test_a_resync_offers_only_the_item_fields_the_upstream_changed(upstream: Upstream) -> None:
    offer = UpstreamOffer(resources=[NOTES], resource_templates=[PAGES], prompts=[REVIEW])
    offered(upstream, offer)
    prompt = Prompt.objects.get(name="review")
    prompt.title = "Our own title"
    prompt.save()
    later = UpstreamOffer(
        resources=[{**NOTES, "mimeType": "text/markdown"}],
        resource_templates=[{**PAGES, "description": "Pages by number."}],
        prompts=[{**REVIEW, "description": "Reviews code, carefully.",
                  "arguments": [{"name": "code", "required": True, "description": "The code."}]}],
    )  # fmt: skip

    plan = upstream_offer_plan(upstream, later)

    # The operator's own title is not a difference; what the upstream changed is.
    assert plan.prompts.fields == {
        "review": {
            "description": ("Reviews code.", "Reviews code, carefully."),
            "arguments": (
                [{"name": "code", "title": "", "description": "", "required": True}],
                [{"name": "code", "title": "", "description": "The code.", "required": True}],
            ),
        }
    }
    assert plan.resources.fields == {"up://notes": {"mime_type": ("text/plain", "text/markdown")}}
    assert plan.templates.fields == {"up://pages/{n}": {"description": ("", "Pages by number.")}}
    offered(upstream, later)
    prompt.refresh_from_db()
    assert (prompt.title, prompt.description) == ("Our own title", "Reviews code, carefully.")
    assert list(prompt.arguments.values_list("description", flat=True)) == ["The code."]
    assert Resource.objects.get().mime_type == "text/markdown"
    assert ResourceTemplate.objects.get().description == "Pages by number."
    assert upstream_offer_plan(upstream, later).prompts.fields == {}


def test_a_dropped_resource_template_or_prompt_that_comes_back_is_enabled_again(
    upstream: Upstream,
) -> None:
    offer = UpstreamOffer(resources=[NOTES], resource_templates=[PAGES], prompts=[REVIEW])
    offered(upstream, offer, enabled=True)
    offered(upstream, UpstreamOffer())
    rows = [Resource.objects.get(), ResourceTemplate.objects.get(), Prompt.objects.get()]
    for row in rows:
        row.refresh_from_db()
        assert not row.enabled

    plan = upstream_offer_plan(upstream, offer)
    offered(upstream, offer)

    assert plan.resources.fields == {"up://notes": {"enabled": (False, True)}}
    assert plan.prompts.fields == {"review": {"enabled": (False, True)}}
    for row in rows:
        row.refresh_from_db()
        assert row.enabled
    upstream.refresh_from_db()
    assert upstream.items_gone == {"resources": [], "resource_templates": [], "prompts": []}


def test_the_apply_policy_takes_item_changes_and_leaves_item_removals(
    upstream: Upstream,
) -> None:
    offered(upstream, UpstreamOffer(resources=[NOTES], prompts=[REVIEW]), enabled=True)
    Upstream.objects.filter(pk=upstream.pk).update(sync_policy="apply")
    argued = {**REVIEW, "arguments": [{"name": "code"}, {"name": "style"}]}

    assert upstream_policy_apply(upstream.pk, UpstreamOffer(prompts=[argued])) is not None

    prompt = Prompt.objects.get()
    assert list(prompt.arguments.values_list("name", "required")) == [
        ("code", False),
        ("style", False),
    ]
    # The resource is gone upstream: still serving, and the upstream out of sync for review.
    assert Resource.objects.get().enabled
    upstream.refresh_from_db()
    assert upstream.tools_out_of_sync


def test_the_fingerprint_covers_resources_templates_and_prompts() -> None:
    offer = UpstreamOffer(tools=[ECHO], resources=[NOTES], resource_templates=[PAGES],
                          prompts=[REVIEW])  # fmt: skip
    other = [
        replace(offer, prompts=[{**REVIEW, "arguments": []}]),
        replace(offer, resources=[]),
        replace(offer, resource_templates=[{**PAGES, "mimeType": "text/html"}]),
        replace(offer, prompts=[{**REVIEW, "_meta": {"v": 2}}]),
    ]
    digests = {offer_fingerprint(item) for item in [offer, *other]}

    assert len(digests) == 5
    # The order an upstream lists in is not a difference.
    assert offer_fingerprint(replace(offer, tools=[ECHO, {**ECHO, "name": "a"}])) == (
        offer_fingerprint(replace(offer, tools=[{**ECHO, "name": "a"}, ECHO]))
    )
    # A digest kept before resources and prompts counted still holds for tools alone.
    assert offer_fingerprint(UpstreamOffer(tools=[ECHO])) == tools_fingerprint([ECHO])


def test_an_upstreams_icons_are_kept_on_every_kind_but_those_this_site_refuses(
    upstream: Upstream, settings: Any
) -> None:
    settings.MCP_MAX_ICON_BYTES = 64
    good = {"src": "https://up.example.com/logo.png", "mimeType": "image/png", "sizes": ["48x48"]}
    small = {"src": "data:image/png;base64,iVBORw0KGgo="}
    refused = [
        # A path names this site's uploads, not the upstream's.
        {"src": "/icons/" + "a" * 64 + ".png"},
        {"src": "data:image/png;base64," + "A" * 200},  # over MCP_MAX_ICON_BYTES
        {"src": "javascript:alert(1)"},
    ]
    icons = [good, *refused, small]
    offer = UpstreamOffer(
        tools=[{**ECHO, "icons": icons}],
        resources=[{**NOTES, "icons": icons}],
        resource_templates=[{**PAGES, "icons": icons}],
        prompts=[{**REVIEW, "icons": icons}],
    )

    offered(upstream, offer)

    for model in (Tool, Resource, ResourceTemplate, Prompt):
        assert model.objects.get().icons == [good, small], model.__name__
