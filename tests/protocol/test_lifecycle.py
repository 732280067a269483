"""``initialize`` helpers, ``server/discover`` and ``ping``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp_types._v2025_11_25 as v2025
import mcp_types._v2026_07_28 as v2026
import pytest

from mcp_app.protocol.catalog import CatalogSnapshot, EndpointInfo
from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.dispatch import handle_request
from mcp_app.protocol.errors import InvalidParams
from mcp_app.protocol.handlers.lifecycle import initialize_result, parse_initialize

from .conftest import SERVER_INFO

MakeContext = Callable[..., RequestContext]


def init_params(version: Any) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": {"roots": {"listChanged": True}},
        "clientInfo": {"name": "inspector", "version": "1.0"},
    }


@pytest.mark.spec("2025-11-25", "basic/lifecycle", "server echoes a version it supports")
@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_initialize_echoes_a_served_legacy_version(version: str) -> None:
    assert parse_initialize(init_params(version)) == (
        version,
        {"roots": {"listChanged": True}},
        {"name": "inspector", "version": "1.0"},
    )


@pytest.mark.spec("2025-11-25", "basic/lifecycle", "otherwise answer the latest it supports")
@pytest.mark.parametrize("version", ["2026-07-28", "2099-01-01", "1.0"])
def test_initialize_counter_offers_unknown_or_modern_versions(version: str) -> None:
    assert parse_initialize(init_params(version))[0] == "2025-11-25"


@pytest.mark.parametrize(
    "params",
    [
        None,
        {},
        {"protocolVersion": 2025},
        {"protocolVersion": "2025-11-25", "capabilities": []},
        {"protocolVersion": "2025-11-25", "clientInfo": "me"},
    ],
)
def test_malformed_initialize_is_invalid_params(params: dict[str, Any] | None) -> None:
    with pytest.raises(InvalidParams):
        parse_initialize(params)


def test_initialize_tolerates_missing_capabilities_and_client_info() -> None:
    assert parse_initialize({"protocolVersion": "2025-06-18"}) == ("2025-06-18", {}, {})


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_initialize_result_validates_and_is_tailored(
    catalog: CatalogSnapshot, version: str
) -> None:
    result = initialize_result(version, catalog, SERVER_INFO)
    v2025.InitializeResult.model_validate(result)
    assert result["protocolVersion"] == version
    assert result["instructions"] == "Use add to add."
    assert result["capabilities"]["tools"] == {"listChanged": True}
    assert result["capabilities"]["resources"] == {"subscribe": True, "listChanged": True}
    assert result["capabilities"]["prompts"] == {"listChanged": True}
    assert result["capabilities"]["logging"] == {}
    assert ("completions" in result["capabilities"]) is (version != "2024-11-05")
    # 2025-11-25 core tasks (basic/utilities/tasks "Server Capabilities"); none before.
    tasks = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    assert result["capabilities"].get("tasks") == (tasks if version == "2025-11-25" else None)
    assert "extensions" not in result["capabilities"]
    assert "resultType" not in result


def test_server_info_grows_fields_with_the_revision(catalog: CatalogSnapshot) -> None:
    assert initialize_result("2025-03-26", catalog, SERVER_INFO)["serverInfo"] == {
        "name": "mcphost",
        "version": "0.1.0",
    }
    assert initialize_result("2025-06-18", catalog, SERVER_INFO)["serverInfo"] == {
        "name": "mcphost",
        "version": "0.1.0",
        "title": "MCP Host",
    }
    assert initialize_result("2025-11-25", catalog, SERVER_INFO)["serverInfo"] == SERVER_INFO


def test_empty_instructions_are_left_out() -> None:
    catalog = CatalogSnapshot(endpoint=EndpointInfo(slug="x"))
    assert "instructions" not in initialize_result("2025-11-25", catalog, SERVER_INFO)


@pytest.mark.spec("2026-07-28", "basic/lifecycle", "server/discover MUST be implemented")
async def test_discover_lists_modern_versions_with_the_cacheable_envelope(
    make_ctx: MakeContext,
) -> None:
    result = await handle_request(make_ctx("2026-07-28"), "server/discover", {"_meta": {}})
    v2026.DiscoverResult.model_validate(result)
    assert result == {
        "supportedVersions": ["2026-07-28"],
        "capabilities": {
            "tools": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": True},
            "prompts": {"listChanged": True},
            "logging": {},
            "completions": {},
            "extensions": {"io.modelcontextprotocol/tasks": {}},
        },
        "instructions": "Use add to add.",
        "resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
        "ttlMs": 0,
        "cacheScope": "public",
    }


@pytest.mark.spec("2025-11-25", "basic/utilities/ping", "receiver answers promptly with {}")
@pytest.mark.parametrize("version", ["2024-11-05", "2025-11-25"])
async def test_ping_answers_an_empty_result(make_ctx: MakeContext, version: str) -> None:
    assert await handle_request(make_ctx(version), "ping", None) == {}
