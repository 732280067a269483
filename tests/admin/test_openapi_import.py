"""Admin "Import from OpenAPI": read a document, tick operations, get disabled drafts."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from mcp_app.models import Tool
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from tests.support.openapi_docs import as_text, petstore

IMPORT_URL = reverse("admin:mcp_app_tool_openapi_import")
BASE = "https://eu.pets.example.com/v1"


def errors(response: Any) -> list[str]:
    form = response.context["form"]
    return [str(message) for messages in form.errors.values() for message in messages]


@pytest.mark.django_db
def test_the_changelist_links_to_the_import_page(admin_client: Client) -> None:
    response = admin_client.get(reverse("admin:mcp_app_tool_changelist"))

    assert f'href="{IMPORT_URL}"'.encode() in response.content


@pytest.mark.django_db
def test_an_uploaded_document_lists_its_operations_all_ticked(admin_client: Client) -> None:
    upload = SimpleUploadedFile("petstore.json", as_text(petstore()).encode(), "application/json")

    response = admin_client.post(IMPORT_URL, {"document_file": upload, "_read": "Read"})

    assert response.status_code == 200
    form = response.context["form"]
    assert [key for key, _label in form.fields["operations"].choices] == [
        "GET /pets",
        "POST /pets",
        "GET /pets/{petId}",
        "PUT /pets/{petId}",
        "DELETE /pets/{petId}",
        "PATCH /pets/{petId}/tree",
    ]
    assert form.initial["operations"] == [key for key, _ in form.fields["operations"].choices]
    assert form.initial["base_url"] == BASE
    assert b'name="_import"' in response.content
    assert not Tool.objects.exists()


@pytest.mark.django_db
def test_ticked_operations_become_disabled_drafts_on_the_endpoint(admin_client: Client) -> None:
    endpoint = endpoint_create(slug="pets")
    tool_create(
        name="listPets",
        kind=Tool.Kind.TEMPLATE,
        config={"template": "hi"},
        description="Already here.",
        endpoints=[endpoint],
    )

    response = admin_client.post(
        IMPORT_URL,
        {
            "document_text": as_text(petstore()),
            "operations": ["GET /pets", "PUT /pets/{petId}"],
            "endpoints": [endpoint.pk],
            "base_url": "",
            "_import": "Import",
        },
    )

    assert response.status_code == 302
    assert response["Location"] == reverse("admin:mcp_app_tool_changelist") + "?enabled__exact=0"
    drafts = Tool.objects.filter(kind=Tool.Kind.HTTP).order_by("name")
    assert [(tool.name, tool.enabled) for tool in drafts] == [
        ("listPets_2", False),
        ("updatePet", False),
    ]
    assert drafts[1].config["url"] == BASE + "/pets/{petId}"
    assert {tool.name for tool in endpoint.tools.all()} == {"listPets", "listPets_2", "updatePet"}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"document_text": "{oops"}, "Invalid JSON at line 1 column 2"),
        ({"document_text": '{"swagger": "2.0"}'}, "This is a Swagger 2.0 document"),
        ({"document_text": '{"openapi": "3.1.0", "paths": {}}'}, "The document has no operations"),
        ({"document_text": ""}, "Upload an OpenAPI file, give its URL or paste it."),
        (
            {"document_url": "http://169.254.169.254/openapi.yaml"},
            "The document cannot be fetched: Requests to 169.254.169.254 are not allowed",
        ),
        (
            {
                "document_text": as_text(
                    {**petstore(), "components": {**petstore()["components"], "parameters": {}}}
                )
            },
            "GET /pets: $ref '#/components/parameters/limit' points to nothing",
        ),
        (
            {
                "document_text": as_text({**petstore(), "servers": [{"url": "ftp://x.example"}]}),
                "operations": ["GET /pets"],
            },
            "The server URL 'ftp://x.example' is not an http(s) URL",
        ),
        (
            {"document_text": as_text(petstore()), "operations": []},
            "Tick at least one operation to import.",
        ),
        (
            {"document_text": as_text(petstore()), "operations": ["GET /nowhere"]},
            "The document has no operation GET /nowhere.",
        ),
        (
            {
                "document_text": as_text(petstore()),
                "operations": ["GET /pets"],
                "allow_networks": "everything",
            },
            "Nothing was imported: allow_networks: ",
        ),
    ],
    ids=[
        "json",
        "swagger",
        "no-operations",
        "empty",
        "metadata-url",
        "dangling-ref",
        "ftp-server",
        "none-ticked",
        "unknown-operation",
        "bad-allow-list",
    ],  # fmt: skip
)
@pytest.mark.django_db
def test_bad_input_is_explained_and_creates_nothing(
    admin_client: Client, data: dict[str, Any], message: str
) -> None:
    response = admin_client.post(IMPORT_URL, {**data, "_import": "Import"})

    assert response.status_code == 200
    assert any(error.startswith(message) for error in errors(response)), errors(response)
    assert not Tool.objects.exists()


@pytest.mark.django_db
def test_a_refused_document_url_names_the_setting_that_opens_it(admin_client: Client) -> None:
    response = admin_client.post(
        IMPORT_URL, {"document_url": "http://127.0.0.1:9/openapi.yaml", "_import": "Import"}
    )

    (error,) = errors(response)
    # The page's "Allowed private networks" apply to the imported tools, not to this fetch.
    assert "can allow-list" not in error
    assert "the MCP_HTTP_ALLOWED_NETWORKS setting" in error
    assert 'README.md, "Configuration"' in error
    assert not Tool.objects.exists()


@pytest.mark.django_db
def test_staff_without_add_permission_cannot_import(client: Client, django_user_model: Any) -> None:
    user = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    client.force_login(user)

    response = client.post(
        IMPORT_URL,
        {"document_text": as_text(petstore()), "operations": ["GET /pets"], "_import": "Import"},
    )

    assert response.status_code == 403
    assert not Tool.objects.exists()


@pytest.mark.django_db
def test_an_import_may_create_the_tools_enabled_on_the_endpoint_in_one_step(
    admin_client: Client,
) -> None:
    endpoint = endpoint_create(slug="pets")

    response = admin_client.post(
        IMPORT_URL,
        {
            "document_text": as_text(petstore()),
            "operations": ["GET /pets", "PUT /pets/{petId}"],
            "endpoints": [endpoint.pk],
            "enable": "on",
            "_import": "Import",
        },
        follow=True,
    )

    assert [str(m) for m in response.context["messages"]] == [
        "Created 2 enabled tools: listPets, updatePet."
    ]
    assert response.redirect_chain[-1][0].endswith("?enabled__exact=1")
    assert sorted(endpoint.tools.filter(enabled=True).values_list("name", flat=True)) == [
        "listPets",
        "updatePet",
    ]


@pytest.mark.django_db
def test_publishing_an_import_needs_the_endpoint_permission(
    client: Client, django_user_model: Any
) -> None:
    endpoint = endpoint_create(slug="pets")
    user = django_user_model.objects.create_user("importer", password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["add_tool", "change_tool", "view_tool", "manage_every_team"]
        )
    )
    client.force_login(user)
    data = {
        "document_text": as_text(petstore()),
        "operations": ["GET /pets"],
        "endpoints": [endpoint.pk],
        "enable": "on",
        "_import": "Import",
    }

    refused = client.post(IMPORT_URL, data)
    assert refused.status_code == 200
    assert errors(refused) == [
        "Publishing on endpoints needs the permission mcp_app.change_endpoint."
    ]
    assert not Tool.objects.exists()

    without_endpoints = client.post(IMPORT_URL, {**data, "endpoints": []})
    assert without_endpoints.status_code == 302
    assert list(Tool.objects.values_list("name", "enabled")) == [("listPets", True)]
