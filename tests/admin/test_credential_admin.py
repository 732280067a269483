"""Credential admin (write-only secrets) and the HTTP fields of the tool form."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from mcp_app.models import Credential, Tool
from mcp_app.services.credentials import credential_create, decrypt_secret
from tests.admin.conftest import tool_payload

pytestmark = pytest.mark.django_db

ADD_URL = reverse("admin:mcp_app_credential_add")
LIST_URL = reverse("admin:mcp_app_credential_changelist")
TOOL_ADD_URL = reverse("admin:mcp_app_tool_add")
SECRET = "sup3r-s3cret-value-4711"


def credential_payload(**overrides: str) -> dict[str, str]:
    data = {
        "name": "github",
        "kind": "bearer",
        "description": "",
        "secret": SECRET,
        "header_name": "",
        "query_param": "",
        "username": "",
        "token_url": "",
        "client_id": "",
        "scopes": "",
    }
    data.update(overrides)
    return data


def form_errors(response: Any) -> dict[str, list[str]]:
    form = response.context["adminform"].form
    return {
        field: [str(message) for message in messages] for field, messages in form.errors.items()
    }


def test_a_new_credential_is_saved_encrypted(admin_client: Client) -> None:
    response = admin_client.post(ADD_URL, credential_payload())

    assert response.status_code == 302
    credential = Credential.objects.get(name="github")
    assert SECRET not in credential.secret_encrypted
    assert decrypt_secret(credential) == SECRET


def test_the_secret_never_appears_on_the_change_or_list_page(admin_client: Client) -> None:
    credential = credential_create(name="github", kind="bearer", secret=SECRET)
    change_url = reverse("admin:mcp_app_credential_change", args=[credential.pk])

    change = admin_client.get(change_url).content.decode()
    listing = admin_client.get(LIST_URL).content.decode()
    search = admin_client.get(LIST_URL, {"q": SECRET[:8]}).content.decode()

    for page in (change, listing, search):
        assert SECRET not in page
        assert SECRET[-4:] not in page
        assert credential.secret_encrypted not in page
    assert "•••• set" in change and "•••• set" in listing
    assert 'type="password"' in change
    assert "0 credentials" in search


def test_an_empty_secret_on_edit_keeps_the_stored_one(admin_client: Client) -> None:
    credential = credential_create(name="github", kind="bearer", secret=SECRET)
    change_url = reverse("admin:mcp_app_credential_change", args=[credential.pk])

    response = admin_client.post(change_url, credential_payload(secret="", description="CI"))

    assert response.status_code == 302
    credential.refresh_from_db()
    assert credential.description == "CI"
    assert decrypt_secret(credential) == SECRET


def test_a_new_secret_on_edit_replaces_the_stored_one(admin_client: Client) -> None:
    credential = credential_create(name="github", kind="bearer", secret=SECRET)
    change_url = reverse("admin:mcp_app_credential_change", args=[credential.pk])

    admin_client.post(change_url, credential_payload(secret="replacement"))

    credential.refresh_from_db()
    assert decrypt_secret(credential) == "replacement"


def test_a_new_credential_needs_a_secret(admin_client: Client) -> None:
    response = admin_client.post(ADD_URL, credential_payload(secret=""))

    assert form_errors(response) == {"secret": ["Enter the secret."]}
    assert not Credential.objects.exists()


def test_kind_specific_fields_are_required_and_the_typed_secret_is_not_echoed(
    admin_client: Client,
) -> None:
    response = admin_client.post(ADD_URL, credential_payload(kind="api_key_header"))

    assert form_errors(response) == {"header_name": ["Required for API key in a header."]}
    assert SECRET not in response.content.decode()
    assert not Credential.objects.exists()


# The tool form's HTTP fields

HTTP_FIELDS = {
    "kind": "http",
    "template": "",
    "http_method": "GET",
    "http_url": "https://api.example.com/users/{user}",
    "http_query": '{"q": "{query}"}',
    "http_headers": "",
    "http_body": "none",
    "http_body_template": "",
    "http_timeout": "",
    "http_retries": "",
    "http_expected_status": "2xx",
    "http_select": "",
    "http_credential": "",
    "http_allow_hosts": "",
    "http_allow_networks": "",
    "input_schema": '{"type": "object", "properties": {"user": {"type": "string"}, '
    '"query": {"type": "string"}}}',
}


def post_http_tool(client: Client, **overrides: str) -> Any:
    return client.post(TOOL_ADD_URL, tool_payload(**{**HTTP_FIELDS, **overrides}))


def test_an_http_tool_is_saved_with_its_config(admin_client: Client) -> None:
    credential_create(name="github", kind="bearer", secret=SECRET)

    response = post_http_tool(
        admin_client, http_method="POST", http_body="json",
        http_body_template='{"who": "{user}"}', http_timeout="2.5", http_retries="0",
        http_expected_status="2xx, 304", http_select="data.items[0]",
        http_credential="github", http_allow_hosts="api.internal",
        http_allow_networks="10.20.0.0/16, fd12::/48", http_headers='{"X-A": "b"}',
    )  # fmt: skip

    assert response.status_code == 302
    assert Tool.objects.get(name="greet").config == {
        "method": "POST",
        "url": "https://api.example.com/users/{user}",
        "query": {"q": "{query}"},
        "headers": {"X-A": "b"},
        "body": "json",
        "body_template": {"who": "{user}"},
        "timeout": 2.5,
        "retries": 0,
        "expected_status": ["2xx", 304],
        "select": "data.items[0]",
        "credential": "github",
        "allow_hosts": ["api.internal"],
        "allow_networks": ["10.20.0.0/16", "fd12::/48"],
    }


def test_the_http_change_page_shows_the_config_in_the_fields(admin_client: Client) -> None:
    post_http_tool(admin_client, http_allow_networks="10.20.0.0/16")
    tool = Tool.objects.get(name="greet")

    page = admin_client.get(reverse("admin:mcp_app_tool_change", args=[tool.pk])).content.decode()

    assert 'value="https://api.example.com/users/{user}"' in page
    assert 'value="10.20.0.0/16"' in page
    assert "&quot;q&quot;: &quot;{query}&quot;" in page


def test_a_placeholder_naming_no_schema_property_is_refused(admin_client: Client) -> None:
    response = post_http_tool(
        admin_client,
        http_url="https://api.example.com/users/{usr}",
        http_query='{"q": "{query}", "x": "{nope}"}',
    )

    assert form_errors(response) == {
        "http_url": ["{usr} names no property of the input schema."],
        "http_query": ["{nope} names no property of the input schema."],
    }
    assert not Tool.objects.exists()


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"http_url": ""}, "http_url", "Enter the URL template of the request."),
        ({"http_url": "ftp://x/"}, "http_url", "url must start with http:// or https://"),
        ({"http_query": '{"q": 1}'}, "http_query", "query must be an object of strings"),
        ({"http_query": "{oops"}, "http_query", "Query parameters: invalid JSON at line 1"),
        ({"http_allow_networks": "10.0.0.1/8"}, "http_allow_networks", "allow_networks:"),
        ({"http_expected_status": "2xy"}, "http_expected_status", "expected_status: '2xy'"),
        ({"http_select": "a..b"}, "http_select", "select: 'a..b' is not a dotted path"),
        ({"http_body": "json"}, "http_body", 'body "json" needs a body_template'),
        ({"http_credential": "missing"}, "http_credential", "Select a valid choice."),
    ],
)
def test_invalid_http_fields_are_explained_and_nothing_is_saved(
    admin_client: Client, overrides: dict[str, str], field: str, message: str
) -> None:
    response = post_http_tool(admin_client, **overrides)

    errors = form_errors(response)
    assert list(errors) == [field]
    assert errors[field][0].startswith(message)
    assert not Tool.objects.exists()


def test_the_add_page_offers_the_http_kind_and_credentials(admin_client: Client) -> None:
    credential_create(name="github", kind="bearer", secret=SECRET)

    page = admin_client.get(TOOL_ADD_URL).content.decode()

    assert '<option value="http">HTTP request</option>' in page
    assert '<option value="github">github</option>' in page
    assert SECRET not in page
