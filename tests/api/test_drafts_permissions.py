"""Who may do what with drafts through the API (issue #32): every drafts route and action,
tried by an anonymous client, a token without permission, a view-only user, the draft's
author, an approver and another team's member. Each answer is the one the matrix names, and
a refused request changes nothing.

What each route needs is in mcp_app/api/drafts.py and docs/api.md ("Drafts"): view to read
and check, add to create, change to edit, discard and publish, ``approve_draft`` to approve;
a publish also needs the catalog permissions of the changes (the service checks them as an
import does); a check validates the draft as its author would save it (the author's
permissions), so a viewer or an approver may check it without them. Another team's draft
answers 404, and naming it in a collection publish fails as naming a missing one (400).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from mcp_app.models import Draft, Tool
from mcp_app.services.api_tokens import api_token_create
from mcp_app.services.drafts import draft_create, live_entry
from tests.support.teams import World, two_teams

pytestmark = pytest.mark.django_db

ROLES = ["anonymous", "no_permission", "viewer", "author", "approver", "other_team"]
ROUTES = [
    "list", "create", "retrieve", "update", "check", "approve", "discard", "publish",
    "publish_together",
]  # fmt: skip
# route -> the status each role gets, in ROLES' order.
MATRIX: dict[str, tuple[int, ...]] = {
    "list": (401, 403, 200, 200, 200, 200),
    "create": (401, 403, 403, 201, 403, 400),
    "retrieve": (401, 403, 200, 200, 200, 404),
    "update": (401, 403, 403, 200, 403, 404),
    "check": (401, 403, 200, 200, 200, 404),
    "approve": (401, 403, 403, 400, 200, 404),
    "discard": (401, 403, 403, 200, 403, 404),
    "publish": (401, 403, 403, 200, 403, 404),
    "publish_together": (401, 403, 403, 200, 403, 400),
}
CATALOG_VIEWS = [
    "view_endpoint", "view_tool", "view_resource", "view_resourcetemplate", "view_prompt",
    "view_ratelimit", "view_policy",
]  # fmt: skip


@pytest.fixture
def world(db: None) -> World:
    return two_teams()


def alpha_user(world: World, username: str, codenames: list[str]) -> User:
    user = User.objects.create_user(username=username, password="unused-password-123")
    user.groups.add(world.alpha.group)
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="mcp_app", codename__in=codenames)
    )
    return user


def client_for(world: World, role: str) -> APIClient:
    user = {
        "anonymous": None,
        "no_permission": lambda: alpha_user(world, "nobody", []),
        "viewer": lambda: alpha_user(world, "viewer", ["view_draft", *CATALOG_VIEWS]),
        "author": lambda: world.alpha.member,
        "approver": lambda: alpha_user(
            world, "approver", ["view_draft", "approve_draft", *CATALOG_VIEWS]
        ),
        "other_team": lambda: world.beta.member,
    }[role]
    client = APIClient()
    if user is not None:
        _token, key = api_token_create(user=user(), name="ci")
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def document(**changes: Any) -> dict[str, Any]:
    entry = live_entry("tools", "alpha-tool")
    assert entry is not None
    return {"format": "mcphost-catalog/1", "tools": [{**entry, **changes}]}


def send(client: APIClient, route: str, draft: Draft) -> Any:
    url = f"/api/v1/drafts/{draft.pk}/"
    if route == "list":
        return client.get("/api/v1/drafts/")
    if route == "create":
        return client.post("/api/v1/drafts/", {"title": "New", "document": document(title="N")})
    if route == "retrieve":
        return client.get(url)
    if route == "update":
        return client.patch(url, {"title": "Renamed"})
    if route == "publish_together":
        return client.post("/api/v1/drafts/publish/", {"drafts": [draft.pk]})
    return client.post(f"{url}{route}/")


def state() -> list[Any]:
    """What a refused request could have changed: the drafts and the tools."""
    return [
        list(Draft.objects.order_by("pk").values()),
        list(Tool.objects.order_by("pk").values()),
    ]


@pytest.mark.parametrize("role", ROLES)
def test_every_drafts_route_answers_each_role_as_the_matrix_says(world: World, role: str) -> None:
    client = client_for(world, role)
    for route in ROUTES:
        # A fresh draft by the author, of the live row as it is now (earlier routes may
        # have published one).
        draft = draft_create(
            title=f"For {route}", document=document(description=route), actor=world.alpha.member
        )
        before = state()

        response = send(client, route, draft)

        expected = MATRIX[route][ROLES.index(role)]
        assert response.status_code == expected, (route, response.content)
        if expected >= 400:
            assert state() == before, route
        if expected == 403:
            # The permission missing is named: a Draft model permission, or (a publish)
            # the catalog permission of the change.
            assert "mcp_app." in response.json()["detail"], route
        if route == "list" and expected == 200:
            ids = {row["id"] for row in response.json()["results"]}
            assert (draft.pk in ids) == (role != "other_team"), route


def test_a_publish_by_a_user_lacking_the_catalog_permission_is_refused_naming_it(
    world: World,
) -> None:
    """Publishing needs change_draft and, as an import would, the permissions of the changes."""
    drafter = alpha_user(world, "drafter", ["view_draft", "change_draft", *CATALOG_VIEWS])
    draft = draft_create(
        title="Reword", document=document(description="Reworded."), actor=world.alpha.member
    )
    client = APIClient()
    _token, key = api_token_create(user=drafter, name="drafter")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    before = state()

    for url, body in (
        (f"/api/v1/drafts/{draft.pk}/publish/", None),
        ("/api/v1/drafts/publish/", {"drafts": [draft.pk]}),
    ):
        response = client.post(url, body)
        assert response.status_code == 403, response.content
        assert response.json()["detail"] == (
            "This change needs the permissions mcp_app.change_tool."
        )
    assert state() == before


def test_an_approver_checks_a_draft_as_its_author_would_save_it(world: World) -> None:
    """The check of an approver holding no catalog permission validates the draft with the
    author's permissions and teams, through the API and the admin's Check button."""
    approver = alpha_user(world, "approver", ["view_draft", "approve_draft"])
    approver.is_staff = True
    approver.save()
    draft = draft_create(
        title="Reword", document=document(description="Reworded."), actor=world.alpha.member
    )
    client = APIClient()
    _token, key = api_token_create(user=approver, name="approver")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    before = state()

    response = client.post(f"/api/v1/drafts/{draft.pk}/check/")

    assert response.status_code == 200, response.content
    assert [change["key"] for change in response.json()["changes"]] == ["alpha-tool"]
    admin = Client()
    admin.force_login(approver)
    url = reverse("admin:mcp_app_draft_change", args=[draft.pk])
    page = admin.get(url)
    assert 'value="check"' in page.content.decode()
    assert 'value="publish"' not in page.content.decode()
    checked = admin.post(url, {"action": "check"}, follow=True)
    assert [str(m) for m in get_messages(checked.wsgi_request)] == [
        "Publishing now would: update tools alpha-tool (description)."
    ]
    assert state() == before
