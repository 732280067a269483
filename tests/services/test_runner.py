"""CatalogToolRunner and CatalogResourceReader over real snapshots.

The catalog is written synchronously; the async runner and reader are driven with
``async_to_sync``, as they touch no rows.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.files.base import ContentFile
from django.test import override_settings
from pytest_django import DjangoAssertNumQueries
from pytest_django.fixtures import Settings

from mcp_app.executors.base import ConfigError
from mcp_app.models import Endpoint, Tool
from mcp_app.protocol.catalog import CatalogSnapshot
from mcp_app.protocol.context import RequestContext, ToolCallContext
from mcp_app.protocol.results import ToolError, ToolResult
from mcp_app.services.catalog_writes import resource_create, resource_template_create, tool_create
from mcp_app.services.resources import CatalogResourceReader
from mcp_app.services.runner import CatalogToolRunner
from mcp_app.services.snapshots import build_snapshot

SAMPLES = "tests.executors.sample_tools"
runner = CatalogToolRunner()
reader = CatalogResourceReader()


def run(snapshot: CatalogSnapshot, name: str, arguments: Mapping[str, Any]) -> ToolResult:
    tool = snapshot.tool(name)
    assert tool is not None
    request = RequestContext(
        version="2026-07-28",
        catalog=snapshot,
        tools=runner,
        resources=reader,
        server_info={"name": "test", "version": "0"},
    )
    return async_to_sync(runner.run_tool)(tool, arguments, ToolCallContext(request, name))


def read(snapshot: CatalogSnapshot, uri: str) -> Sequence[Mapping[str, Any]]:
    resource = snapshot.resource(uri)
    assert resource is not None
    return async_to_sync(reader.read_resource)(resource)


def read_template(
    snapshot: CatalogSnapshot, name: str, uri: str, variables: Mapping[str, str]
) -> Sequence[Mapping[str, Any]] | None:
    template = next(t for t in snapshot.resource_templates if t.name == name)
    return async_to_sync(reader.read_template)(template, uri, variables)


def add_tool(
    endpoint: Endpoint, name: str, kind: str, config: Mapping[str, Any], **fields: Any
) -> None:
    tool_create(
        name=name, kind=kind, config=config, description=f"The {name} tool.",
        endpoints=[endpoint], **fields,
    )  # fmt: skip


@pytest.fixture
def media(settings: Settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


def test_a_tool_whose_config_stopped_preparing_stays_listed_and_its_calls_fail(
    endpoint: Endpoint, caplog: pytest.LogCaptureFixture
) -> None:
    add_tool(endpoint, "echo", Tool.Kind.PYTHON, {"function": "echo"})

    # The builtin module is no longer listed: the row names a function nobody registers.
    with (
        override_settings(MCP_PYTHON_TOOL_MODULES=[SAMPLES]),
        caplog.at_level(logging.WARNING, logger="mcp_app.services.snapshots"),
    ):
        snapshot = build_snapshot(endpoint)

    assert [tool.name for tool in snapshot.tools] == ["echo"]
    assert "Tool echo" in caplog.text and "does not prepare" in caplog.text
    with pytest.raises(ConfigError, match="No python tool function named 'echo'"):
        run(snapshot, "echo", {})


def test_runner_runs_python_and_template_tools(endpoint: Endpoint) -> None:
    add_tool(endpoint, "echo", Tool.Kind.PYTHON, {"function": "echo"})
    add_tool(
        endpoint, "greet", Tool.Kind.TEMPLATE, {"template": "Hello {{ name }}!"},
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
    )  # fmt: skip
    snapshot = build_snapshot(endpoint)

    assert run(snapshot, "echo", {"message": "hi"}) == ToolResult.text("hi")
    assert run(snapshot, "greet", {"name": "Ann"}) == ToolResult.text("Hello Ann!")


@override_settings(MCP_PYTHON_TOOL_MODULES=[SAMPLES], MCP_INLINE_TOOL_TIMEOUT_SECONDS="0.05")
def test_a_tool_past_the_inline_timeout_is_a_tool_error(endpoint: Endpoint) -> None:
    add_tool(endpoint, "slow", Tool.Kind.PYTHON, {"function": "sample_slow"})

    with pytest.raises(ToolError) as caught:
        run(build_snapshot(endpoint), "slow", {})

    assert caught.value.message == "Tool timed out after 0.05 s"


@override_settings(MCP_PYTHON_TOOL_MODULES=[SAMPLES])
def test_a_tools_own_timeout_error_is_not_reported_as_the_deadline(endpoint: Endpoint) -> None:
    add_tool(endpoint, "flaky", Tool.Kind.PYTHON, {"function": "sample_own_timeout"})

    with pytest.raises(ToolError) as caught:
        run(build_snapshot(endpoint), "flaky", {})

    assert (
        caught.value.message == "sample_own_timeout failed: TimeoutError: upstream did not answer"
    )


def test_text_resources_are_read_from_the_snapshot_without_queries(
    endpoint: Endpoint, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    resource_create(
        uri="demo://readme", name="r", mime_type="text/markdown", text="# Hi",
        endpoints=[endpoint],
    )  # fmt: skip
    snapshot = build_snapshot(endpoint)

    with django_assert_num_queries(0):
        contents = read(snapshot, "demo://readme")

    assert contents == [{"uri": "demo://readme", "mimeType": "text/markdown", "text": "# Hi"}]


def test_file_resources_are_served_as_blob_or_text_by_type(endpoint: Endpoint, media: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n\x00"
    resource_create(
        uri="file:///logo.png", name="logo", mime_type="image/png",
        file=ContentFile(png, name="logo.png"), endpoints=[endpoint],
    )  # fmt: skip
    resource_create(
        uri="file:///data.json", name="data", mime_type="application/json",
        file=ContentFile(b'{"a": 1}', name="data.json"), endpoints=[endpoint],
    )  # fmt: skip
    snapshot = build_snapshot(endpoint)

    assert read(snapshot, "file:///data.json") == [
        {"uri": "file:///data.json", "mimeType": "application/json", "text": '{"a": 1}'}
    ]
    assert read(snapshot, "file:///logo.png") == [
        {"uri": "file:///logo.png", "mimeType": "image/png", "blob": base64.b64encode(png).decode()}
    ]
    logo = snapshot.resource("file:///logo.png")
    assert logo is not None and logo.size == len(png)


def test_templates_resolve_through_text_templates_and_python_functions(
    endpoint: Endpoint,
) -> None:
    resource_template_create(
        uri_template="demo://notes/{topic}", name="notes", kind="template",
        config={"template": "Notes on {{ topic }}"}, mime_type="text/markdown",
        endpoints=[endpoint],
    )  # fmt: skip
    resource_template_create(
        uri_template="demo://echo/{x}", name="echo", kind="python",
        config={"function": "echo"}, endpoints=[endpoint],
    )  # fmt: skip
    snapshot = build_snapshot(endpoint)

    note = read_template(snapshot, "notes", "demo://notes/mcp", {"topic": "mcp"})
    echoed = read_template(snapshot, "echo", "demo://echo/1", {"x": "1"})

    assert note == [
        {"uri": "demo://notes/mcp", "mimeType": "text/markdown", "text": "Notes on mcp"}
    ]
    assert echoed is not None
    assert echoed[0]["mimeType"] == "application/json"


@override_settings(MCP_PYTHON_TOOL_MODULES=[SAMPLES])
def test_python_resolvers_may_return_bytes_or_nothing(endpoint: Endpoint) -> None:
    resource_template_create(
        uri_template="demo://bin/{id}", name="bin", kind="python",
        config={"function": "sample_bytes"}, mime_type="application/octet-stream",
        endpoints=[endpoint],
    )  # fmt: skip
    snapshot = build_snapshot(endpoint)

    found = read_template(snapshot, "bin", "demo://bin/1", {"id": "1"})
    missing = read_template(snapshot, "bin", "demo://bin/missing", {"id": "missing"})

    assert found == [
        {"uri": "demo://bin/1", "mimeType": "application/octet-stream", "blob": "AAE="}
    ]
    assert missing is None
