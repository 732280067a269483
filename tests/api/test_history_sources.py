"""Catalog history names where a change came from: the API and catalog import stamp their rows,
and an API user is recorded as the one who changed it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rest_framework.test import APIClient

from mcp_app.models import Credential, Tool
from mcp_app.services import history
from mcp_app.services.catalog_io import catalog_export, catalog_import
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from mcp_app.services.credentials import credential_create
from tests.api.conftest import CATALOG_PERMISSIONS

pytestmark = pytest.mark.django_db

SECRET = "api-s3cret-never-in-history"


def make_tool() -> Tool:
    return tool_create(
        name="greet",
        kind=Tool.Kind.TEMPLATE,
        config={"template": "Hello {{ name }}!", "output": "text"},
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        description="Greets someone.",
        endpoints=[endpoint_create(slug="hist")],
    )


def test_an_api_edit_is_recorded_with_the_tokens_user_and_source(
    token_client: Callable[..., APIClient],
) -> None:
    tool = make_tool()
    api = token_client(*CATALOG_PERMISSIONS)

    response = api.patch(f"/api/v1/tools/{tool.pk}/", {"description": "Says hello."})

    assert response.status_code == 200
    latest = tool.history.latest()
    assert latest.description == "Says hello."
    assert latest.history_change_reason == history.API
    assert latest.history_user is not None and latest.history_user.username == "robot"


def test_an_api_credential_edit_keeps_the_secret_out_of_history(
    token_client: Callable[..., APIClient],
) -> None:
    credential = credential_create(name="github", kind="bearer", secret="old-" + SECRET)
    api = token_client(*CATALOG_PERMISSIONS)

    response = api.patch(
        f"/api/v1/credentials/{credential.pk}/", {"description": "GH", "secret": SECRET}
    )

    assert response.status_code == 200
    latest = Credential.history.latest()
    assert (latest.description, latest.history_change_reason) == ("GH", history.API)
    recorded = [str(value) for row in Credential.history.values_list() for value in row]
    assert not any(SECRET in value for value in recorded)


def test_an_import_is_recorded_as_an_import() -> None:
    tool = make_tool()
    document = catalog_export()
    document["tools"][0]["description"] = "Imported."

    catalog_import(document=document)

    latest = tool.history.latest()
    assert (latest.description, latest.history_change_reason) == ("Imported.", history.IMPORT)


def test_a_change_outside_any_interface_names_no_source() -> None:
    tool = make_tool()
    tool.description = "From the shell."
    tool.save()

    assert tool.history.latest().history_change_reason is None
    with history.catalog_change_source(history.UPSTREAM_SYNC):
        tool.description = "From the upstream."
        tool.save()
    assert tool.history.latest().history_change_reason == history.UPSTREAM_SYNC
