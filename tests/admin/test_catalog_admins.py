"""Resource, resource template, prompt and session admins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from pytest_django.fixtures import Settings

from mcp_app.models import Endpoint, Prompt, Resource, ResourceTemplate, Session, Upstream


def resource_payload(**overrides: Any) -> dict[str, Any]:
    return {
        "uri": "demo://readme",
        "name": "readme",
        "title": "",
        "description": "",
        "mime_type": "text/markdown",
        "enabled": "on",
        "text": "# Hello",
        "icons": "[]",
        **overrides,
    }


@pytest.mark.django_db
def test_text_resource_is_saved_with_its_size(admin_client: Client) -> None:
    response = admin_client.post(reverse("admin:mcp_app_resource_add"), resource_payload())

    assert response.status_code == 302
    assert Resource.objects.get().size == 7


@pytest.mark.django_db
def test_resource_needs_exactly_one_of_text_and_file(
    admin_client: Client, settings: Settings, tmp_path: Path
) -> None:
    settings.MEDIA_ROOT = tmp_path
    both = resource_payload(file=SimpleUploadedFile("a.txt", b"abc", content_type="text/plain"))

    with_both = admin_client.post(reverse("admin:mcp_app_resource_add"), both)
    with_none = admin_client.post(reverse("admin:mcp_app_resource_add"), resource_payload(text=""))

    for response in (with_both, with_none):
        assert response.context["adminform"].form.non_field_errors() == [
            "Give the resource either text or a file, not both or neither."
        ]
    assert not Resource.objects.exists()


@pytest.mark.parametrize("uri", ["readme", "no scheme/path", "demo:"])
@pytest.mark.django_db
def test_resource_uri_must_be_absolute(admin_client: Client, uri: str) -> None:
    response = admin_client.post(reverse("admin:mcp_app_resource_add"), resource_payload(uri=uri))

    assert "uri" in response.context["adminform"].form.errors


def template_payload(**overrides: Any) -> dict[str, Any]:
    return {
        "uri_template": "demo://notes/{topic}",
        "name": "notes",
        "title": "",
        "description": "",
        "mime_type": "text/plain",
        "kind": "template",
        "function": "",
        "template": "About {{ topic }}",
        "completions": '{"topic": ["a", "b"]}',
        "icons": "[]",
        "enabled": "on",
        **overrides,
    }


@pytest.mark.django_db
def test_resource_template_is_saved_with_its_resolver_config(admin_client: Client) -> None:
    response = admin_client.post(reverse("admin:mcp_app_resourcetemplate_add"), template_payload())

    assert response.status_code == 302
    template = ResourceTemplate.objects.get()
    assert template.config == {"template": "About {{ topic }}"}
    assert template.completions == {"topic": ["a", "b"]}


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"uri_template": "demo://notes/fixed"}, "uri_template"),
        ({"uri_template": "demo://notes/{topic"}, "uri_template"),
        ({"template": "{% if %}"}, "template"),
        ({"kind": "python", "function": ""}, "function"),
        ({"completions": '{"topic": "a"}'}, "completions"),
    ],
)
@pytest.mark.django_db
def test_resource_template_errors_are_reported_on_their_field(
    admin_client: Client, overrides: dict[str, str], field: str
) -> None:
    response = admin_client.post(
        reverse("admin:mcp_app_resourcetemplate_add"), template_payload(**overrides)
    )

    assert field in response.context["adminform"].form.errors
    assert not ResourceTemplate.objects.exists()


def inline_management(prefix: str, total: int) -> dict[str, str]:
    return {
        f"{prefix}-TOTAL_FORMS": str(total),
        f"{prefix}-INITIAL_FORMS": "0",
        f"{prefix}-MIN_NUM_FORMS": "0",
        f"{prefix}-MAX_NUM_FORMS": "1000",
    }


@pytest.mark.django_db
def test_prompt_is_saved_with_ordered_arguments_and_messages(admin_client: Client) -> None:
    data = {
        "name": "review",
        "title": "",
        "description": "Review code.",
        "enabled": "on",
        "icons": "[]",
        **inline_management("arguments", 2),
        "arguments-0-position": "1",
        "arguments-0-name": "language",
        "arguments-0-completion_values": "python\ngo",
        "arguments-1-position": "0",
        "arguments-1-name": "code",
        "arguments-1-required": "on",
        **inline_management("messages", 1),
        "messages-0-position": "0",
        "messages-0-role": "user",
        "messages-0-kind": "text",
        "messages-0-text": "Review {code}",
    }

    response = admin_client.post(reverse("admin:mcp_app_prompt_add"), data)

    assert response.status_code == 302
    prompt = Prompt.objects.get()
    assert [a.name for a in prompt.arguments.all()] == ["code", "language"]
    assert prompt.arguments.get(name="language").completion_list() == ("python", "go")
    assert prompt.messages.get().text == "Review {code}"


@pytest.mark.django_db
def test_sessions_can_be_listed_but_not_added_changed_or_deleted(
    admin_client: Client, endpoint: Endpoint
) -> None:
    session = Session.objects.create(
        id="s1", endpoint=endpoint, protocol_version="2025-11-25",
        client_info={"name": "inspector", "version": "1.0"},
    )  # fmt: skip

    listing = admin_client.get(reverse("admin:mcp_app_session_changelist"))
    detail = admin_client.get(reverse("admin:mcp_app_session_change", args=[session.pk]))
    add = admin_client.get(reverse("admin:mcp_app_session_add"))
    delete = admin_client.post(reverse("admin:mcp_app_session_delete", args=[session.pk]))

    assert listing.status_code == 200
    assert b"inspector 1.0" in listing.content
    assert detail.status_code == 200
    assert b'name="_save"' not in detail.content
    assert add.status_code == 403
    assert delete.status_code == 403
    assert Session.objects.filter(pk="s1").exists()


def _upstream() -> Upstream:
    return Upstream.objects.create(
        name="up", url="http://127.0.0.1:9/mcp", allow_networks="127.0.0.1/32"
    )


@pytest.mark.django_db
def test_a_resource_read_from_an_upstream_is_saved_without_content(admin_client: Client) -> None:
    upstream = _upstream()
    data = resource_payload(text="", upstream=str(upstream.pk), remote_uri="up://readme")

    response = admin_client.post(reverse("admin:mcp_app_resource_add"), data)

    assert response.status_code == 302
    resource = Resource.objects.get()
    assert (resource.upstream, resource.upstream_uri, resource.size) == (
        upstream,
        "up://readme",
        None,
    )


@pytest.mark.django_db
def test_a_template_read_from_an_upstream_is_saved_without_config(admin_client: Client) -> None:
    upstream = _upstream()
    add = reverse("admin:mcp_app_resourcetemplate_add")
    data = template_payload(
        kind="upstream", upstream=str(upstream.pk), remote_uri_template="up://notes/{topic}"
    )

    without_upstream = admin_client.post(add, {**data, "upstream": ""})
    other_variables = admin_client.post(add, {**data, "remote_uri_template": "up://n/{x}"})
    response = admin_client.post(add, data)

    assert "upstream" in without_upstream.context["adminform"].form.errors
    assert "remote_uri_template" in other_variables.context["adminform"].form.errors
    assert response.status_code == 302
    template = ResourceTemplate.objects.get()
    assert (template.upstream, template.upstream_uri_template, template.config) == (
        upstream,
        "up://notes/{topic}",
        {},
    )


@pytest.mark.django_db
def test_a_prompt_from_an_upstream_with_messages_of_its_own_is_refused(
    admin_client: Client,
) -> None:
    upstream = _upstream()
    data = {
        "name": "review",
        "title": "",
        "description": "Review code.",
        "enabled": "on",
        "icons": "[]",
        "upstream": str(upstream.pk),
        "remote_name": "",
        **inline_management("arguments", 0),
        **inline_management("messages", 1),
        "messages-0-position": "0",
        "messages-0-role": "user",
        "messages-0-kind": "text",
        "messages-0-text": "Review {code}",
    }

    refused = admin_client.post(reverse("admin:mcp_app_prompt_add"), data)
    accepted = admin_client.post(
        reverse("admin:mcp_app_prompt_add"), {**data, **inline_management("messages", 0)}
    )

    assert "gets its messages there" in refused.content.decode()
    assert accepted.status_code == 302
    prompt = Prompt.objects.get()
    assert (prompt.upstream, prompt.upstream_name, prompt.messages.count()) == (
        upstream,
        "review",
        0,
    )


@pytest.mark.django_db
def test_an_upstream_in_use_by_a_resource_cannot_be_deleted(admin_client: Client) -> None:
    upstream = _upstream()
    admin_client.post(
        reverse("admin:mcp_app_resource_add"),
        resource_payload(text="", upstream=str(upstream.pk)),
    )

    response = admin_client.post(
        reverse("admin:mcp_app_upstream_delete", args=[upstream.pk]), {"post": "yes"}
    )

    assert response.status_code == 200  # the page that says what protects it
    assert Upstream.objects.filter(pk=upstream.pk).exists()
