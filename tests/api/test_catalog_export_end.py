"""An export's end (services/catalog_io.py ``ENDED_FORMAT``): an export says
``mcphost-catalog/2`` and ends with ``end``, counting each section's entries, so a stream cut
short (the database gone mid-export) is refused by the API's import and ``mcp_import``,
changing nothing, wherever it was cut; an older export (format 1, no end) still imports; and
the end survives a round trip."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from mcp_app.models import Endpoint, Tool
from mcp_app.services.api_tokens import api_token_create
from mcp_app.services.catalog_io import (
    FORMAT,
    CatalogFormatError,
    catalog_dump,
    catalog_export,
    catalog_export_text,
    catalog_import,
    catalog_parse,
    catalog_with_end,
)
from tests.api.test_catalog_export_stream import _generated

pytestmark = pytest.mark.django_db

TOOLS = 30


@pytest.fixture
def catalog() -> None:
    catalog_import(document=_generated(TOOLS))


@pytest.fixture
def api() -> APIClient:
    user = User.objects.create_superuser("importer", password="unused-password-123")
    _token, key = api_token_create(user=user, name="import")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def exported(fmt: str) -> str:
    return "".join(catalog_export_text(fmt=fmt))


def cut(text: str, fmt: str, where: str) -> str:
    """``text`` cut short as a broken stream leaves it: before an entry of the tools (a
    YAML document that still parses), inside an entry, or inside the end's counts."""
    entry = "- name: tool_00012" if fmt == "yaml" else '{\n      "name": "tool_00012"'
    if where == "at an entry":
        return text[: text.index(entry)]
    if where == "inside an entry":
        return text[: text.index(entry) + len(entry) - 2]  # "name: tool_000": still YAML
    counted = f"  tools: {TOOLS}\n" if fmt == "yaml" else f'    "tools": {TOOLS}'
    # YAML: counts 3 tools, not 30. JSON: no longer JSON.
    return text[: text.index(counted) + len(counted) - 2]


CUTS = ["at an entry", "inside an entry", "inside the end"]


def state() -> list[tuple[str, str]]:
    return sorted(Tool.objects.values_list("name", "description"))


@pytest.mark.parametrize("fmt", ["yaml", "json"])
@pytest.mark.parametrize("where", CUTS)
def test_a_cut_export_is_refused_by_the_api_and_changes_nothing(
    catalog: None, api: APIClient, fmt: str, where: str
) -> None:
    text = cut(exported(fmt), fmt, where)
    before = state()

    # With prune, a cut file taken as whole would delete every tool after the cut.
    answer = api.post(
        "/api/v1/catalog/import/",
        {"file": SimpleUploadedFile(f"catalog.{fmt}", text.encode()), "prune": True},
        format="multipart",
    )

    assert answer.status_code == 400, answer.content
    assert [error["path"] for error in answer.json()["errors"]] == ["file"]
    assert state() == before and len(before) == TOOLS


@pytest.mark.parametrize("fmt", ["yaml", "json"])
@pytest.mark.parametrize("where", CUTS)
def test_a_cut_export_is_refused_by_mcp_import_and_changes_nothing(
    catalog: None, tmp_path: Path, fmt: str, where: str
) -> None:
    path = tmp_path / f"catalog.{fmt}"
    call_command("mcp_export", "--format", fmt, "-o", str(path))
    path.write_text(cut(path.read_text(), fmt, where))
    before = state()

    with pytest.raises(CommandError) as raised:
        call_command("mcp_import", str(path), "--prune", stdout=io.StringIO())

    if fmt == "yaml":  # a cut JSON document is not JSON at all: refused as such
        assert "cut short" in str(raised.value)
    assert state() == before and len(before) == TOOLS


def test_a_yaml_export_cut_at_an_entry_is_refused_naming_the_missing_end(catalog: None) -> None:
    with pytest.raises(CatalogFormatError) as raised:
        catalog_parse(cut(exported("yaml"), "yaml", "at an entry"))

    assert str(raised.value).startswith(
        "The document is cut short: its format 'mcphost-catalog/2' promises 'end' after its "
        "last section, counting each section's entries, and it has none. Nothing was imported."
    )


def test_an_export_edited_without_its_count_is_refused_naming_the_section(
    catalog: None, api: APIClient
) -> None:
    document = json.loads(exported("json"))
    del document["tools"][0]
    before = state()

    answer = api.post("/api/v1/catalog/import/", {"document": document}, format="json")

    assert answer.status_code == 400
    [error] = answer.json()["errors"]
    assert error["path"] == "document"
    assert error["message"].startswith(
        f"The document is cut short or was edited: 'end' counts {TOOLS} entries in 'tools', "
        f"the document holds {TOOLS - 1} entries."
    )
    assert state() == before


def test_an_older_export_without_an_end_imports_as_before(
    catalog: None, api: APIClient, tmp_path: Path
) -> None:
    # What exports wrote before the end: format 1, no end.
    document = catalog_export()
    assert document["format"] == FORMAT == "mcphost-catalog/1" and "end" not in document
    document["tools"][0]["description"] = "Through the API."
    document["tools"][1]["description"] = "Through mcp_import."
    path = tmp_path / "old.yaml"
    path.write_text(catalog_dump({**document, "tools": document["tools"][1:]}))

    answer = api.post(
        "/api/v1/catalog/import/",
        {"file": SimpleUploadedFile("old.yaml", catalog_dump(document).encode())},
        format="multipart",
    )
    call_command("mcp_import", str(path), stdout=io.StringIO())

    assert answer.status_code == 200, answer.content
    assert Tool.objects.get(name="tool_00000").description == "Through the API."
    assert Tool.objects.get(name="tool_00001").description == "Through mcp_import."


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_the_end_survives_a_round_trip(catalog: None, fmt: str) -> None:
    first = exported(fmt)
    counts: dict[str, Any] = (json.loads(first) if fmt == "json" else yaml.safe_load(first))["end"]
    assert counts == {
        "endpoints": 1, "tools": TOOLS, "resources": 0, "resource_templates": 0,
        "prompts": 0, "upstreams": 0, "credentials": 0,
    }  # fmt: skip
    document = catalog_parse(first)
    # Read, it is the document the catalog holds: the end checked and set aside.
    assert document == catalog_export()
    Tool.objects.all().delete()
    Endpoint.objects.all().delete()

    catalog_import(document=document)

    assert exported(fmt) == first == catalog_dump(catalog_with_end(catalog_export()), fmt=fmt)
