"""Drafts in the admin (issue #32): "Save as draft" on each catalog form makes a draft and
leaves the live row alone; a draft's page shows its diff and runs Check, Approve, Publish and
Discard through the service, reporting its refusals and changing nothing then; who may do what
(view only, the author, another team, no approve permission); and an endpoint that requires
review refuses a direct save as a form error."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from django import forms
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from mcp_app.models import Draft, Endpoint, Prompt, Resource, ResourceTemplate, Tool
from mcp_app.services import catalog_writes, catalog_yaml
from mcp_app.services.drafts import draft_create, draft_diff, live_entry
from tests.support.admin_forms import tool_form
from tests.support.teams import World, make_member, two_teams

pytestmark = pytest.mark.django_db

# Admin model name -> the team row attribute and the row's model.
KINDS = {
    "tool": ("tool", Tool),
    "resource": ("resource", Resource),
    "resourcetemplate": ("template", ResourceTemplate),
    "prompt": ("prompt", Prompt),
    "endpoint": ("endpoint", Endpoint),
}


@pytest.fixture
def world(db: None) -> World:
    return two_teams()


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def form_post(response: Any) -> dict[str, Any]:
    """The change form of ``response`` as a browser submits it untouched (inlines too)."""
    assert response.status_code == 200
    shown: list[forms.BaseForm] = [response.context["adminform"].form]
    for inline in response.context["inline_admin_formsets"]:
        shown.append(inline.formset.management_form)
        shown.extend(inline.formset.forms)
    data: dict[str, Any] = {}
    for form in shown:
        for bound in form:
            widget, value = bound.field.widget, bound.value()
            if isinstance(widget, forms.CheckboxInput):
                if widget.check_test(value):
                    data[bound.html_name] = "on"
            elif isinstance(widget, forms.FileInput):
                continue
            elif isinstance(value, list | tuple):
                data[bound.html_name] = [str(getattr(item, "pk", item)) for item in value]
            else:
                data[bound.html_name] = "" if value is None else str(value)
    return data


def change_url(model: str, pk: int) -> str:
    return reverse(f"admin:mcp_app_{model}_change", args=[pk])


def draft_url(draft: Draft) -> str:
    return reverse("admin:mcp_app_draft_change", args=[draft.pk])


def said(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def act(client: Client, draft: Draft, action: str, **fields: str) -> Any:
    """Press a button of the draft's page, and follow to the page it shows next."""
    return client.post(draft_url(draft), {"action": action, **fields}, follow=True)


def tool_draft(world: World, title: str = "Reword", **changes: Any) -> Draft:
    entry = live_entry("tools", "alpha-tool", user=world.alpha.member)
    assert entry is not None
    document = {"format": "mcphost-catalog/1", "tools": [{**entry, **changes}]}
    return draft_create(title=title, document=document, actor=world.alpha.member)


def require_review(world: World) -> None:
    endpoint = world.alpha.endpoint
    endpoint.require_review = True
    catalog_writes.catalog_row_save(endpoint, actor=world.alpha.member, source="admin")


# ------------------------------------------------------------------------- save as draft


@pytest.mark.parametrize("model", KINDS)
def test_save_as_draft_makes_a_draft_and_leaves_the_live_row(world: World, model: str) -> None:
    attribute, row_model = KINDS[model]
    row = getattr(world.alpha, attribute)
    before = row_model.objects.get(pk=row.pk).description
    client = signed_in(world.alpha.member)
    data = form_post(client.get(change_url(model, row.pk)))
    data.update(description="Drafted in the admin.", _save_draft="Save as draft")

    response = client.post(change_url(model, row.pk), data)

    draft = Draft.objects.get()
    assert response.status_code == 302 and response["Location"] == draft_url(draft)
    assert row_model.objects.get(pk=row.pk).description == before
    (diff,) = draft_diff(draft, user=world.alpha.member)
    assert [(field.name, field.draft) for field in diff.fields] == [
        ("description", "Drafted in the admin.")
    ]
    assert draft.author == world.alpha.member and draft.team == world.alpha.group
    assert draft.title.startswith("Edit ")
    page = client.get(response["Location"])
    assert "Drafted in the admin." in page.text and escape(before) in page.text


def test_save_as_draft_carries_a_kinds_config_and_an_uploaded_file(world: World) -> None:
    client = signed_in(world.alpha.member)
    tool = world.alpha.tool
    data = form_post(client.get(change_url("tool", tool.pk)))
    data.update(kind="template", template="About now.", _save_draft="Save as draft")
    response = client.post(change_url("tool", tool.pk), data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    resource = world.alpha.resource
    data = form_post(client.get(change_url("resource", resource.pk)))
    data.update(text="", file=SimpleUploadedFile("notes.txt", b"from a file"))
    data["_save_draft"] = "Save as draft"
    response = client.post(change_url("resource", resource.pk), data)
    assert response.status_code == 302, response.context["adminform"].form.errors

    tool_draft_row, resource_draft = Draft.objects.order_by("pk")
    (entry,) = tool_draft_row.document["tools"]
    assert (entry["kind"], entry["config"]["template"]) == ("template", "About now.")
    (entry,) = resource_draft.document["resources"]
    assert (entry["text"], entry["file"]["name"]) == ("", "notes.txt")
    assert base64.b64decode(entry["file"]["base64"]) == b"from a file"
    tool.refresh_from_db()
    resource.refresh_from_db()
    assert (tool.kind, resource.text, bool(resource.file)) == ("python", "hello", False)


def test_save_as_draft_needs_the_add_draft_permission(world: World) -> None:
    member = world.alpha.member
    member.user_permissions.remove(Permission.objects.get(codename="add_draft"))
    client = signed_in(member)
    page = client.get(change_url("tool", world.alpha.tool.pk))
    assert 'name="_save_draft"' not in page.text
    data = form_post(page)
    data.update(description="Sneaked.", _save_draft="Save as draft")

    assert client.post(change_url("tool", world.alpha.tool.pk), data).status_code == 403
    assert not Draft.objects.exists()


def test_save_as_draft_of_a_new_tool_creates_nothing_live(world: World) -> None:
    client = signed_in(world.alpha.member)
    data = {
        **tool_form(world.alpha.endpoint.pk),
        "team": str(world.alpha.group.pk),
        "_save_draft": "Save as draft",
    }

    response = client.post(reverse("admin:mcp_app_tool_add"), data)

    draft = Draft.objects.get()
    assert response["Location"] == draft_url(draft)
    assert not Tool.objects.filter(name="shout").exists()
    (entry,) = draft.document["tools"]
    assert (entry["name"], entry["endpoints"], entry["team"]) == (
        "shout",
        ["alpha-endpoint"],
        "alpha",
    )
    page = client.get(draft_url(draft))
    assert "tool shout" in page.text and "create" in page.text


def test_save_as_draft_of_an_endpoints_membership_drafts_its_items(world: World) -> None:
    endpoint = world.alpha.endpoint
    client = signed_in(world.alpha.member)
    data = form_post(client.get(change_url("endpoint", endpoint.pk)))
    data.update(tools=[], _save_draft="Save as draft")

    client.post(change_url("endpoint", endpoint.pk), data)

    draft = Draft.objects.get()
    (entry,) = draft.document["tools"]
    assert (entry["name"], entry["endpoints"]) == ("alpha-tool", [])
    assert list(world.alpha.tool.endpoints.all()) == [endpoint]


def test_save_as_draft_keeps_the_form_and_says_why_when_refused(world: World) -> None:
    tool = world.alpha.tool
    client = signed_in(world.alpha.member)
    data = form_post(client.get(change_url("tool", tool.pk)))
    bad_schema = '{"type": "object", "properties": {"x": {"type": 7}}}'
    data.update(input_schema=bad_schema, _save_draft="Save as draft")
    response = client.post(change_url("tool", tool.pk), data)
    assert response.status_code == 200
    assert response.context["adminform"].form.errors
    assert not Draft.objects.exists()

    data = form_post(client.get(change_url("tool", tool.pk)))
    data.update(name="renamed", _save_draft="Save as draft")
    response = client.post(change_url("tool", tool.pk), data)
    assert "A draft cannot change the name" in str(response.context["adminform"].form.errors)
    assert not Draft.objects.exists()


def test_save_as_draft_takes_a_prompts_arguments_and_messages(world: World) -> None:
    """The inline edits of a prompt's arguments and messages are in the draft; the live
    prompt keeps its parts until the draft is published, which applies them."""
    prompt = world.alpha.prompt
    client = signed_in(world.alpha.member)
    page = client.get(change_url("prompt", prompt.pk))
    assert "its arguments and messages as edited below" in page.text
    data = form_post(page)
    data.update(
        {
            "messages-0-text": "Tell me about {{ topic }}.",
            "arguments-TOTAL_FORMS": "1",
            "arguments-0-id": "",
            "arguments-0-prompt": str(prompt.pk),
            "arguments-0-position": "0",
            "arguments-0-name": "topic",
            "arguments-0-description": "What to talk about.",
            "arguments-0-required": "on",
            "arguments-0-title": "",
            "arguments-0-completion_values": "",
            "_save_draft": "Save as draft",
        }
    )

    response = client.post(change_url("prompt", prompt.pk), data)

    draft = Draft.objects.get()
    assert response.status_code == 302 and response["Location"] == draft_url(draft)
    (entry,) = draft.document["prompts"]
    assert entry["arguments"] == [
        {
            "name": "topic",
            "title": "",
            "description": "What to talk about.",
            "required": True,
            "completion_values": "",
        }
    ]
    assert [message["text"] for message in entry["messages"]] == ["Tell me about {{ topic }}."]
    (diff,) = draft_diff(draft, user=world.alpha.member)
    assert sorted(field.name for field in diff.fields) == ["arguments", "messages"]
    live = Prompt.objects.get(pk=prompt.pk)
    assert not live.arguments.exists()
    assert list(live.messages.values_list("text", flat=True)) == ["hi"]

    published = act(client, draft, "publish")

    assert any("published" in message for message in said(published)), said(published)
    live = Prompt.objects.get(pk=prompt.pk)
    assert list(live.arguments.values_list("name", "required")) == [("topic", True)]
    assert list(live.messages.values_list("text", flat=True)) == ["Tell me about {{ topic }}."]


def test_save_as_draft_with_an_invalid_prompt_argument_makes_no_draft(world: World) -> None:
    prompt = world.alpha.prompt
    client = signed_in(world.alpha.member)
    data = form_post(client.get(change_url("prompt", prompt.pk)))
    data.update(
        {
            "arguments-TOTAL_FORMS": "1",
            "arguments-0-id": "",
            "arguments-0-prompt": str(prompt.pk),
            "arguments-0-position": "0",
            "arguments-0-name": "not a name!",
            "_save_draft": "Save as draft",
        }
    )

    response = client.post(change_url("prompt", prompt.pk), data)

    assert response.status_code == 200
    assert response.context["inline_admin_formsets"][0].formset.errors[0]["name"]
    assert not Draft.objects.exists()
    assert not Prompt.objects.get(pk=prompt.pk).arguments.exists()


# ------------------------------------------------------------------------------ the page


def test_the_draft_page_shows_each_changed_field_beside_the_live_value(world: World) -> None:
    draft = tool_draft(
        world,
        description="A much longer description " * 20,
        input_schema={"type": "object", "properties": {"when": {"type": "string"}}},
    )
    client = signed_in(world.alpha.member)

    page = client.get(draft_url(draft))

    assert page.status_code == 200
    (entry,) = page.context["entries"]
    assert entry["label"] == "tool alpha-tool" and entry["action"] == "update"
    assert entry["url"] == change_url("tool", world.alpha.tool.pk)
    fields = {field.name: field for field in entry["fields"]}
    assert fields["description"].live == "The alpha team's tool."
    assert fields["input_schema"].draft == (
        '{\n  "type": "object",\n  "properties": {\n    "when": {\n      "type": "string"\n'
        "    }\n  }\n}"
    )
    assert 'data-field="input_schema"' in page.text
    assert "The alpha team&#x27;s tool." in page.text
    for button in ("check", "publish", "discard"):
        assert f'value="{button}"' in page.text
    # The way to see how recorded calls would fare under the draft.
    assert f'href="/audit/replay/{draft.pk}/"' in page.text


def test_a_conflict_is_shown_and_stops_the_publish(world: World) -> None:
    draft = tool_draft(world, description="Drafted.")
    tool = world.alpha.tool
    tool.description = "Changed live meanwhile."
    tool.title = "Also live"
    catalog_writes.catalog_row_save(tool, actor=world.alpha.member, source="admin")
    client = signed_in(world.alpha.member)

    page = client.get(draft_url(draft))
    assert page.context["conflicts"]
    assert "mcp-draft-conflict" in page.text
    assert "description was changed live since the draft was made" in page.text
    assert "Changed live since the draft was made (publishing keeps the live values): title" in (
        page.text
    )

    response = act(client, draft, "publish")

    assert any("description was changed live" in message for message in said(response))
    tool.refresh_from_db()
    assert tool.description == "Changed live meanwhile."
    assert Draft.objects.get(pk=draft.pk).status == Draft.Status.OPEN
    response = act(client, draft, "check")
    assert said(response)[0] == "Publishing now would be refused:"


def test_check_then_publish_makes_the_draft_live(world: World) -> None:
    draft = tool_draft(world, description="Published from the admin.")
    client = signed_in(world.alpha.member)

    response = act(client, draft, "check")
    assert said(response) == ["Publishing now would: update tools alpha-tool (description)."]
    world.alpha.tool.refresh_from_db()
    assert world.alpha.tool.description == "The alpha team's tool."

    response = act(client, draft, "publish")

    assert said(response) == [
        f"Draft #{draft.pk} published: update tools alpha-tool (description)."
    ]
    world.alpha.tool.refresh_from_db()
    assert world.alpha.tool.description == "Published from the admin."
    draft.refresh_from_db()
    assert draft.status == Draft.Status.PUBLISHED and draft.published_by == world.alpha.member
    page = client.get(draft_url(draft))
    assert 'value="publish"' not in page.text and "Published" in page.text


def test_discard_closes_the_draft(world: World) -> None:
    draft = tool_draft(world, description="Never.")
    client = signed_in(world.alpha.member)

    act(client, draft, "discard")

    assert Draft.objects.get(pk=draft.pk).status == Draft.Status.DISCARDED
    response = act(client, draft, "publish")
    assert f"Draft #{draft.pk} is discarded: it cannot change." in said(response)
    world.alpha.tool.refresh_from_db()
    assert world.alpha.tool.description == "The alpha team's tool."


def test_the_title_and_document_are_edited_and_checked(world: World) -> None:
    draft = tool_draft(world, description="First.")
    client = signed_in(world.alpha.member)
    page = client.get(draft_url(draft))
    text = page.context["document_text"]
    assert "description: First." in text

    response = act(client, draft, "save", title="Better", document="{not: [valid")
    assert not response.redirect_chain
    assert any("not valid" in message for message in said(response))
    assert response.context["document_text"] == "{not: [valid"
    bad = text.replace("type: object", "type: 7", 1)
    response = act(client, draft, "save", title="B", document=bad)
    assert not response.redirect_chain and "The draft was not saved:" in said(response)
    draft.refresh_from_db()
    assert (draft.title, draft.document["tools"][0]["description"]) == ("Reword", "First.")

    edited = text.replace("description: First.", "description: Second.")
    response = act(client, draft, "save", title="Better", document=edited)

    assert response.redirect_chain
    draft.refresh_from_db()
    assert (draft.title, draft.document["tools"][0]["description"]) == ("Better", "Second.")


@pytest.mark.parametrize("key", ["name", "pr\u00e9nom"])
def test_a_drafts_document_is_shown_as_pyyaml_writes_it(world: World, key: str) -> None:
    # The page writes the stored document (jsonb's key order, not an export's: tools before
    # format) with the export's writer: PyYAML's bytes for folded and non-ASCII text,
    # numbers, a block that keeps its blank lines (the endpoint's block after it closes the
    # document again), an entry with a non-ASCII key (left to PyYAML whole).
    schema = {
        "type": "object",
        "properties": {
            key: {"type": "string", "description": "Line one.\nLine two.\n\n"},
            "ratio": {"type": "number", "minimum": 0.5, "maximum": 1e300},
        },
    }
    draft = tool_draft(world, description="Grüße — " + "folds " * 30, input_schema=schema)
    draft.refresh_from_db()

    text = signed_in(world.alpha.member).get(draft_url(draft)).context["document_text"]

    assert text == catalog_yaml.dump(draft.document)
    assert "description: |+\n" in text and text.index("tools:") < text.index("format:")


def test_publish_selected_drafts_together_is_one_change_set(world: World) -> None:
    first = tool_draft(world, title="One", description="One.")
    prompt = live_entry("prompts", "alpha-prompt", user=world.alpha.member)
    assert prompt is not None
    second = draft_create(
        title="Two",
        document={"format": "mcphost-catalog/1", "prompts": [{**prompt, "title": "P"}]},
        actor=world.alpha.member,
    )
    client = signed_in(world.alpha.member)
    listing = client.get(reverse("admin:mcp_app_draft_changelist"))
    assert {draft.pk for draft in listing.context["cl"].result_list} == {first.pk, second.pk}

    client.post(
        reverse("admin:mcp_app_draft_changelist"),
        {"action": "publish_together", "_selected_action": [first.pk, second.pk]},
    )

    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == second.status == Draft.Status.PUBLISHED
    assert first.change_set is not None and first.change_set == second.change_set


# --------------------------------------------------------------------------- who may


def test_a_view_only_user_sees_the_draft_but_cannot_publish_or_approve(world: World) -> None:
    draft = tool_draft(world, description="Drafted.")
    viewer = User.objects.create_user("alpha-viewer", password="unused-password-123", is_staff=True)
    viewer.groups.add(world.alpha.group)
    viewer.user_permissions.set(
        Permission.objects.filter(codename__in=["view_draft", "view_tool", "view_endpoint"])
    )
    client = signed_in(viewer)

    page = client.get(draft_url(draft))
    assert page.status_code == 200
    assert 'value="publish"' not in page.text and 'value="approve"' not in page.text

    assert client.post(draft_url(draft), {"action": "publish"}).status_code == 403
    assert client.post(draft_url(draft), {"action": "discard"}).status_code == 403
    response = act(client, draft, "approve")
    assert any("approve" in message for message in said(response))
    draft.refresh_from_db()
    assert draft.status == Draft.Status.OPEN and draft.approved_by is None


def test_the_author_cannot_approve_their_own_draft(world: World) -> None:
    require_review(world)
    draft = tool_draft(world, description="Reviewed.")
    client = signed_in(world.alpha.member)

    page = client.get(draft_url(draft))
    assert 'value="approve"' not in page.text
    assert "requires review" in page.text

    response = act(client, draft, "approve")

    assert "A draft is approved by another user than its author." in said(response)
    assert Draft.objects.get(pk=draft.pk).approved_by is None
    response = act(client, draft, "publish")
    assert any("requires review" in message for message in said(response))
    world.alpha.tool.refresh_from_db()
    assert world.alpha.tool.description == "The alpha team's tool."


def test_another_user_approves_and_the_author_publishes(world: World) -> None:
    require_review(world)
    draft = tool_draft(world, description="Reviewed.")
    approver = make_member("alpha-approver", world.alpha.group)
    client = signed_in(approver)
    assert 'value="approve"' in client.get(draft_url(draft)).text

    response = act(client, draft, "approve")

    assert said(response) == [f"You approved draft #{draft.pk} as it stands."]
    page = client.get(draft_url(draft))
    assert 'value="approve"' not in page.text and "approved by alpha-approver" in page.text
    signed_in(world.alpha.member).post(draft_url(draft), {"action": "publish"})
    world.alpha.tool.refresh_from_db()
    assert world.alpha.tool.description == "Reviewed."


def test_without_the_approve_permission_no_button_and_a_forged_post_is_refused(
    world: World,
) -> None:
    require_review(world)
    draft = tool_draft(world, description="Reviewed.")
    other = make_member("alpha-other", world.alpha.group)
    other.user_permissions.remove(Permission.objects.get(codename="approve_draft"))
    client = signed_in(other)

    assert 'value="approve"' not in client.get(draft_url(draft)).text
    response = act(client, draft, "approve")

    assert any("needs the permission" in message for message in said(response))
    assert Draft.objects.get(pk=draft.pk).approved_by is None


def test_another_teams_member_gets_not_found(world: World) -> None:
    draft = tool_draft(world, description="Alpha's.")
    client = signed_in(world.beta.member)

    assert client.get(draft_url(draft)).status_code == 404
    assert client.post(draft_url(draft), {"action": "publish"}).status_code == 404
    listing = client.get(reverse("admin:mcp_app_draft_changelist"))
    assert list(listing.context["cl"].result_list) == []
    client.post(
        reverse("admin:mcp_app_draft_changelist"),
        {"action": "publish_together", "_selected_action": [draft.pk]},
    )
    assert Draft.objects.get(pk=draft.pk).status == Draft.Status.OPEN
    world.alpha.tool.refresh_from_db()
    assert world.alpha.tool.description == "The alpha team's tool."


# ------------------------------------------------------------------------------ review


def test_a_reviewed_endpoints_row_refuses_a_direct_save_as_a_form_error(world: World) -> None:
    require_review(world)
    tool = world.alpha.tool
    client = signed_in(world.alpha.member)
    page = client.get(change_url("tool", tool.pk))
    assert 'id="review-banner"' in page.text and 'name="_save_draft"' in page.text
    data = form_post(page)
    data.update(description="Direct.", _save="Save")

    response = client.post(change_url("tool", tool.pk), data)

    assert response.status_code == 200
    assert "requires review" in str(response.context["adminform"].form.non_field_errors())
    tool.refresh_from_db()
    assert tool.description == "The alpha team's tool."

    data.pop("_save")
    data["_save_draft"] = "Save as draft"
    response = client.post(change_url("tool", tool.pk), data)
    assert response.status_code == 302
    assert Draft.objects.get().document["tools"][0]["description"] == "Direct."


def test_a_reviewed_endpoints_row_refuses_a_list_edit_and_a_delete_without_an_error(
    world: World,
) -> None:
    require_review(world)
    tool = world.alpha.tool
    client = signed_in(world.alpha.member)
    listing = reverse("admin:mcp_app_tool_changelist")
    edit = {
        "form-TOTAL_FORMS": "1",
        "form-INITIAL_FORMS": "1",
        "form-0-id": str(tool.pk),
        "_save": "Save",
    }  # Enabled unticked

    response = client.post(listing, edit)

    assert response.status_code == 200
    assert "requires review" in str(response.context["cl"].formset.errors)
    tool.refresh_from_db()
    assert tool.enabled

    delete = reverse("admin:mcp_app_tool_delete", args=[tool.pk])
    response = client.post(delete, {"post": "yes"})
    assert response.status_code == 200 and "requires review" in response.text
    response = client.post(
        listing,
        {"action": "delete_selected", "_selected_action": [tool.pk], "post": "yes"},
    )
    assert response.status_code == 200 and "requires review" in response.text
    assert Tool.objects.filter(pk=tool.pk).exists()
