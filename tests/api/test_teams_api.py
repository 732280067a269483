"""Teams in the management API (issue #27): a member of team alpha lists, reads and changes
only alpha's rows; beta's answer 404 on every route (read, update, delete, enable, history,
revert, try), as a missing row does, and naming them in a write fails as naming a missing
row; a superuser and an operator of every team see every row."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from mcp_app.models import CallLog, Tool
from mcp_app.services.api_tokens import api_token_create
from mcp_app.services.sessions import session_open
from tests.audit.factories import make_call
from tests.support.openapi_docs import petstore
from tests.support.teams import World, two_teams

pytestmark = pytest.mark.django_db

# Route prefix of each row kind, and the team row attribute it lists.
ROUTES = {
    "endpoints": "endpoint",
    "tools": "tool",
    "resources": "resource",
    "resource-templates": "template",
    "prompts": "prompt",
    "credentials": "credential",
    "upstreams": "upstream",
    "rate-limits": "rate_limit",
    "policies": "policy",
}


@pytest.fixture
def world(db: None) -> World:
    return two_teams()


@pytest.fixture
def as_user() -> Callable[[User], APIClient]:
    def make(user: User) -> APIClient:
        _token, key = api_token_create(user=user, name="ci")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        return client

    return make


def _paths(response: Any) -> set[str]:
    """The fields a 400 answer names."""
    assert response.status_code == 400, response.content
    return {error["path"] for error in response.json()["errors"]}


def _ids(response: Any) -> set[Any]:
    assert response.status_code == 200, response.content
    body = response.json()
    rows = body["results"] if isinstance(body, dict) else body
    return {row["id"] for row in rows}


@pytest.mark.parametrize("route", ROUTES)
def test_a_member_lists_only_their_teams_rows(
    world: World, as_user: Callable[[User], APIClient], route: str
) -> None:
    client = as_user(world.alpha.member)

    assert _ids(client.get(f"/api/v1/{route}/")) == {getattr(world.alpha, ROUTES[route]).pk}


@pytest.mark.parametrize("route", ROUTES)
def test_another_teams_row_is_not_found_on_every_route(
    world: World, as_user: Callable[[User], APIClient], route: str
) -> None:
    client = as_user(world.alpha.member)
    row = getattr(world.beta, ROUTES[route])
    url = f"/api/v1/{route}/{row.pk}/"

    answers = [
        client.get(url).status_code,
        client.patch(url, {"description": "taken"}, format="json").status_code,
        client.delete(url).status_code,
    ]
    if route not in ("policies",):
        answers.append(client.get(f"{url}history/").status_code)
        answers.append(client.post(f"{url}revert/", {"history_id": 1}).status_code)
    if route in ("endpoints", "tools", "resources", "resource-templates", "prompts"):
        answers.append(client.post(f"{url}disable/").status_code)

    assert set(answers) == {404}
    assert type(row)._default_manager.filter(pk=row.pk).exists()


def test_a_member_cannot_try_another_teams_tool(
    world: World, as_user: Callable[[User], APIClient]
) -> None:
    client = as_user(world.alpha.member)

    answer = client.post(f"/api/v1/tools/{world.beta.tool.pk}/try/", {"arguments": {}})

    assert answer.status_code == 404
    assert not CallLog.objects.exists()


def test_a_member_changes_their_teams_row(
    world: World, as_user: Callable[[User], APIClient]
) -> None:
    client = as_user(world.alpha.member)

    answer = client.patch(
        f"/api/v1/tools/{world.alpha.tool.pk}/", {"description": "Ours."}, format="json"
    )

    assert answer.status_code == 200, answer.content
    assert answer.json()["team"] == "alpha"
    assert Tool.objects.get(pk=world.alpha.tool.pk).description == "Ours."


def test_a_member_cannot_publish_on_or_name_another_teams_rows(
    world: World, as_user: Callable[[User], APIClient]
) -> None:
    client = as_user(world.alpha.member)

    on_beta = client.patch(
        f"/api/v1/tools/{world.alpha.tool.pk}/",
        {"endpoints": ["alpha-endpoint", "beta-endpoint"]},
        format="json",
    )
    beta_credential = client.patch(
        f"/api/v1/upstreams/{world.alpha.upstream.pk}/",
        {"credential": "beta-credential"},
        format="json",
    )
    beta_limit = client.post(
        "/api/v1/rate-limits/", {"endpoint": "beta-endpoint", "rate": 1}, format="json"
    )

    assert _paths(on_beta) == {"endpoints"}
    assert _paths(beta_credential) == {"credential"}
    assert _paths(beta_limit) == {"endpoint"}
    assert list(world.beta.endpoint.tools.all()) == [world.beta.tool]
    assert world.beta.endpoint.rate_limits.count() == 1


def test_a_member_cannot_create_a_row_in_another_team(
    world: World, as_user: Callable[[User], APIClient]
) -> None:
    client = as_user(world.alpha.member)
    tool = {"name": "intruder", "kind": "python", "config": {"function": "current_time"}}

    refused = client.post("/api/v1/tools/", {**tool, "team": "beta"}, format="json")
    created = client.post("/api/v1/tools/", tool, format="json")

    assert _paths(refused) == {"team"}
    assert created.status_code == 201, created.content
    assert created.json()["team"] == "alpha"


def test_an_endpoint_lists_only_the_items_its_viewer_sees(
    world: World, as_user: Callable[[User], APIClient]
) -> None:
    world.alpha.endpoint.tools.add(world.site_tool)

    member = as_user(world.alpha.member).get(f"/api/v1/endpoints/{world.alpha.endpoint.pk}/")
    operator = as_user(world.operator).get(f"/api/v1/endpoints/{world.alpha.endpoint.pk}/")

    assert member.json()["tools"] == ["alpha-tool"]
    assert sorted(operator.json()["tools"]) == ["alpha-tool", "site-tool"]


@pytest.mark.parametrize("who", ["superuser", "operator"])
@pytest.mark.parametrize("route", ROUTES)
def test_a_superuser_and_an_operator_see_every_row(
    world: World, as_user: Callable[[User], APIClient], who: str, route: str
) -> None:
    client = as_user(getattr(world, who))
    model = type(getattr(world.alpha, ROUTES[route]))

    assert _ids(client.get(f"/api/v1/{route}/")) == set(
        model._default_manager.values_list("pk", flat=True)
    )


def test_a_member_sees_only_their_endpoints_calls(
    world: World, as_user: Callable[[User], APIClient]
) -> None:
    ours = make_call(world.alpha.endpoint)
    theirs = make_call(world.beta.endpoint)
    nowhere = make_call(None, endpoint_slug="missing")
    client = as_user(world.alpha.member)

    listed = _ids(client.get("/api/v1/call-log/"))
    exported = client.get("/api/v1/call-log/export/?format=jsonl")
    lines = b"".join(exported.streaming_content).decode().splitlines()

    assert listed == {ours.pk}
    assert client.get(f"/api/v1/call-log/{theirs.pk}/").status_code == 404
    assert client.get(f"/api/v1/call-log/{nowhere.pk}/").status_code == 404
    assert client.get("/api/v1/call-log/?endpoint=beta-endpoint").status_code == 400
    assert len(lines) == 1 and str(ours.pk) in lines[0]
    assert _ids(as_user(world.superuser).get("/api/v1/call-log/")) == {
        ours.pk,
        theirs.pk,
        nowhere.pk,
    }


def test_a_members_list_costs_a_bounded_number_of_queries(
    world: World, as_user: Callable[[User], APIClient]
) -> None:
    client = as_user(world.alpha.member)

    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/v1/tools/").status_code == 200

    assert len(queries) <= 12


def test_a_members_export_holds_only_their_teams_rows(
    world: World, as_user: Callable[[User], APIClient]
) -> None:
    client = as_user(world.alpha.member)

    whole = client.get("/api/v1/catalog/export/?format=json")
    theirs = client.get("/api/v1/catalog/export/?format=json&endpoint=beta-endpoint")
    one = client.get(f"/api/v1/endpoints/{world.beta.endpoint.pk}/export/")

    assert whole.status_code == 200
    assert "alpha-tool" in whole.getvalue().decode()
    assert "beta-" not in whole.getvalue().decode()
    assert "site-" not in whole.getvalue().decode()
    assert _paths(theirs) == {"endpoint"}
    assert one.status_code == 404


def test_a_members_import_round_trips_their_rows_and_prunes_only_them(
    world: World, as_user: Callable[[User], APIClient]
) -> None:
    client = as_user(world.alpha.member)
    document = json.loads(client.get("/api/v1/catalog/export/?format=json").getvalue())
    document["tools"][0]["description"] = "Imported."

    answer = client.post(
        "/api/v1/catalog/import/", {"document": document, "prune": True}, format="json"
    )

    assert answer.status_code == 200, answer.content
    assert Tool.objects.get(pk=world.alpha.tool.pk).description == "Imported."
    for row in [*world.beta.rows(), world.site_tool, world.site_endpoint]:
        assert type(row)._default_manager.filter(pk=row.pk).exists()


def test_an_import_naming_another_teams_row_is_refused_and_changes_nothing(
    world: World, as_user: Callable[[User], APIClient]
) -> None:
    client = as_user(world.alpha.member)
    document = {
        "format": "mcphost-catalog/1",
        "endpoints": [{"slug": "beta-endpoint", "title": "Taken over"}],
        "upstreams": [{"name": "beta-upstream", "url": "https://evil.example/mcp"}],
    }

    answer = client.post("/api/v1/catalog/import/", {"document": document}, format="json")

    assert _paths(answer) == {"document.endpoints[0].slug", "document.upstreams[0].name"}
    assert {error["message"] for error in answer.json()["errors"]} == {
        "'beta-endpoint' is taken by another team's row: choose another.",
        "'beta-upstream' is taken by another team's row: choose another.",
    }
    world.beta.endpoint.refresh_from_db()
    world.beta.upstream.refresh_from_db()
    assert world.beta.endpoint.title == ""
    assert world.beta.upstream.url == "https://upstream.example/mcp"


def test_an_openapi_import_cannot_name_another_teams_endpoint_or_credential(
    world: World, as_user: Callable[[User], APIClient]
) -> None:
    client = as_user(world.alpha.member)

    answer = client.post(
        "/api/v1/tools/openapi-import/",
        {
            "document": petstore(),
            "endpoints": ["beta-endpoint"],
            "credential": "beta-credential",
            "preview": False,
        },
        format="json",
    )

    assert _paths(answer) == {"endpoints", "credential"}
    assert Tool.objects.count() == 3


def test_a_member_sees_and_closes_only_their_endpoints_sessions(
    world: World, as_user: Callable[[User], APIClient]
) -> None:
    def opened(team: Any) -> str:
        return session_open(
            endpoint_id=team.endpoint.pk,
            protocol_version="2025-06-18",
            client_capabilities={},
            client_info={"name": "test", "version": "1"},
        ).id

    ours, theirs = opened(world.alpha), opened(world.beta)
    client = as_user(world.alpha.member)

    listed = _ids(client.get("/api/v1/sessions/"))
    closed = client.post(f"/api/v1/sessions/{theirs}/close/")

    assert listed == {ours}
    assert closed.status_code == 404
    assert client.get(f"/api/v1/sessions/{theirs}/").status_code == 404


def test_a_members_allowed_groups_take_only_their_teams(
    world: World, as_user: Callable[[User], APIClient]
) -> None:
    """A member naming another group in ``allowed_groups`` gets a 400 naming the field and
    nothing changes; their own team is taken, and an operator may name any group."""
    client = as_user(world.alpha.member)
    route = f"/api/v1/tools/{world.alpha.tool.pk}/"

    refused = client.patch(route, {"allowed_groups": ["alpha", "beta"]}, format="json")
    assert _paths(refused) == {"allowed_groups"}
    assert list(world.alpha.tool.allowed_groups.all()) == []
    taken = client.patch(route, {"allowed_groups": ["alpha"]}, format="json")
    assert taken.status_code == 200, taken.content
    operator = as_user(world.operator).patch(
        route, {"allowed_groups": ["alpha", "beta"]}, format="json"
    )
    assert operator.status_code == 200, operator.content
    assert {g.name for g in world.alpha.tool.allowed_groups.all()} == {"alpha", "beta"}
    # The member's next edit keeps beta, which they may not name nor drop.
    assert client.patch(route, {"allowed_groups": []}, format="json").status_code == 200
    assert {g.name for g in world.alpha.tool.allowed_groups.all()} == {"beta"}


def test_an_import_allowing_another_group_is_refused_and_changes_nothing(
    world: World, as_user: Callable[[User], APIClient]
) -> None:
    client = as_user(world.alpha.member)
    document = json.loads(client.get("/api/v1/catalog/export/?format=json").getvalue())
    document["tools"][0]["allowed_groups"] = ["beta"]

    answer = client.post("/api/v1/catalog/import/", {"document": document}, format="json")

    assert answer.status_code == 400, answer.content
    assert "beta" in answer.content.decode()
    assert list(world.alpha.tool.allowed_groups.all()) == []
