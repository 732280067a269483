"""Upstreams through the API (issue #26): the sync previewed and applied with the admin's choices
(what, onto which endpoints, enabled or not) under If-Match, and the history of upstreams and
catalog rows listed, compared and reverted, refusing a version whose upstream is gone.

The upstream is the SDK server of ``tests/support/mcp_upstream_server.py`` on 127.0.0.1; the
sync lists it over HTTP as production does (``transaction=True``: the listing reads the row
from another thread's connection).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

from mcp_app.models import Credential, Endpoint, Prompt, Resource, Tool, Upstream
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from tests.api.conftest import CATALOG_PERMISSIONS
from tests.support.mcp_upstream_server import RunningUpstream, run_mcp_upstream

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "api-sync-s3cret-5521"


@pytest.fixture(scope="module")
def server(tmp_path_factory: Any) -> Iterator[RunningUpstream]:
    with run_mcp_upstream(tmp_path_factory.mktemp("api")) as running:
        yield running


@pytest.fixture
def api(token_client: Callable[..., APIClient]) -> APIClient:
    return token_client(*CATALOG_PERMISSIONS)


@pytest.fixture
def main(db: None) -> Endpoint:
    return endpoint_create(slug="main")


def create_upstream(api: APIClient, url: str) -> dict[str, Any]:
    created = api.post("/api/v1/credentials/", {"name": "peer-key", "kind": "bearer",
                       "secret": SECRET}, format="json")  # fmt: skip
    assert created.status_code == 201, created.content
    response = api.post(
        "/api/v1/upstreams/",
        {"name": "up", "url": url, "credential": "peer-key", "allow_networks": "127.0.0.1/32",
         "sync_policy": "apply"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    return dict(response.json())


def test_a_sync_is_previewed_then_applied_onto_endpoints_under_if_match(
    api: APIClient, server: RunningUpstream, main: Endpoint
) -> None:
    upstream = create_upstream(api, server.url)
    tool_create(name="add", kind="python", config={"function": "echo"}, endpoints=[main])
    url = f"/api/v1/upstreams/{upstream['id']}/"

    preview = api.get(f"{url}sync/")
    stale = api.post(f"{url}sync/", {"add_tools": ["echo"]}, format="json", HTTP_IF_MATCH='"stale"')
    etag = api.get(url)["ETag"]
    applied = api.post(
        f"{url}sync/",
        {"add_tools": ["echo", "add"], "add_prompts": ["review"], "endpoints": ["main"],
         "enabled": True},
        format="json",
        HTTP_IF_MATCH=etag,
    )  # fmt: skip
    after = api.get(url)

    assert preview.status_code == 200, preview.content
    body = preview.json()
    assert {"echo", "add", "report"} <= {tool["name"] for tool in body["tools"]["added"]}
    assert [prompt["name"] for prompt in body["prompts"]["added"]] == ["review"]
    assert {r["uri"] for r in body["resources"]["added"]} == {"up://readme", "up://pixel.png"}
    assert stale.status_code == 412
    assert applied.status_code == 200, applied.content
    created = {(row["kind"], row["name"], row["enabled"]) for row in applied.json()["created"]}
    # "add" is taken on main: prefixed; "echo" is not.
    assert created == {("tool", "echo", True), ("tool", "up_add", True), ("prompt", "review", True)}
    assert applied["ETag"] == after["ETag"]
    assert after.json()["tools_out_of_sync"] is False and after.json()["tools_fingerprint"]
    echo = Tool.objects.get(name="echo")
    assert list(echo.endpoints.all()) == [main]
    assert echo.history.latest().history_change_reason == "upstream sync"
    assert list(Prompt.objects.get(name="review").endpoints.all()) == [main]
    # The credential by name, never its secret, whatever the route.
    assert after.json()["credential"] == "peer-key"
    assert SECRET not in preview.content.decode() + applied.content.decode()
    assert SECRET not in after.content.decode() + api.get("/api/v1/upstreams/").content.decode()
    assert api.get(f"{url}sync/").json()["tools"]["unchanged"][0]["name"] in {"echo", "up_add"}


def test_a_sync_naming_what_the_upstream_does_not_offer_changes_nothing(
    api: APIClient, server: RunningUpstream
) -> None:
    upstream = create_upstream(api, server.url)

    response = api.post(
        f"/api/v1/upstreams/{upstream['id']}/sync/",
        {"add_tools": ["echo", "nope"], "remove_prompts": ["review"]},
        format="json",
    )

    assert response.status_code == 400, response.content
    assert {(e["path"], e["message"]) for e in response.json()["errors"]} == {
        ("add_tools.1", "'nope' is not among what the preview lists there."),
        ("remove_prompts.0", "'review' is not among what the preview lists there."),
    }
    assert not Tool.objects.exists()
    assert Upstream.objects.get().tools_synced_at is None


def test_an_upstreams_history_is_listed_compared_and_reverted(
    api: APIClient, server: RunningUpstream
) -> None:
    upstream = create_upstream(api, server.url)
    url = f"/api/v1/upstreams/{upstream['id']}/"
    api.post("/api/v1/credentials/", {"name": "other", "kind": "bearer", "secret": "x"})
    edited = api.patch(
        url, {"url": "https://moved.example.com/mcp", "credential": "other"}, format="json"
    )
    assert edited.status_code == 200, edited.content

    versions = api.get(f"{url}history/").json()
    newer, older = versions
    diff = api.get(f"{url}diff/", {"a": newer["history_id"], "b": older["history_id"]})
    reverted = api.post(
        f"{url}revert/", {"history_id": older["history_id"]}, format="json",
        HTTP_IF_MATCH=edited["ETag"],
    )  # fmt: skip
    missing = api.post(f"{url}revert/", {"history_id": 10**9}, format="json")

    assert [(v["history_type"], v["source"], v["user"]) for v in versions] == [
        ("~", "api", "robot"),
        ("+", "api", "robot"),
    ]
    assert {c["field"]: (c["old"], c["new"]) for c in diff.json()["changes"]} == {
        "url": (server.url, "https://moved.example.com/mcp"),
        "credential": ("peer-key", "other"),
    }
    assert reverted.status_code == 200, reverted.content
    assert (reverted.json()["url"], reverted.json()["credential"]) == (server.url, "peer-key")
    assert reverted["ETag"] == api.get(url)["ETag"]
    assert missing.status_code == 400
    assert missing.json()["errors"][0]["path"] == "history_id"
    assert SECRET not in str(versions) + diff.content.decode()
    assert Credential.objects.get(name="peer-key").secret_encrypted not in diff.content.decode()


def test_a_revert_to_a_tool_calling_a_deleted_upstream_is_refused(api: APIClient) -> None:
    for name in ("gone", "kept"):
        Upstream.objects.create(name=name, url=f"https://{name}.example.com/mcp")
    created = api.post(
        "/api/v1/tools/",
        {"name": "remote", "description": "Remote.", "kind": "mcp_upstream",
         "config": {"upstream": "gone", "tool": "echo"}},
        format="json",
    )  # fmt: skip
    assert created.status_code == 201, created.content
    tool = Tool.objects.get()
    first = tool.history.latest().history_id
    api.patch(f"/api/v1/tools/{tool.pk}/", {"config": {"upstream": "kept"}}, format="json")
    Upstream.objects.filter(name="gone").delete()
    versions = tool.history.count()

    response = api.post(f"/api/v1/tools/{tool.pk}/revert/", {"history_id": first}, format="json")

    assert response.status_code == 400, response.content
    assert response.json()["errors"] == [
        {
            "path": "config",
            "message": "Cannot revert to this version: the upstream 'gone' it calls no longer "
            "exists. Nothing was changed.",
            "code": "invalid",
        }
    ]
    tool.refresh_from_db()
    assert tool.config == {"upstream": "kept"}
    assert tool.history.count() == versions


def test_a_tools_description_is_reverted_with_a_version_of_its_own(
    api: APIClient, main: Endpoint
) -> None:
    tool = tool_create(
        name="echo", kind="python", config={"function": "echo"}, description="First.",
        endpoints=[main],
    )  # fmt: skip
    first = tool.history.latest().history_id
    api.patch(f"/api/v1/tools/{tool.pk}/", {"description": "Second."}, format="json")

    stale = api.post(
        f"/api/v1/tools/{tool.pk}/revert/", {"history_id": first}, format="json",
        HTTP_IF_MATCH='"stale"',
    )  # fmt: skip
    assert stale.status_code == 412
    assert Tool.objects.get(pk=tool.pk).description == "Second."
    reverted = api.post(f"/api/v1/tools/{tool.pk}/revert/", {"history_id": first}, format="json")

    assert reverted.status_code == 200, reverted.content
    assert (reverted.json()["description"], reverted.json()["endpoints"]) == ("First.", ["main"])
    latest = tool.history.latest()
    assert (latest.description, latest.history_change_reason) == ("First.", "api")


def test_a_resource_the_upstream_changed_is_previewed_by_field_and_updated(
    api: APIClient, server: RunningUpstream
) -> None:
    upstream = create_upstream(api, server.url)
    url = f"/api/v1/upstreams/{upstream['id']}/"
    imported = api.post(f"{url}sync/", {"add_resources": ["up://readme"]}, format="json")
    assert imported.status_code == 200, imported.content
    # As if the upstream had reworded it since: ours and what the sync took hold older words.
    row = Upstream.objects.get()
    synced = row.synced_items
    synced["resources"]["up://readme"]["description"] = "Old words."
    Upstream.objects.filter(pk=row.pk).update(synced_items=synced)
    Resource.objects.filter(uri="up://readme").update(description="Old words.")

    preview = api.get(f"{url}sync/").json()["resources"]["changed"]
    applied = api.post(f"{url}sync/", {"update_resources": ["up://readme"]}, format="json")

    assert [(entry["uri"], entry["fields"]) for entry in preview] == [
        ("up://readme", {"description": {"ours": "Old words.", "theirs": "The upstream's readme."}})
    ]
    assert applied.status_code == 200, applied.content
    assert Resource.objects.get(uri="up://readme").description == "The upstream's readme."
    readme = Resource.objects.get(uri="up://readme").history.latest()
    assert (readme.history_change_reason, readme.history_user.username) == (
        "upstream sync",
        "robot",
    )
