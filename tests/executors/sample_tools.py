"""Python tool and resource functions registered only when a test lists this module."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_app.executors.python import mcp_resource_function, mcp_tool_function
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.results import ToolResult


@mcp_tool_function("sample_sync_text", description="Sync, returns text.")
def sync_text(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    arguments["mutated"] = True
    return "plain"


@mcp_tool_function("sample_list", description="Returns a list.")
async def returns_list(arguments: dict[str, Any], ctx: ToolCallContext) -> list[int]:
    return [1, 2]


@mcp_tool_function("sample_result", description="Returns a ToolResult.")
async def returns_result(arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
    return ToolResult(content=[{"type": "image", "data": "AAAA", "mimeType": "image/png"}])


@mcp_tool_function("sample_none", description="Returns nothing.")
async def returns_none(arguments: dict[str, Any], ctx: ToolCallContext) -> None:
    return None


@mcp_tool_function("sample_bad", description="Returns something that is not JSON.")
async def returns_set(arguments: dict[str, Any], ctx: ToolCallContext) -> set[int]:
    return {1}


@mcp_tool_function("sample_slow", description="Waits on an event that never fires.")
async def slow(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    import asyncio

    await asyncio.Event().wait()
    return "never"


@mcp_tool_function("sample_own_timeout", description="Fails with its own TimeoutError.")
async def own_timeout(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    raise TimeoutError("upstream did not answer")


@mcp_resource_function("sample_bytes")
def sample_bytes(uri: str, variables: Mapping[str, str]) -> bytes | None:
    return None if variables.get("id") == "missing" else b"\x00\x01"


@mcp_resource_function("echo")
def duplicate_echo(uri: str, variables: Mapping[str, str]) -> str:
    return "duplicate of the built-in echo"


@mcp_tool_function("sample_key_error", description="Reads an argument it never checks.")
def key_error(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    return str(arguments["text"])
