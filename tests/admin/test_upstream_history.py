"""Upstream rows in the catalog history (issue #26): their URL and credential changes versioned,
compared and reverted in the admin, never a secret or the health in a version; a revert that
would leave a tool calling an upstream that is gone refused; an imported prompt reverted with
its arguments."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from mcp_app.models import Credential, Prompt, Tool, Upstream
from mcp_app.services.credentials import credential_create
from mcp_app.services.upstream_sync import UpstreamOffer, upstream_items_apply
from tests.admin.conftest import tool_payload
from tests.admin.test_history_admin import dump_history_tables
from tests.support.admin_forms import upstream_form

pytestmark = pytest.mark.django_db
SECRETS = ("first-s3cret-8841", "second-s3cret-8842")


def upstream_payload(**overrides: Any) -> dict[str, Any]:
    """The upstream change form as a browser posts it."""
    return upstream_form(**overrides)


def test_url_and_credential_changes_are_versioned_compared_and_reverted(
    admin_client: Client,
) -> None:
    first = credential_create(name="first", kind="bearer", secret=SECRETS[0])
    second = credential_create(name="second", kind="bearer", secret=SECRETS[1])
    added = admin_client.post(
        reverse("admin:mcp_app_upstream_add"), upstream_payload(credential=str(first.pk))
    )
    assert added.status_code == 302, added.context and added.context["errors"]
    peer = Upstream.objects.get(name="peer")
    change = reverse("admin:mcp_app_upstream_change", args=[peer.pk])
    edited = admin_client.post(
        change,
        upstream_payload(url="https://moved.example.com/mcp", credential=str(second.pk)),
    )
    assert edited.status_code == 302, edited.context and edited.context["errors"]
    # Health the site records is no version.
    Upstream.objects.filter(pk=peer.pk).update(last_error="down", last_error_at=timezone.now())
    older, newer = peer.history.order_by("history_id")
    assert peer.history.count() == 2

    page = admin_client.get(reverse("admin:mcp_app_upstream_history", args=[peer.pk]))
    diff = admin_client.get(
        reverse("admin:mcp_app_upstream_history_compare", args=[peer.pk]),
        {"a": older.history_id, "b": newer.history_id},
    )
    reverted = admin_client.post(
        reverse("admin:mcp_app_upstream_simple_history", args=[peer.pk, older.history_id]),
        upstream_payload(credential=str(first.pk)),
    )

    assert page.status_code == 200 and 'id="history-compare"' in page.content.decode()
    changes = {change.field: (change.old, change.new) for change in diff.context["changes"]}
    assert changes == {
        "url": ("https://peer.example.com/mcp", "https://moved.example.com/mcp"),
        "credential": ("first", "second"),
    }
    assert reverted.status_code == 302, reverted.context and reverted.context["errors"]
    peer.refresh_from_db()
    assert (peer.url, peer.credential, peer.last_error) == (
        "https://peer.example.com/mcp",
        first,
        "down",
    )
    assert peer.history.latest().history_change_reason == "admin"
    dumped = dump_history_tables()
    encrypted = Credential.objects.values_list("secret_encrypted", flat=True)
    for secret in (*SECRETS, *encrypted):
        assert secret not in dumped
    assert "last_error" not in {f.name for f in Upstream.history.model._meta.fields}


def test_a_revert_to_a_tool_calling_a_deleted_upstream_is_refused(
    admin_client: Client,
) -> None:
    for name in ("gone", "kept"):
        Upstream.objects.create(name=name, url=f"https://{name}.example.com/mcp")
    tool = Tool(
        name="remote", description="Remote.", kind=Tool.Kind.MCP_UPSTREAM,
        config={"upstream": "gone", "tool": "echo"},
    )  # fmt: skip
    tool.full_clean()
    tool.save()
    first = tool.history.latest().history_id
    tool.config = {"upstream": "kept", "tool": "echo"}
    tool.save()
    Upstream.objects.filter(name="gone").delete()
    versions = tool.history.count()
    page = reverse("admin:mcp_app_tool_simple_history", args=[tool.pk, first])

    shown = admin_client.get(page)
    posted = admin_client.post(
        page,
        tool_payload(
            name="remote", kind="mcp_upstream", template="", upstream_name="gone",
            upstream_tool="echo",
        ),
    )  # fmt: skip

    history_page = reverse("admin:mcp_app_tool_history", args=[tool.pk])
    assert (shown.status_code, shown["Location"]) == (302, history_page)
    assert (posted.status_code, posted["Location"]) == (302, history_page)
    [message] = {str(m) for m in get_messages(posted.wsgi_request)}
    assert message == (
        "Cannot revert to this version: the upstream 'gone' it calls no longer exists. "
        "Nothing was changed."
    )
    tool.refresh_from_db()
    assert tool.config == {"upstream": "kept", "tool": "echo"}
    assert tool.history.count() == versions


def test_reverting_an_imported_prompt_keeps_its_arguments(admin_client: Client) -> None:
    peer = Upstream.objects.create(name="peer", url="https://peer.example.com/mcp")
    review = {"name": "review", "arguments": [{"name": "code", "required": True}]}
    upstream_items_apply(
        peer,
        UpstreamOffer(prompts=[review]),
        add_resources=set(), remove_resources=set(), add_templates=set(),
        remove_templates=set(), add_prompts={"review"}, update_prompts=set(),
        remove_prompts=set(),
    )  # fmt: skip
    prompt = Prompt.objects.get(name="review")
    first = prompt.history.latest().history_id
    prompt.description = "Edited later."
    prompt.save()

    response = admin_client.post(
        reverse("admin:mcp_app_prompt_simple_history", args=[prompt.pk, first]),
        {"name": "review", "title": "", "description": "The prompt review of an upstream MCP "
         "server.", "upstream": str(peer.pk), "remote_name": "", "icons": "[]",
         "required_scope": ""},
    )  # fmt: skip

    assert response.status_code == 302, response.context and response.context["errors"]
    prompt.refresh_from_db()
    assert prompt.description == "The prompt review of an upstream MCP server."
    assert [(a.name, a.required) for a in prompt.arguments.all()] == [("code", True)]
