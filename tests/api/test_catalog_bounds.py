"""Catalog documents are read within bounds: size (MCP_CATALOG_MAX_BYTES), values with YAML
aliases expanded (MCP_CATALOG_MAX_VALUES) and nesting (MAX_DEPTH), refused with a clear error
that never echoes the document, through the API (JSON body, multipart file) and mcp_import.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from bench import catalog_bulk
from mcp_app.conf import get_conf
from mcp_app.models import Tool
from mcp_app.services.catalog_io import (
    MAX_DEPTH,
    CatalogFormatError,
    catalog_check_bounds,
    catalog_dump,
    catalog_export,
    catalog_import,
    catalog_parse,
    catalog_with_end,
)
from tests.api.conftest import CATALOG_PERMISSIONS


def billion_laughs() -> str:
    """Nine levels of nine aliases: about 400 bytes standing for 9**9 (387 million) strings."""
    lines = [
        "format: mcphost-catalog/1",
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
    ]
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    return "\n".join(lines) + "\n"


BOMB = billion_laughs()
DEEP_YAML = "format: mcphost-catalog/1\ntools: " + "[" * 10_000 + "]" * 10_000 + "\n"
DEEP_DOCUMENT = '{"format": "mcphost-catalog/1", "tools": ' + "[" * 10_000 + "]" * 10_000 + "}"
ALIAS_RULE = "MCP_CATALOG_MAX_VALUES sets the limit"
DEPTH_RULE = f"nest deeper than {MAX_DEPTH} levels"


@pytest.fixture
def api(token_client: Callable[..., APIClient]) -> APIClient:
    return token_client(*CATALOG_PERMISSIONS, "auth.add_group")


def upload(api: APIClient, text: str, **fields: Any) -> Any:
    file = SimpleUploadedFile("catalog.yaml", text.encode(), "application/yaml")
    return api.post("/api/v1/catalog/import/", {"file": file, **fields}, format="multipart")


def refusal(response: Any, status: int = 400) -> str:
    """The one message of a refusal (a field's, or the body's as a whole)."""
    assert response.status_code == status, response.content
    body = response.json()
    messages = [error["message"] for error in body["errors"]] or [body["detail"]]
    assert len(messages) == 1
    return str(messages[0])


def test_a_billion_laughs_document_is_refused_before_it_is_expanded() -> None:
    assert len(BOMB) < 500
    tracemalloc.start()
    try:
        with pytest.raises(CatalogFormatError, match=ALIAS_RULE):
            catalog_parse(BOMB)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Expanded, the strings alone would need gigabytes; composing them is refused first.
    assert peak < 20 * 1024 * 1024


@pytest.mark.django_db
@pytest.mark.parametrize("dry_run", ["true", "false"])
def test_the_api_refuses_an_alias_bomb_file_without_echoing_it(
    api: APIClient, dry_run: str
) -> None:
    response = upload(api, BOMB, dry_run=dry_run)

    assert ALIAS_RULE in refusal(response)
    assert b"lol" not in response.content and len(response.content) < 1000


@pytest.mark.django_db
def test_mcp_import_refuses_an_alias_bomb_with_a_command_error(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)

    with pytest.raises(CommandError, match=ALIAS_RULE) as raised:
        call_command("mcp_import", str(path), "--dry-run")

    assert "lol" not in str(raised.value)


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    with pytest.raises(CatalogFormatError, match="an alias is used inside its own anchor"):
        catalog_parse("format: mcphost-catalog/1\nloop: &loop [1, *loop]\n")


@pytest.mark.django_db
def test_aliases_within_the_bounds_still_import(db: None) -> None:
    # An operator writing the file by hand may share a schema between tools.
    text = """\
format: mcphost-catalog/1
endpoints: [{slug: main}]
tools:
- {name: one, kind: python, config: {function: echo}, endpoints: [main],
   input_schema: &schema {type: object, properties: {message: {type: string}}}}
- {name: two, kind: python, config: {function: echo}, endpoints: [main],
   input_schema: *schema}
"""
    catalog_import(document=catalog_parse(text))

    assert {tool.input_schema["properties"]["message"]["type"] for tool in Tool.objects.all()} == {
        "string"
    }


@pytest.mark.django_db
def test_deep_nesting_is_a_400_through_the_api_not_a_500(api: APIClient) -> None:
    body = '{"dry_run": true, "document": ' + DEEP_DOCUMENT + "}"

    as_body = api.post("/api/v1/catalog/import/", body, content_type="application/json")
    as_yaml = upload(api, DEEP_YAML)
    as_json_file = upload(api, DEEP_DOCUMENT)
    shallow = {"format": "mcphost-catalog/1", "tools": [[[]]]}
    within = api.post("/api/v1/catalog/import/", {"document": shallow}, format="json")

    # A JSON body is refused by the API's parser, at its bound for every body (docs/api.md,
    # "Limits"); files are read by catalog_parse, at the catalog's.
    assert refusal(as_body) == "Objects and arrays are nested deeper than 64 levels."
    for response in (as_yaml, as_json_file):
        assert DEPTH_RULE in refusal(response)
    # Nesting within the bound is read, then refused by the import's own checks.
    assert within.json()["errors"][0]["path"] == "document.tools[0]"


@pytest.mark.django_db
def test_mcp_import_refuses_deep_nesting_with_a_command_error(tmp_path: Path) -> None:
    for name, text in (("deep.yaml", DEEP_YAML), ("deep.json", DEEP_DOCUMENT)):
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(CommandError, match=DEPTH_RULE):
            call_command("mcp_import", str(path))


@pytest.mark.django_db
def test_a_document_past_the_size_limit_is_refused_everywhere(
    api: APIClient, settings: Settings, tmp_path: Path
) -> None:
    settings.MCP_CATALOG_MAX_BYTES = 1000
    document = {"format": "mcphost-catalog/1", "tools": [], "endpoints": [{"slug": "x" * 1000}]}
    text = json.dumps(document)
    path = tmp_path / "big.json"
    path.write_text(text)

    as_body = api.post("/api/v1/catalog/import/", {"document": document}, format="json")
    as_file = upload(api, text)

    # A body too large is 413, as every API body (docs/api.md); a file's content is a 400.
    for response, status in ((as_body, 413), (as_file, 400)):
        assert "MCP_CATALOG_MAX_BYTES sets the limit" in refusal(response, status)
        assert b"xxxx" not in response.content
    with pytest.raises(CommandError, match="MCP_CATALOG_MAX_BYTES sets the limit"):
        call_command("mcp_import", str(path))


def test_a_refused_format_value_is_named_by_its_type_not_echoed() -> None:
    text = json.dumps({"format": ["lol"] * 10_000})

    with pytest.raises(CatalogFormatError) as raised:
        catalog_parse(text)

    assert str(raised.value) == (
        "format: expected 'mcphost-catalog/2' or 'mcphost-catalog/1', got a value of type list."
    )


def test_checking_the_bounds_holds_no_memory_per_value_still_to_visit(settings: Settings) -> None:
    # A long list was checked by stacking an entry per item: 70 MB for a million.
    settings.MCP_CATALOG_MAX_VALUES = 200_005  # the mapping, 2 keys, 2 values, 2 a tool
    empty: dict[str, Any] = {}
    document = {"format": "mcphost-catalog/1", "tools": [[empty]] * 100_000}

    tracemalloc.start()
    try:
        catalog_check_bounds(document)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert peak < 100 * 1024
    document["tools"].append([])
    with pytest.raises(CatalogFormatError, match="more than 200005 values"):
        catalog_check_bounds(document)


def values(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(values(key) + values(item) for key, item in value.items())
    if isinstance(value, list):
        return 1 + sum(values(item) for item in value)
    return 1


@pytest.mark.django_db
def test_the_default_value_bound_takes_an_export_of_ten_thousand_tools() -> None:
    # Measured on 10 and 20 tools, and extrapolated: an exported tool writes every field.
    catalog_import(document=catalog_bulk.document(tools=10, endpoints=1))
    ten = values(catalog_parse(catalog_dump(catalog_with_end(catalog_export()))))
    catalog_import(document=catalog_bulk.document(tools=20, endpoints=1))
    twenty = values(catalog_parse(catalog_dump(catalog_with_end(catalog_export()))))
    per_tool = (twenty - ten) / 10

    assert per_tool >= 60
    assert ten + (10_000 - 10) * per_tool <= get_conf().MCP_CATALOG_MAX_VALUES
