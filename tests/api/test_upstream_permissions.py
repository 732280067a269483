"""Who may read history, compare versions, revert, and preview or apply an upstream's sync through
the API (issue #26): every new route is tried by users lacking exactly one of the permissions
it needs; each is refused with a 403 naming that permission and changes nothing; with all of
them it goes through (the sync to an upstream that is not there: 502, past the permissions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from mcp_app.models import (
    Credential,
    Endpoint,
    Prompt,
    Resource,
    ResourceTemplate,
    Tool,
    Upstream,
)
from mcp_app.services.catalog_writes import (
    endpoint_create,
    prompt_create,
    resource_create,
    tool_create,
)
from mcp_app.services.credentials import credential_create

pytestmark = pytest.mark.django_db

# route -> (model, permission codename suffix)
MODELS: dict[str, tuple[type[Any], str]] = {
    "endpoints": (Endpoint, "endpoint"),
    "tools": (Tool, "tool"),
    "resources": (Resource, "resource"),
    "resource-templates": (ResourceTemplate, "resourcetemplate"),
    "prompts": (Prompt, "prompt"),
    "credentials": (Credential, "credential"),
    "upstreams": (Upstream, "upstream"),
}
SYNC_PREVIEW_NEEDS = [
    "mcp_app.view_upstream",
    "mcp_app.view_tool",
    "mcp_app.view_resource",
    "mcp_app.view_resourcetemplate",
    "mcp_app.view_prompt",
]
SYNC_APPLY_NEEDS = [
    "mcp_app.view_upstream",
    "mcp_app.change_upstream",
    "mcp_app.add_tool",
    "mcp_app.change_tool",
    "mcp_app.add_resource",
    "mcp_app.change_resource",
    "mcp_app.add_resourcetemplate",
    "mcp_app.change_resourcetemplate",
    "mcp_app.add_prompt",
    "mcp_app.change_prompt",
]
# Everything ticked: each permission above is needed.
SYNC_BODY = {
    "add_tools": ["echo"], "update_tools": ["add"], "remove_tools": ["gone"],
    "add_resources": ["up://readme"], "remove_resources": ["up://gone"],
    "add_templates": ["up://notes/{topic}"], "remove_templates": ["up://gone/{x}"],
    "add_prompts": ["review"], "update_prompts": ["old"], "remove_prompts": ["gone"],
}  # fmt: skip


@pytest.fixture
def rows(db: None) -> dict[str, Any]:
    """One row of each model, each with two versions (created, then edited)."""
    credential_create(name="github", kind="bearer", secret="never-shown-4711")
    # Nothing listens on port 9: a sync that passes its permissions fails to list it (502).
    Upstream.objects.create(
        name="peer", url="http://127.0.0.1:9/mcp", allow_networks="127.0.0.1/32"
    )
    main = endpoint_create(slug="main")
    tool_create(name="echo", kind="python", config={"function": "echo"}, endpoints=[main])
    resource_create(uri="demo://readme", name="readme", text="# Read me", endpoints=[main])
    template = ResourceTemplate(
        uri_template="demo://notes/{topic}", name="notes", kind="template",
        config={"template": "Notes on {{ topic }}"},
    )  # fmt: skip
    template.full_clean()
    template.save()
    prompt_create(name="review", description="Review.", messages=[{"role": "user", "text": "R"}])
    found = {}
    for route, (model, _codename) in MODELS.items():
        row = model.objects.get()
        setattr(row, "title" if model is Endpoint else "description", "Edited.")
        row.save()
        found[route] = row
    return found


def state() -> list[Any]:
    """What a refused request could have changed: every row of every model, and its versions."""
    return [
        (list(model.objects.order_by("pk").values()), model.history.count())
        for model, _codename in MODELS.values()
    ]


def denied(missing: str) -> str:
    return f"This request needs permissions you do not have: {missing}."


def history_request(client: APIClient, route: str, row: Any, action: str) -> Any:
    first, latest = row.history.order_by("history_id")[:2]
    url = f"/api/v1/{route}/{row.pk}/"
    if action == "history":
        return client.get(f"{url}history/")
    if action == "diff":
        return client.get(f"{url}diff/", {"a": first.history_id, "b": latest.history_id})
    return client.post(f"{url}revert/", {"history_id": first.history_id}, format="json")


HISTORY_CASES = [
    (route, action, f"mcp_app.{'change' if action == 'revert' else 'view'}_{codename}")
    for route, (_model, codename) in MODELS.items()
    for action in ("history", "diff", "revert")
]


@pytest.mark.parametrize(("route", "action", "needs"), HISTORY_CASES)
def test_history_routes_lacking_their_permission_are_refused_naming_it(
    rows: dict[str, Any],
    token_client: Callable[..., APIClient],
    route: str,
    action: str,
    needs: str,
) -> None:
    # Every other permission there is, so only this one is missing.
    everything_else = [
        f"mcp_app.{verb}_{codename}"
        for _model, codename in MODELS.values()
        for verb in ("view", "add", "change", "delete")
        if f"mcp_app.{verb}_{codename}" != needs
    ]
    before = state()

    refused = history_request(token_client(*everything_else), route, rows[route], action)

    assert refused.status_code == 403, refused.content
    assert refused.json()["detail"] == denied(needs)
    assert state() == before
    allowed = history_request(token_client(needs, username="allowed"), route, rows[route], action)
    assert allowed.status_code == 200, allowed.content


@pytest.mark.parametrize("missing", SYNC_PREVIEW_NEEDS)
def test_a_sync_preview_lacking_one_permission_is_refused_naming_it(
    rows: dict[str, Any], token_client: Callable[..., APIClient], missing: str
) -> None:
    client = token_client(*(name for name in SYNC_PREVIEW_NEEDS if name != missing))
    before = state()

    response = client.get(f"/api/v1/upstreams/{rows['upstreams'].pk}/sync/")

    assert response.status_code == 403, response.content
    assert response.json()["detail"] == denied(missing)
    assert state() == before


@pytest.mark.parametrize("missing", SYNC_APPLY_NEEDS)
def test_a_sync_apply_lacking_one_permission_is_refused_naming_it(
    rows: dict[str, Any], token_client: Callable[..., APIClient], missing: str
) -> None:
    client = token_client(*(name for name in SYNC_APPLY_NEEDS if name != missing))
    before = state()

    response = client.post(
        f"/api/v1/upstreams/{rows['upstreams'].pk}/sync/", SYNC_BODY, format="json"
    )

    assert response.status_code == 403, response.content
    assert response.json()["detail"] == denied(missing)
    assert state() == before


@pytest.mark.parametrize(
    ("method", "needs", "body"),
    [("get", SYNC_PREVIEW_NEEDS, None), ("post", SYNC_APPLY_NEEDS, SYNC_BODY)],
)
def test_a_sync_with_its_permissions_reaches_the_upstream(
    rows: dict[str, Any],
    token_client: Callable[..., APIClient],
    method: str,
    needs: list[str],
    body: Any,
) -> None:
    client = token_client(*needs)
    before = state()

    url = f"/api/v1/upstreams/{rows['upstreams'].pk}/sync/"
    response = getattr(client, method)(url, body, format="json")

    assert response.status_code == 502, response.content
    assert response.json()["type"] == "upstream_unavailable"
    assert "'peer'" in response.json()["detail"] and "127.0.0.1" not in response.json()["detail"]
    # Listing it recorded the failure on the upstream's health, and nothing else.
    after = state()
    upstream_rows = 6
    assert [entry for index, entry in enumerate(after) if index != upstream_rows] == [
        entry for index, entry in enumerate(before) if index != upstream_rows
    ]
