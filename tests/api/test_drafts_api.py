"""Drafts through the management API and catalog import (issue #32).

A draft made through ``/api/v1/drafts/`` changes nothing live and shows its diff beside the
live rows; check, approve, discard and publish answer what the service decides, its refusals
as the API's errors (400 with the messages, 409 with the conflicts); an endpoint that
requires review refuses direct edits through the API and its import with the review message;
and a catalog import, through the API or ``mcp_import --as-draft``, can produce one draft
instead of live rows.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from mcp_app.models import Draft, Endpoint, Prompt, Tool
from mcp_app.services import catalog_writes
from mcp_app.services.api_tokens import api_token_create
from mcp_app.services.catalog_io import catalog_dump, catalog_export
from mcp_app.services.draft_import import PRUNE_REFUSED
from mcp_app.services.drafts import live_entry
from mcp_app.services.review import review_message
from tests.support.teams import World, make_member, two_teams

pytestmark = pytest.mark.django_db

FORMAT = "mcphost-catalog/1"
NEW_SCHEMA = {
    "type": "object",
    "properties": {"zone": {"type": "string"}},
    "required": ["zone"],
}


@pytest.fixture
def world(db: None) -> World:
    return two_teams()


def client_of(user: User) -> APIClient:
    _token, key = api_token_create(user=user, name="ci")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def tool_document(world: World, **changes: Any) -> dict[str, Any]:
    entry = live_entry("tools", "alpha-tool", user=world.alpha.member)
    assert entry is not None
    return {"format": FORMAT, "tools": [{**entry, **changes}]}


def messages(response: Any) -> list[str]:
    return [error["message"] for error in response.json()["errors"]]


def create(client: APIClient, title: str, document: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/api/v1/drafts/", {"title": title, "document": document})
    assert response.status_code == 201, response.content
    body: dict[str, Any] = response.json()
    return body


def test_a_draft_made_through_the_api_changes_nothing_until_published(world: World) -> None:
    client = client_of(world.alpha.member)
    document = tool_document(world, description="Reworded.", input_schema=NEW_SCHEMA)
    live_schema = world.alpha.tool.input_schema

    draft = create(client, "Reword", document)

    assert (draft["status"], draft["team"], draft["endpoints"]) == (
        "open",
        "alpha",
        ["alpha-endpoint"],
    )
    assert (draft["author"], draft["approved"], draft["approved_by"]) == (
        "alpha-member",
        False,
        None,
    )
    (entry,) = draft["diff"]
    assert (entry["section"], entry["key"], entry["action"]) == ("tools", "alpha-tool", "update")
    assert entry["fields"] == [
        {
            "name": "description",
            "live": "The alpha team's tool.",
            "draft": "Reworded.",
            "conflict": False,
        },
        {"name": "input_schema", "live": live_schema, "draft": NEW_SCHEMA, "conflict": False},
    ]
    assert (entry["changed_live"], entry["problem"], entry["conflicts"]) == ([], "", False)
    world.alpha.tool.refresh_from_db()
    assert world.alpha.tool.description == "The alpha team's tool."

    listed = client.get("/api/v1/drafts/", {"status": "open", "endpoint": "alpha-endpoint"})
    assert [row["id"] for row in listed.json()["results"]] == [draft["id"]]
    for query in ({"status": "published"}, {"endpoint": "beta-endpoint"}):
        assert client.get("/api/v1/drafts/", query).json()["results"] == []
    checked = client.post(f"/api/v1/drafts/{draft['id']}/check/")
    assert checked.status_code == 200, checked.content
    assert checked.json() == {
        "dry_run": True,
        "changes": [
            {
                "action": "update",
                "section": "tools",
                "key": "alpha-tool",
                "fields": ["description", "input_schema"],
                "detail": "",
            }
        ],
    }
    world.alpha.tool.refresh_from_db()
    assert world.alpha.tool.description == "The alpha team's tool."

    published = client.post(f"/api/v1/drafts/{draft['id']}/publish/")

    assert published.status_code == 200, published.content
    body = published.json()
    assert [change["key"] for change in body["changes"]] == ["alpha-tool"]
    assert [(row["id"], row["status"], row["published_by"]) for row in body["drafts"]] == [
        (draft["id"], "published", "alpha-member")
    ]
    assert body["change_set"] == body["drafts"][0]["change_set"] is not None
    world.alpha.tool.refresh_from_db()
    assert (world.alpha.tool.description, world.alpha.tool.input_schema) == (
        "Reworded.",
        NEW_SCHEMA,
    )
    again = client.post(f"/api/v1/drafts/{draft['id']}/publish/")
    assert again.status_code == 400
    assert messages(again) == [f"Draft #{draft['id']} is published: it cannot change."]


def test_an_invalid_draft_is_a_400_naming_entry_and_field_and_saves_nothing(
    world: World,
) -> None:
    client = client_of(world.alpha.member)
    bad = tool_document(world, input_schema={"type": "object", "properties": {"x": {"type": 7}}})

    refused = client.post("/api/v1/drafts/", {"title": "Bad", "document": bad})

    assert refused.status_code == 400
    (error,) = refused.json()["errors"]
    assert error["path"] == "document"
    assert error["message"].startswith("tools[0].input_schema")
    for body in (
        {"title": "Bad", "document": [1]},
        {"title": "Bad", "document": {"format": FORMAT}},
        {"title": "Bad", "document": {"format": FORMAT, "upstreams": [{"name": "x"}]}},
        {"document": tool_document(world, title="T")},
    ):
        response = client.post("/api/v1/drafts/", body)
        assert response.status_code == 400, body
    assert not Draft.objects.exists()


def test_an_edit_withdraws_an_approval(world: World) -> None:
    author = client_of(world.alpha.member)
    approver = make_member("alpha-approver", world.alpha.group)
    draft = create(author, "Title", tool_document(world, title="First"))

    approved = client_of(approver).post(f"/api/v1/drafts/{draft['id']}/approve/")

    assert approved.status_code == 200, approved.content
    assert (approved.json()["approved"], approved.json()["approved_by"]) == (
        True,
        "alpha-approver",
    )
    renamed = author.patch(f"/api/v1/drafts/{draft['id']}/", {"title": "Renamed"})
    assert (renamed.json()["title"], renamed.json()["approved"]) == ("Renamed", True)
    edited = author.patch(
        f"/api/v1/drafts/{draft['id']}/", {"document": tool_document(world, title="Second")}
    )
    assert edited.status_code == 200, edited.content
    assert edited.json()["approved"] is False
    assert edited.json()["diff"][0]["fields"][0]["draft"] == "Second"
    assert author.put(f"/api/v1/drafts/{draft['id']}/", {}).status_code == 405
    assert author.delete(f"/api/v1/drafts/{draft['id']}/").status_code == 405


def test_a_conflict_answers_409_listing_it_and_publishes_nothing(world: World) -> None:
    client = client_of(world.alpha.member)
    draft = create(client, "Reword", tool_document(world, description="Drafted."))
    tool = world.alpha.tool
    tool.description = "Changed live meanwhile."
    catalog_writes.catalog_row_save(tool, actor=world.alpha.member, source="admin")

    for route in ("check", "publish"):
        response = client.post(f"/api/v1/drafts/{draft['id']}/{route}/")
        assert response.status_code == 409, response.content
        assert response.json()["type"] == "draft_conflict"
        assert messages(response) == [
            f"Draft #{draft['id']}, tool alpha-tool: description was changed live since the "
            "draft was made; update the draft from the live row."
        ]
    shown = client.get(f"/api/v1/drafts/{draft['id']}/").json()
    assert shown["diff"][0]["fields"][0]["conflict"] is True
    tool.refresh_from_db()
    assert tool.description == "Changed live meanwhile."
    assert Draft.objects.get().status == Draft.Status.OPEN


def test_drafts_published_together_share_one_change_set(world: World) -> None:
    client = client_of(world.alpha.member)
    first = create(client, "Tool", tool_document(world, title="T"))
    prompt = live_entry("prompts", "alpha-prompt", user=world.alpha.member)
    assert prompt is not None
    second = create(client, "Prompt", {"format": FORMAT, "prompts": [{**prompt, "title": "P"}]})
    beta = create(
        client_of(world.beta.member),
        "Beta's",
        {"format": FORMAT, "tools": [{**live_entry("tools", "beta-tool"), "title": "B"}]},  # type: ignore[dict-item]
    )

    for ids, message in (
        ([first["id"], beta["id"]], f"No draft {beta['id']}."),
        ([first["id"], 999999], "No draft 999999."),
    ):
        refused = client.post("/api/v1/drafts/publish/", {"drafts": ids})
        assert refused.status_code == 400
        assert messages(refused) == [message]
    assert client.post("/api/v1/drafts/publish/", {"drafts": []}).status_code == 400
    assert not Draft.objects.filter(status=Draft.Status.PUBLISHED).exists()

    published = client.post("/api/v1/drafts/publish/", {"drafts": [first["id"], second["id"]]})

    assert published.status_code == 200, published.content
    rows = published.json()["drafts"]
    assert [row["id"] for row in rows] == sorted([first["id"], second["id"]])
    assert {row["change_set"] for row in rows} == {published.json()["change_set"]}
    assert Tool.objects.get(name="alpha-tool").title == "T"
    assert Prompt.objects.get(name="alpha-prompt").title == "P"


def test_a_discarded_draft_is_kept_closed(world: World) -> None:
    client = client_of(world.alpha.member)
    draft = create(client, "Drop", tool_document(world, title="X"))

    discarded = client.post(f"/api/v1/drafts/{draft['id']}/discard/")

    assert discarded.status_code == 200
    assert discarded.json()["status"] == "discarded"
    for route in ("publish", "discard"):
        response = client.post(f"/api/v1/drafts/{draft['id']}/{route}/")
        assert response.status_code == 400
        assert messages(response) == [f"Draft #{draft['id']} is discarded: it cannot change."]
    patched = client.patch(f"/api/v1/drafts/{draft['id']}/", {"title": "Again"})
    assert patched.status_code == 400
    assert Tool.objects.get(name="alpha-tool").title != "X"
    assert Draft.objects.get().title == "Drop"


def test_an_endpoint_requiring_review_refuses_direct_api_edits_and_imports(
    world: World,
) -> None:
    member = world.alpha.member
    client = client_of(member)
    endpoint_url = f"/api/v1/endpoints/{world.alpha.endpoint.pk}/"
    assert client.get(endpoint_url).json()["require_review"] is False
    turned_on = client.patch(endpoint_url, {"require_review": True})
    assert turned_on.status_code == 200, turned_on.content
    assert turned_on.json()["require_review"] is True
    refusal = review_message(["alpha-endpoint"])
    document = tool_document(world, description="Direct.")

    for url, body in (
        (f"/api/v1/tools/{world.alpha.tool.pk}/", {"description": "Direct."}),
        (endpoint_url, {"title": "Direct"}),
        (endpoint_url, {"require_review": False}),
    ):
        refused = client.patch(url, body)
        assert refused.status_code == 400, (url, refused.content)
        assert messages(refused) == [refusal]
    exported = catalog_export(endpoint_slugs=["alpha-endpoint"], user=member)
    exported["tools"][0]["description"] = "Direct."
    imported = client.post("/api/v1/catalog/import/", {"document": exported})
    assert imported.status_code == 400, imported.content
    assert refusal in " ".join(messages(imported))
    world.alpha.tool.refresh_from_db()
    assert world.alpha.tool.description == "The alpha team's tool."
    assert Endpoint.objects.get(pk=world.alpha.endpoint.pk).require_review is True

    # The way through: a draft a second user approved.
    draft = create(client, "Reviewed", document)
    unapproved = client.post(f"/api/v1/drafts/{draft['id']}/publish/")
    assert unapproved.status_code == 400
    assert "requires review" in messages(unapproved)[0]
    own = client.post(f"/api/v1/drafts/{draft['id']}/approve/")
    assert (own.status_code, messages(own)) == (
        400,
        ["A draft is approved by another user than its author."],
    )
    approver = make_member("alpha-approver", world.alpha.group)
    assert client_of(approver).post(f"/api/v1/drafts/{draft['id']}/approve/").status_code == 200

    published = client.post(f"/api/v1/drafts/{draft['id']}/publish/")

    assert published.status_code == 200, published.content
    world.alpha.tool.refresh_from_db()
    assert world.alpha.tool.description == "Direct."
    record = world.alpha.tool.history.first()  # type: ignore[attr-defined]
    assert record.history_change_reason == f"draft #{draft['id']} approved by alpha-approver"


def test_an_api_import_as_draft_saves_one_draft_and_changes_nothing(world: World) -> None:
    member = world.alpha.member
    client = client_of(member)
    document = catalog_export(endpoint_slugs=["alpha-endpoint"], user=member)
    (tool,) = document["tools"]
    tool["description"] = "Imported as a draft."

    response = client.post(
        "/api/v1/catalog/import/", {"document": document, "as_draft": True, "title": "From file"}
    )

    assert response.status_code == 201, response.content
    body = response.json()
    draft = Draft.objects.get()
    assert (body["draft"], body["title"]) == (draft.pk, "From file")
    changed = [entry for entry in body["diff"] if entry["action"] != "unchanged"]
    assert [(entry["key"], [f["name"] for f in entry["fields"]]) for entry in changed] == [
        ("alpha-tool", ["description"])
    ]
    assert draft.author == member and draft.team == world.alpha.group
    world.alpha.tool.refresh_from_db()
    assert world.alpha.tool.description == "The alpha team's tool."
    shown = client.get(f"/api/v1/drafts/{draft.pk}/").json()
    assert shown["diff"] == body["diff"]

    for extra, message in (
        ({"prune": True}, PRUNE_REFUSED),
        ({"dry_run": True}, "A draft changes nothing live already"),
    ):
        refused = client.post(
            "/api/v1/catalog/import/", {"document": document, "as_draft": True, **extra}
        )
        assert refused.status_code == 400
        assert messages(refused)[0].startswith(message)
    titled = client.post("/api/v1/catalog/import/", {"document": document, "title": "T"})
    assert titled.status_code == 400
    assert Draft.objects.count() == 1


def test_an_exported_yaml_file_uploaded_as_draft_becomes_one_draft(world: World) -> None:
    member = world.alpha.member
    document = catalog_export(endpoint_slugs=["alpha-endpoint"], user=member)
    document["prompts"][0]["title"] = "From YAML"
    upload = SimpleUploadedFile("alpha.yaml", catalog_dump(document).encode())

    response = client_of(member).post(
        "/api/v1/catalog/import/",
        {"file": upload, "as_draft": "true", "title": "Upload"},
        format="multipart",
    )

    assert response.status_code == 201, response.content
    draft = Draft.objects.get()
    assert (response.json()["draft"], draft.title) == (draft.pk, "Upload")
    assert [
        (entry["key"], entry["fields"][0]["draft"])
        for entry in response.json()["diff"]
        if entry["action"] == "update"
    ] == [("alpha-prompt", "From YAML")]
    assert Prompt.objects.get(name="alpha-prompt").title != "From YAML"


def test_a_reviewer_lacking_import_permissions_cannot_import_as_draft(world: World) -> None:
    """An import as a draft is checked as the user's draft is: their catalog permissions."""
    viewer = User.objects.create_user("viewer", password="unused-password-123")
    viewer.groups.add(world.alpha.group)
    viewer.user_permissions.add(
        *Permission.objects.filter(codename__in=["add_draft", "view_tool", "view_endpoint"])
    )
    document = tool_document(world, description="Not allowed.")

    refused = client_of(viewer).post(
        "/api/v1/catalog/import/", {"document": document, "as_draft": True}
    )

    assert refused.status_code == 403, refused.content
    assert not Draft.objects.exists()


def test_the_import_command_saves_a_draft_the_api_publishes(world: World, tmp_path: Path) -> None:
    path = tmp_path / "catalog.json"
    document = catalog_export(endpoint_slugs=["alpha-endpoint"])
    document["tools"][0]["description"] = "From the shell."
    path.write_text(json.dumps(document))
    out = io.StringIO()

    call_command("mcp_import", str(path), "--as-draft", "--title", "Shell change", stdout=out)

    draft = Draft.objects.get()
    lines = out.getvalue().splitlines()
    assert lines[0] == f"Saved draft #{draft.pk}: Shell change"
    assert "  update tool alpha-tool: description" in lines
    assert lines[-1] == "Nothing is live until the draft is published (admin or API)."
    assert (draft.author, draft.team) == (None, world.alpha.group)
    world.alpha.tool.refresh_from_db()
    assert world.alpha.tool.description == "The alpha team's tool."

    published = client_of(world.alpha.member).post(f"/api/v1/drafts/{draft.pk}/publish/")

    assert published.status_code == 200, published.content
    world.alpha.tool.refresh_from_db()
    assert world.alpha.tool.description == "From the shell."


def test_the_import_command_refuses_prune_and_a_title_alone(world: World, tmp_path: Path) -> None:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(catalog_export(endpoint_slugs=["alpha-endpoint"])))
    err = io.StringIO()

    with pytest.raises(CommandError, match="no draft was saved"):
        call_command("mcp_import", str(path), "--as-draft", "--prune", stderr=err)

    assert err.getvalue().strip() == PRUNE_REFUSED
    with pytest.raises(CommandError, match="--title names a draft"):
        call_command("mcp_import", str(path), "--title", "T")
    with pytest.raises(CommandError, match="no draft was saved"):
        call_command("mcp_import", str(path), "--as-draft", "--title", "x" * 201)
    assert not Draft.objects.exists()
