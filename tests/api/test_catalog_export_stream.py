"""A streamed catalog export (services/catalog_io.py ``catalog_export_text``, the API's and the
admin's export, ``mcp_export``): the same bytes as the whole document dumped at once with its
end (``catalog_with_end``) by PyYAML or json, for a catalog holding every section and kind,
and a block that keeps its trailing blank lines; a member's stream holds their team's rows
and no secret; it re-imports; and what it holds grows by a chunk of rows, not by the
catalog."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.core.files.base import ContentFile
from django.db import connection
from django.http import StreamingHttpResponse
from django.test.utils import CaptureQueriesContext
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from mcp_app.models import Endpoint, Prompt, Resource, ResourceTemplate, Tool, Upstream
from mcp_app.services import catalog_io, catalog_yaml
from mcp_app.services.api_tokens import api_token_create
from mcp_app.services.catalog_io import (
    catalog_dump,
    catalog_export,
    catalog_export_text,
    catalog_import,
    catalog_parse,
    catalog_with_end,
)
from mcp_app.services.catalog_writes import prompt_create, resource_create, tool_create
from mcp_app.services.icons import icon_check, icon_store
from tests.support.teams import World, two_teams

ICON = (Path(__file__).parents[1] / "services" / "icon_images" / "icon-16x16.png").read_bytes()
PNG = b"\x89PNG\r\n\x1a\n-not-really-an-image"
SECRETS = ("alpha-secret-value", "beta-secret-value")
SECTIONS = (
    "endpoints", "tools", "resources", "resource_templates", "prompts", "upstreams",
    "credentials", "icon_images",
)  # fmt: skip


@pytest.fixture
def world(db: None, settings: Settings, tmp_path: Path) -> World:
    """Two teams' rows of every kind (credentials with secrets, upstreams, limits, policies),
    and on alpha's endpoint tools of every kind, a file resource, a prompt with an image,
    an uploaded icon, and text that YAML folds, quotes or writes as a block."""
    settings.MEDIA_ROOT = tmp_path
    world = two_teams()
    alpha = world.alpha
    icon = icon_check(ICON, filename="icon.png")
    icon_store(icon=icon)
    endpoint = alpha.endpoint
    endpoint.icons = [icon.icon(theme="dark")]
    endpoint.instructions = "Line one.\nLine two: ünïcode ✓.\n"
    endpoint.save()
    long = " ".join(f"word{n}" for n in range(60))  # past the 100-column width: folded
    for name, kind, config in (
        ("py", "python", {"function": "echo"}),
        ("tpl", "template", {"template": "Hello {{ u }}!\nBye.", "output": "text"}),
        ("web", "http", {"method": "GET", "url": "https://api.example.com/{u}",
                         "credential": alpha.credential.name}),
        ("peer", "mcp_upstream", {"upstream": alpha.upstream.name, "tool": "echo"}),
    ):  # fmt: skip
        tool_create(
            name=name,
            kind=kind,
            config=config,
            description=f"{long} — {name}: 'quoted' \"too\" #not-a-comment ",
            input_schema={"type": "object", "properties": {"u": {"type": "string"}}},
            icons=[icon.icon()],
            endpoints=[endpoint],
            team=alpha.group,
        )
    resource_create(
        uri="demo://logo",
        name="logo",
        mime_type="image/png",
        file=ContentFile(PNG, name="logo.png"),
        endpoints=[endpoint],
        team=alpha.group,
    )
    prompt_create(
        name="review",
        description="Review code.",
        arguments=[{"name": "code", "required": True}],
        messages=[
            {"role": "user", "text": "Review {code}\n"},
            {
                "role": "user",
                "kind": "image",
                "file": ContentFile(PNG, name="d.png"),
                "mime_type": "image/png",
            },
        ],  # fmt: skip
        endpoints=[endpoint],
        team=alpha.group,
    )
    return world


@pytest.fixture
def as_user() -> Callable[[User], APIClient]:
    def make(user: User) -> APIClient:
        _token, key = api_token_create(user=user, name="ci")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        return client

    return make


def streamed(**kwargs: Any) -> str:
    return "".join(catalog_export_text(**kwargs))


def whole(document: dict[str, Any], fmt: str) -> str:
    """``document`` as PyYAML or json writes it at once. Not ``catalog_dump``, whose YAML
    is now the stream's own writer (``catalog_yaml.Writer``): the stream is held to PyYAML."""
    return catalog_yaml.dump(document) if fmt == "yaml" else catalog_dump(document, fmt=fmt)


@pytest.mark.parametrize("fmt", ["yaml", "json"])
@pytest.mark.parametrize("scope", [None, ["alpha-endpoint"]])
@pytest.mark.parametrize("who", ["superuser", "member"])
def test_the_stream_is_the_whole_document_byte_for_byte(
    world: World, fmt: str, scope: list[str] | None, who: str
) -> None:
    user = world.superuser if who == "superuser" else world.alpha.member
    document = catalog_export(endpoint_slugs=scope, user=user)
    # The fixture reaches every section, so every section's writing is compared.
    assert all(document[section] for section in SECTIONS), document.keys()
    assert {tool["kind"] for tool in document["tools"]} >= {
        "python", "template", "http", "mcp_upstream"
    }  # fmt: skip

    text = streamed(endpoint_slugs=scope, user=user, fmt=fmt)

    assert (
        text
        == whole(catalog_with_end(document), fmt)
        == catalog_dump(catalog_with_end(document), fmt=fmt)
    )


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_empty_sections_are_written_as_the_whole_document_writes_them(db: None, fmt: str) -> None:
    text = streamed(fmt=fmt)

    assert text == whole(catalog_with_end(catalog_export()), fmt)
    assert catalog_parse(text)["tools"] == []


def test_a_block_that_keeps_its_blank_lines_ends_the_export_not_its_entry(db: None) -> None:
    # A template ending in blank lines is a block that keeps them ("|+"), and libyaml ends a
    # document whose last block is one with "...". Its entry dumped alone ended so, and the
    # stream wrote that "..." between two entries: the export ended there, and the rest
    # never imported back ("did not find expected <document start>").
    document = _generated(3)
    document["tools"][0]["config"]["template"] = "Hello {{ name }}\n\n"
    catalog_import(document=document)

    text = streamed()

    assert text == whole(catalog_with_end(catalog_export()), "yaml")
    assert text.endswith("\n...\n") and "\n...\n" not in text[:-4]
    tools = catalog_parse(text)["tools"]
    assert [tool["config"]["template"] for tool in tools][:2] == [
        "Hello {{ name }}\n\n",
        "Hello {{ name }} from tool 1",
    ]


def test_a_streamed_export_imported_into_an_empty_catalog_exports_the_same(
    world: World,
) -> None:
    first = streamed()
    for model in (Prompt, ResourceTemplate, Resource, Tool, Endpoint, Upstream):
        model.objects.all().delete()

    report = catalog_import(document=catalog_parse(first))

    assert report.changed
    assert streamed() == first


def test_the_api_streams_a_members_rows_and_never_a_secret(
    world: World, as_user: Callable[[User], APIClient]
) -> None:
    client = as_user(world.alpha.member)

    response = client.get("/api/v1/catalog/export/?format=json")

    assert response.status_code == 200
    assert isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"] == "application/json; charset=utf-8"
    body = response.getvalue().decode()
    assert body == catalog_dump(
        catalog_with_end(catalog_export(user=world.alpha.member)), fmt="json"
    )
    document = json.loads(body)
    assert {entry["team"] for entry in document["tools"]} == {"alpha"}
    assert [entry["name"] for entry in document["credentials"]] == ["alpha-credential"]
    assert "beta-" not in body and "site-" not in body
    assert not any(secret in body for secret in SECRETS)


def test_a_superusers_stream_holds_every_credential_but_no_secret(world: World) -> None:
    for fmt in ("yaml", "json"):
        text = streamed(user=world.superuser, fmt=fmt)
        names = [entry["name"] for entry in catalog_parse(text)["credentials"]]
        assert names == ["alpha-credential", "beta-credential"]
        assert not any(secret in text for secret in SECRETS)


def _generated(tools: int) -> dict[str, Any]:
    return {
        "format": catalog_io.FORMAT,
        "endpoints": [{"slug": "bulk", "auth_mode": "public"}],
        "tools": [
            {
                "name": f"tool_{n:05d}",
                "description": f"Generated tool {n}: says hello to a name, at some length.",
                "kind": "template",
                "config": {"template": "Hello {{ name }} from tool " + str(n)},
                "input_schema": {
                    "type": "object",
                    "properties": {"name": {"type": "string", "description": f"Tool {n}."}},
                },
                "endpoints": ["bulk"],
            }
            for n in range(tools)
        ],
    }


def _peak_bytes(read: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        read()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_what_an_export_holds_grows_by_a_chunk_not_by_the_catalog(
    db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rows per query made small, so both catalogs span several chunks.
    monkeypatch.setattr(catalog_io, "EXPORT_CHUNK", 40)

    def read_stream() -> int:
        return sum(len(piece) for piece in catalog_export_text())

    catalog_import(document=_generated(150))
    read_stream()  # warm: imports, the executors' registry, compiled queries
    small, small_size = _peak_bytes(read_stream), read_stream()
    catalog_import(document=_generated(1500))
    large, large_size = _peak_bytes(read_stream), read_stream()

    assert large_size > 9 * small_size
    # Ten times the catalog: the whole document built at once peaks about ten times higher
    # (the text alone is ten times longer); a stream holds one chunk of rows and one entry.
    assert large < 2 * small, (small, large)


def test_each_chunk_of_tools_costs_three_queries_however_large_the_catalog(
    db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rows, their endpoints and their groups: one query each per chunk, never one per
    # tool (docs/performance.md). Rows per query made small, so the catalogs span chunks.
    monkeypatch.setattr(catalog_io, "EXPORT_CHUNK", 10)
    Group.objects.create(name="callers")

    def queries(tools: int) -> int:
        document = _generated(tools)
        for entry in document["tools"]:
            entry["allowed_groups"] = ["callers"]
        catalog_import(document=document, prune=True)
        for fmt in ("yaml", "json"):
            with CaptureQueriesContext(connection) as captured:
                text = streamed(fmt=fmt)
            assert len(catalog_parse(text)["tools"]) == tools
        return len(captured.captured_queries)

    # 15, 35 and 55 tools: 2, 4 and 6 chunks (the last one short).
    small, middle, large = queries(15), queries(35), queries(55)

    assert middle - small == large - middle == 2 * 3
