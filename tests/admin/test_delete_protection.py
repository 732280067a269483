"""The admin refuses to delete rows that others use (``services.references``): the delete
page and the "delete selected" action name the users and delete nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from django.utils.html import strip_tags

from mcp_app.models import Credential, Endpoint, Upstream
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from mcp_app.services.credentials import credential_create
from mcp_app.services.sessions import session_open

pytestmark = pytest.mark.django_db


def _text(response: object) -> str:
    return " ".join(strip_tags(response.content.decode()).split())  # type: ignore[attr-defined]


def _upstream(name: str, **fields: object) -> Upstream:
    return Upstream.objects.create(name=name, url=f"https://{name}.example.com/mcp", **fields)


def test_the_delete_page_names_the_tool_using_a_credential(admin_client: Client) -> None:
    github = credential_create(name="github", kind="bearer", secret="s3cret-token-value")
    repos = tool_create(
        name="repos",
        kind="http",
        config={"method": "GET", "url": "https://api.example.com/repos", "credential": "github"},
        description="Lists repos.",
    )
    url = reverse("admin:mcp_app_credential_delete", args=[github.pk])

    page = admin_client.get(url)
    posted = admin_client.post(url, {"post": "yes"})

    assert page.status_code == 200
    assert "cannot be deleted" in _text(page)
    assert "Tool “repos” uses the credential “github” (config.credential)" in _text(page)
    assert reverse("admin:mcp_app_tool_change", args=[repos.pk]) in page.content.decode()
    assert "Yes, I’m sure" not in page.content.decode()
    assert posted.status_code == 200
    assert Credential.objects.filter(pk=github.pk).exists()


def test_delete_selected_deletes_none_when_one_is_in_use(admin_client: Client) -> None:
    used, unused = _upstream("peer"), _upstream("idle")
    tool_create(
        name="peer_echo",
        kind="mcp_upstream",
        config={"upstream": "peer", "tool": "echo"},
        description="The peer's echo.",
    )
    changelist = reverse("admin:mcp_app_upstream_changelist")
    selection = {"action": "delete_selected", "_selected_action": [used.pk, unused.pk]}

    page = admin_client.post(changelist, selection)
    confirmed = admin_client.post(changelist, {**selection, "post": "yes"})

    assert page.status_code == 200
    assert "cannot be deleted" in _text(page)
    assert "Tool “peer_echo” uses the upstream “peer” (config.upstream)" in _text(page)
    assert confirmed.status_code == 200
    assert set(Upstream.objects.values_list("name", flat=True)) == {"peer", "idle"}
    # Alone, the unused one is deleted as usual.
    alone = {"action": "delete_selected", "_selected_action": [unused.pk], "post": "yes"}
    assert admin_client.post(changelist, alone).status_code == 302
    assert set(Upstream.objects.values_list("name", flat=True)) == {"peer"}


def test_an_enabled_endpoint_with_a_live_session_is_kept_until_disabled(
    admin_client: Client,
) -> None:
    endpoint = endpoint_create(slug="busy", auth_mode=Endpoint.AuthMode.PUBLIC)
    session_open(
        endpoint_id=endpoint.pk,
        protocol_version="2025-06-18",
        client_capabilities={},
        client_info={"name": "inspector", "version": "1.0"},
    )
    url = reverse("admin:mcp_app_endpoint_delete", args=[endpoint.pk])

    page = admin_client.get(url)
    admin_client.post(url, {"post": "yes"})

    assert "Session “inspector 1.0” uses the endpoint “busy” (live session)" in _text(page)
    assert Endpoint.objects.filter(pk=endpoint.pk).exists()
    Endpoint.objects.filter(pk=endpoint.pk).update(enabled=False)
    assert admin_client.post(url, {"post": "yes"}).status_code == 302
    assert not Endpoint.objects.filter(pk=endpoint.pk).exists()


def test_a_group_catalog_rows_allow_is_not_deleted(admin_client: Client) -> None:
    staff, spare = Group.objects.create(name="staff"), Group.objects.create(name="spare")
    tool = tool_create(
        name="echo", kind="python", config={"function": "echo"}, description="Echoes."
    )
    tool.allowed_groups.add(staff)

    page = admin_client.get(reverse("admin:auth_group_delete", args=[staff.pk]))
    admin_client.post(reverse("admin:auth_group_delete", args=[staff.pk]), {"post": "yes"})
    spared = admin_client.post(reverse("admin:auth_group_delete", args=[spare.pk]), {"post": "yes"})

    assert "Tool “echo” uses the group “staff” (allowed_groups)" in _text(page)
    assert Group.objects.filter(pk=staff.pk).exists()
    assert list(tool.allowed_groups.all()) == [staff]
    assert spared.status_code == 302
    assert not Group.objects.filter(pk=spare.pk).exists()
