"""One write path for catalog rows: the admin form, the API, catalog import, OpenAPI import and
the service itself write the same row for the same input, stamp its history with their own
user and source, and refuse bad input with the same words, saving nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from mcp_app.models import Endpoint, MembershipChange, Tool
from mcp_app.services import history
from mcp_app.services.api_tokens import api_token_create
from mcp_app.services.catalog_io import FORMAT
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from mcp_app.services.openapi import openapi_read, openapi_tools_create
from tests.admin.conftest import tool_payload
from tests.api.conftest import CATALOG_PERMISSIONS, make_user
from tests.support.openapi_docs import petstore

pytestmark = pytest.mark.django_db

# A python tool given its name, function and a description of its own: every field left out
# (title, schemas, hints) comes from the function.
CLOCK = {
    "name": "clock",
    "kind": "python",
    "config": {"function": "current_time"},
    "description": "Tells the time.",
}
# Columns that differ between two rows of the same input.
BOOKKEEPING = {"id", "created_at", "updated_at"}


@pytest.fixture
def api() -> APIClient:
    user = make_user("robot", CATALOG_PERMISSIONS)
    _token, key = api_token_create(user=user, name="ci")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def via_admin(client: Client, slug: str, **overrides: Any) -> Any:
    endpoint = Endpoint.objects.get(slug=slug)
    payload = tool_payload(
        name="clock",
        kind="python",
        function="current_time",
        title="",
        description="Tells the time.",
        input_schema="",
        template="",
        endpoints=[str(endpoint.pk)],
    )
    payload.update(overrides)
    return client.post(reverse("admin:mcp_app_tool_add"), payload)


def via_api(api: APIClient, slug: str, **fields: Any) -> Any:
    return api.post("/api/v1/tools/", {**CLOCK, **fields, "endpoints": [slug]})


def via_import(api: APIClient, slug: str, **fields: Any) -> Any:
    document = {
        "format": FORMAT,
        "endpoints": [{"slug": slug}],
        "tools": [{**CLOCK, **fields, "endpoints": [slug]}],
    }
    return api.post("/api/v1/catalog/import/", {"document": document})


def row_values(tool: Tool) -> dict[str, Any]:
    return {
        field.attname: getattr(tool, field.attname)
        for field in Tool._meta.concrete_fields
        if field.attname not in BOOKKEEPING
    }


def stamp(tool: Tool) -> tuple[str | None, str | None]:
    """The source and user of the tool's newest history row and of its endpoint attach."""
    latest = tool.history.latest()
    attach = MembershipChange.objects.get(item_id=tool.pk, kind="tool")
    assert (attach.source or None, attach.changed_by) == (
        latest.history_change_reason,
        latest.history_user,
    )
    user = latest.history_user
    return latest.history_change_reason, user.username if user is not None else None


def test_every_interface_writes_the_same_tool_with_its_own_user_and_source(
    admin_client: Client, api: APIClient
) -> None:
    for slug in ("by-service", "by-admin", "by-api", "by-import"):
        if slug != "by-import":
            endpoint_create(slug=slug)

    by_service = tool_create(**CLOCK, endpoints=Endpoint.objects.filter(slug="by-service"))
    assert via_admin(admin_client, "by-admin").status_code == 302
    assert via_api(api, "by-api").status_code == 201
    assert via_import(api, "by-import").status_code == 200

    tools = {tool.endpoints.get().slug: tool for tool in Tool.objects.all()}
    expected = row_values(by_service)
    # What was given is kept; what was not is the function's.
    assert expected["description"] == "Tells the time."
    assert expected["title"] == "Current time"
    assert expected["read_only_hint"] is True
    assert expected["output_schema"] is not None
    assert {slug: row_values(tool) for slug, tool in tools.items()} == {
        slug: expected for slug in tools
    }
    assert {slug: stamp(tool) for slug, tool in tools.items()} == {
        "by-service": (None, None),
        "by-admin": (history.ADMIN, "admin"),
        "by-api": (history.API, "robot"),
        "by-import": (history.IMPORT, "robot"),
    }


def test_an_openapi_import_is_recorded_with_its_user_and_source(admin_user: User) -> None:
    endpoint = endpoint_create(slug="main")
    document = openapi_read(petstore())

    [tool, *_] = openapi_tools_create(
        document=document,
        keys=[document.operations[0].key],
        endpoints=[endpoint],
        actor=admin_user,
    )

    assert stamp(tool) == (history.OPENAPI, admin_user.username)


def test_a_taken_tool_name_is_refused_by_every_interface_in_the_same_words(
    admin_client: Client, api: APIClient
) -> None:
    main = endpoint_create(slug="main")
    tool_create(**CLOCK, endpoints=[main])
    words = "Endpoint 'main' already has another tool named 'clock'."

    admin = via_admin(admin_client, "main")
    posted = via_api(api, "main")
    with pytest.raises(ValidationError) as service:
        tool_create(**CLOCK, endpoints=[main])

    assert admin.status_code == 200
    assert words in [str(e) for errors in admin.context["adminform"].form.errors.values()
                     for e in errors]  # fmt: skip
    assert posted.status_code == 400
    assert [error["message"] for error in posted.json()["errors"]] == [words]
    assert service.value.message_dict == {"name": [words]}
    assert Tool.objects.count() == 1


HTTP_PLACEHOLDER = "{owner} names no property of the input schema."


def test_an_undeclared_placeholder_is_refused_by_every_interface_in_the_same_words(
    admin_client: Client, api: APIClient
) -> None:
    endpoint_create(slug="main")
    url = "https://api.example/{owner}"
    http = {"name": "repo", "kind": "http", "description": "A repo."}

    admin = admin_client.post(
        reverse("admin:mcp_app_tool_add"),
        tool_payload(
            **{**http, "template": "", "http_method": "GET", "http_url": url},
            http_body="none",
            http_expected_status="2xx",
            input_schema={"type": "object", "properties": {}},
        ),
    )
    posted = api.post(
        "/api/v1/tools/", {**http, "config": {"method": "GET", "url": url}, "endpoints": ["main"]}
    )
    document = {
        "format": FORMAT,
        "endpoints": [{"slug": "main"}],
        "tools": [{**http, "config": {"method": "GET", "url": url}, "endpoints": ["main"]}],
    }
    imported = api.post("/api/v1/catalog/import/", {"document": document})

    assert admin.status_code == 200
    assert admin.context["adminform"].form.errors["http_url"] == [HTTP_PLACEHOLDER]
    assert posted.json()["errors"] == [
        {"path": "config.url", "message": HTTP_PLACEHOLDER, "code": "invalid"}
    ]
    assert imported.status_code == 400
    assert [error["message"] for error in imported.json()["errors"]] == [HTTP_PLACEHOLDER]
    with pytest.raises(ValidationError) as service:
        tool_create(**http, config={"method": "GET", "url": url})
    assert service.value.message_dict == {"config.url": [HTTP_PLACEHOLDER]}
    assert not Tool.objects.exists()


def test_a_missing_credential_is_refused_by_every_interface_in_the_same_words(
    api: APIClient,
) -> None:
    endpoint_create(slug="main")
    http = {
        "name": "repo",
        "kind": "http",
        "description": "A repo.",
        "config": {"method": "GET", "url": "https://api.example/", "credential": "nowhere"},
    }
    words = "No credential named 'nowhere' here."

    posted = api.post("/api/v1/tools/", {**http, "endpoints": ["main"]})
    document = {"format": FORMAT, "endpoints": [{"slug": "main"}], "tools": [http]}
    imported = api.post("/api/v1/catalog/import/", {"document": document})
    with pytest.raises(ValidationError) as service:
        tool_create(**http)

    assert posted.json()["errors"] == [
        {"path": "config.credential", "message": words, "code": "invalid"}
    ]
    assert [error["message"] for error in imported.json()["errors"]] == [words]
    assert service.value.message_dict == {"config.credential": [words]}
    assert not Tool.objects.exists()
