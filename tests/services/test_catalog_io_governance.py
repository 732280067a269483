"""Catalog export/import of an endpoint's governance and of every row's team
(services/catalog_io.py).

An endpoint entry carries its rate limits and policies, and every row names its team by group
name, so a catalog moved between installations keeps both; they are written through their own
write paths (checks, permissions, the team rule), and importing the same file again changes
nothing.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.contrib.auth.models import Permission

from mcp_app.models import (
    Endpoint,
    Policy,
    Prompt,
    RateLimit,
    Resource,
    ResourceTemplate,
    Tool,
    Upstream,
)
from mcp_app.services.catalog_io import (
    CatalogImportError,
    CatalogPermissionError,
    catalog_dump,
    catalog_export,
    catalog_import,
    catalog_parse,
)
from tests.support.teams import World, make_member, two_teams


@pytest.fixture
def world(db: None) -> World:
    world = two_teams()
    # A second limit (a per-tool concurrency cap) and a second, configured policy on alpha.
    alpha = world.alpha.endpoint
    RateLimit.objects.create(
        endpoint=alpha, scope="endpoint", target_kind="tool", target_name="alpha-tool",
        max_concurrent=2, quota=100, quota_period="month", on_redis_down="closed",
    )  # fmt: skip
    Policy.objects.create(
        endpoint=alpha, name="deny-drop", kind="deny", mode="permissive", position=3,
        target="alpha-tool", config={"patterns": ["drop table"]},
    )  # fmt: skip
    return world


def wipe_catalog() -> None:
    # Groups and credentials stay: a document names them, the target must hold them.
    for model in (Prompt, ResourceTemplate, Resource, Tool, Endpoint, Upstream):
        model.objects.all().delete()


def _history_rows() -> int:
    return sum(
        model.history.count()  # type: ignore[attr-defined]  # simple_history's manager
        for model in (RateLimit, Policy, Endpoint, Tool, Resource, ResourceTemplate, Prompt)
    )


def _endpoint(document: dict[str, Any], slug: str) -> tuple[int, dict[str, Any]]:
    return next((i, e) for i, e in enumerate(document["endpoints"]) if e["slug"] == slug)


def test_limits_policies_and_teams_survive_a_round_trip_by_a_superuser(world: World) -> None:
    text = catalog_dump(catalog_export())
    _index, alpha = _endpoint(catalog_parse(text), "alpha-endpoint")
    assert alpha["team"] == "alpha"
    assert [limit["target_name"] for limit in alpha["rate_limits"]] == ["", "alpha-tool"]
    assert [policy["name"] for policy in alpha["policies"]] == ["alpha-policy", "deny-drop"]
    wipe_catalog()
    assert not RateLimit.objects.exists()

    report = catalog_import(document=catalog_parse(text), user=world.superuser)

    assert report.changed
    assert catalog_dump(catalog_export()) == text
    assert Tool.objects.get(name="beta-tool").team == world.beta.group
    assert Endpoint.objects.get(slug="site-endpoint").team is None


def test_importing_the_same_file_again_writes_no_row_and_no_history(world: World) -> None:
    document = catalog_parse(catalog_dump(catalog_export()))
    rows = _history_rows()
    versions = dict(Endpoint.objects.values_list("slug", "catalog_version"))

    report = catalog_import(document=document, user=world.superuser)

    assert report.changes == []
    assert _history_rows() == rows
    assert dict(Endpoint.objects.values_list("slug", "catalog_version")) == versions


def test_an_old_file_without_governance_or_teams_keeps_them(world: World) -> None:
    document = catalog_export()
    for section in ("endpoints", "tools", "resources", "resource_templates", "prompts"):
        for entry in document[section]:
            for key in ("team", "rate_limits", "policies"):
                entry.pop(key, None)

    report = catalog_import(document=document, user=world.superuser)

    assert report.changes == []
    assert RateLimit.objects.filter(endpoint=world.alpha.endpoint).count() == 2
    assert Tool.objects.get(name="alpha-tool").team == world.alpha.group


def test_limits_and_policies_are_updated_created_and_deleted_as_the_file_says(
    world: World,
) -> None:
    document = catalog_export()
    _index, alpha = _endpoint(document, "alpha-endpoint")
    alpha["rate_limits"][0]["rate"] = 20
    del alpha["rate_limits"][1]
    alpha["policies"] = [
        {**alpha["policies"][1], "mode": "enforce"},
        {"name": "cap", "kind": "max_result_size", "config": {"max_bytes": 4096}},
    ]

    report = catalog_import(document=document, user=world.superuser)

    assert sorted(str(change) for change in report.changes) == [
        "create policies alpha-endpoint/cap",
        "delete policies alpha-endpoint/alpha-policy",
        "delete rate_limits alpha-endpoint[1]",
        "update policies alpha-endpoint/deny-drop (mode)",
        "update rate_limits alpha-endpoint[0] (rate)",
    ]
    assert list(world.alpha.endpoint.rate_limits.values_list("rate", flat=True)) == [20]
    assert dict(world.alpha.endpoint.policies.values_list("name", "mode")) == {
        "deny-drop": "enforce",
        "cap": "enforce",
    }
    assert catalog_import(document=document, user=world.superuser).changes == []


@pytest.mark.parametrize(
    ("edit", "path", "message"),
    [
        (
            lambda alpha: alpha["rate_limits"][1].update(burst=5),
            "endpoints[{i}].rate_limits[1].burst (alpha-endpoint)",
            "A burst needs a rate.",
        ),
        (
            lambda alpha: alpha["policies"][1].update(config={"patterns": ["(?<"]}),
            "endpoints[{i}].policies[1].config (alpha-endpoint)",
            "patterns: Invalid",
        ),
        (
            lambda alpha: alpha["policies"].append({"name": "x", "kind": "teleport"}),
            "endpoints[{i}].policies[2].kind (alpha-endpoint)",
            "Unknown policy kind 'teleport'",
        ),
        (
            lambda alpha: alpha["rate_limits"][0].update(speed=3),
            "endpoints[{i}].rate_limits[0].speed",
            "Unknown field.",
        ),
    ],
)
def test_an_invalid_limit_or_policy_is_named_and_nothing_is_written(
    world: World, edit: Any, path: str, message: str
) -> None:
    document = catalog_export()
    index, alpha = _endpoint(document, "alpha-endpoint")
    edit(alpha)
    # A valid edit in the same file, which must not be written either.
    next(tool for tool in document["tools"] if tool["name"] == "beta-tool")["description"] = "x"
    limits = list(RateLimit.objects.values_list("id", "rate", "burst"))
    policies = list(Policy.objects.values_list("id", "name", "config"))
    rows = _history_rows()

    with pytest.raises(CatalogImportError) as caught:
        catalog_import(document=document, user=world.superuser)

    [error] = caught.value.errors
    assert error.path == path.format(i=index)
    assert message in error.message
    assert list(RateLimit.objects.values_list("id", "rate", "burst")) == limits
    assert list(Policy.objects.values_list("id", "name", "config")) == policies
    assert Tool.objects.get(name="beta-tool").description == "The beta team's tool."
    assert _history_rows() == rows


@pytest.mark.parametrize(
    ("lacking", "edit"),
    [
        ("add_ratelimit", lambda alpha: alpha["rate_limits"].append({"quota": 5})),
        ("change_ratelimit", lambda alpha: alpha["rate_limits"][0].update(rate=99)),
        ("delete_ratelimit", lambda alpha: alpha["rate_limits"].pop()),
        ("add_policy", lambda alpha: alpha["policies"].append({"name": "m", "kind": "mask"})),
        ("change_policy", lambda alpha: alpha["policies"][0].update(mode="off")),
        ("delete_policy", lambda alpha: alpha["policies"].pop()),
        ("view_ratelimit", lambda alpha: None),
        ("view_policy", lambda alpha: None),
    ],
)
def test_an_import_needs_the_permission_of_each_governance_change(
    world: World, lacking: str, edit: Any
) -> None:
    user = make_member("importer")
    user.user_permissions.add(Permission.objects.get(codename="manage_every_team"))
    user.user_permissions.remove(Permission.objects.get(codename=lacking))
    document = catalog_export()
    _index, alpha = _endpoint(document, "alpha-endpoint")
    edit(alpha)
    before = (
        list(RateLimit.objects.values_list("id", "rate")),
        list(Policy.objects.values_list("id", "mode")),
    )

    with pytest.raises(CatalogPermissionError) as caught:
        catalog_import(document=copy.deepcopy(document), user=user)

    assert caught.value.missing == [f"mcp_app.{lacking}"]
    after = (
        list(RateLimit.objects.values_list("id", "rate")),
        list(Policy.objects.values_list("id", "mode")),
    )
    assert after == before
    if lacking.startswith("view_"):
        return
    user.user_permissions.add(Permission.objects.get(codename=lacking))
    user = type(user).objects.get(pk=user.pk)  # permissions are cached on the object
    assert catalog_import(document=document, user=user).changed


def test_a_team_member_cannot_import_a_row_into_another_team(world: World) -> None:
    member = world.alpha.member
    document = catalog_export(user=member)
    index, alpha = _endpoint(document, "alpha-endpoint")
    alpha["team"] = "beta"
    document["tools"][0]["team"] = "nobody"
    document["prompts"][0]["team"] = None

    with pytest.raises(CatalogImportError) as caught:
        catalog_import(document=document, user=member)

    assert [str(error) for error in caught.value.errors] == [
        f"endpoints[{index}].team (alpha-endpoint): 'beta' is not one of your teams.",
        "tools[0].team (alpha-tool): No group named 'nobody' here: create it first.",
        "prompts[0].team (alpha-prompt): site-wide is not one of your teams.",
    ]
    assert Endpoint.objects.get(slug="alpha-endpoint").team == world.alpha.group


def test_a_team_member_imports_their_own_team_unchanged(world: World) -> None:
    member = world.alpha.member
    document = catalog_parse(catalog_dump(catalog_export(user=member)))
    assert {entry["team"] for entry in document["tools"]} == {"alpha"}
    assert [limit["description"] for limit in _endpoint(document, "alpha-endpoint")[1][
        "rate_limits"
    ]] == ["alpha-limit", ""]  # fmt: skip

    assert catalog_import(document=document, user=member).changes == []
