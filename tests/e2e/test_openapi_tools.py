"""OpenAPI import end to end: operations of a document describing the local upstream become
HTTP tools, which the official SDK client calls on the live server once they are enabled."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client

from mcp_app.services.catalog_writes import endpoint_create
from mcp_app.services.openapi import openapi_parse_text, openapi_read, openapi_tools_create
from tests.support.live import flush_database
from tests.support.openapi_docs import as_text, upstream_api
from tests.support.upstream import Upstream, run_upstream

pytestmark = pytest.mark.django_db

SLUG = "openapi-e2e"


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    with run_upstream() as server:
        yield server


@pytest.fixture(scope="module")
def openapi_url(live_server_url: str, upstream: Upstream, django_db_blocker: Any) -> Iterator[str]:
    with django_db_blocker.unblock():
        endpoint = endpoint_create(slug=SLUG, title="Imported from OpenAPI", auth_mode="public")
        document = openapi_read(openapi_parse_text(as_text(upstream_api(upstream.base_url))))
        tools = openapi_tools_create(
            document=document,
            keys=[operation.key for operation in document.operations],
            endpoints=[endpoint],
            # The SSRF guard refuses loopback unless the tool's allow-list names it.
            allow_networks=["127.0.0.1/32"],
        )
        for tool in tools:  # the operator's review: enable each draft
            tool.enabled = True
            tool.save()
    yield f"{live_server_url}/mcp/{SLUG}"
    flush_database(django_db_blocker)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_imported_operations_are_listed_and_call_the_upstream(
    openapi_url: str, mode: str
) -> None:
    async with asyncio.timeout(20), Client(openapi_url, mode=mode) as client:
        listed = await client.list_tools()
        fetched = await client.call_tool("getItem", {"item": "a/b", "q": "x y", "X-Trace": "t-1"})
        stored = await client.call_tool("putItem", {"item": "7", "label": "seven"})
        noted = await client.call_tool("createNote", {"text": "hi", "pinned": True})

    assert sorted(tool.name for tool in listed.tools) == ["createNote", "getItem", "putItem"]
    assert not fetched.is_error
    echo = fetched.structured_content
    assert (echo["method"], echo["raw_path"]) == ("GET", "/echo/items/a%2Fb?q=x%20y")
    assert echo["headers"]["x-trace"] == "t-1"
    assert not stored.is_error
    assert stored.structured_content["raw_path"] == "/echo/items/7"
    assert stored.structured_content["body"] == '{"label":"seven"}'
    assert not noted.is_error
    assert noted.structured_content["body"] == '{"text":"hi","pinned":true}'


@pytest.mark.parametrize("mode", ["legacy"])
async def test_arguments_failing_the_imported_schema_are_an_error_result(
    openapi_url: str, mode: str
) -> None:
    async with asyncio.timeout(20), Client(openapi_url, mode=mode) as client:
        result = await client.call_tool("createNote", {"pinned": True})

    assert result.is_error
    assert result.content[0].text == "Invalid arguments: 'text' is a required property"
