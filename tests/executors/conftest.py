"""Fixtures for executor tests: a ToolCallContext whose notifications are collected."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from mcp_app.protocol.catalog import CatalogSnapshot, EndpointInfo
from mcp_app.protocol.context import RequestContext, ToolCallContext
from mcp_app.services.resources import CatalogResourceReader
from mcp_app.services.runner import CatalogToolRunner
from tests.support.sockets import connections  # noqa: F401  (fixture)


@dataclass
class Sent:
    """Notifications a tool sent on its request stream."""

    messages: list[Mapping[str, Any]] = field(default_factory=list)

    async def __call__(self, message: Mapping[str, Any]) -> None:
        self.messages.append(message)

    def methods(self) -> list[str]:
        return [message["method"] for message in self.messages]


@pytest.fixture
def sent() -> Sent:
    return Sent()


@pytest.fixture
def ctx(sent: Sent) -> ToolCallContext:
    """A 2025-11-25 call context that asked for progress and debug-level logs."""
    request = RequestContext(
        version="2025-11-25",
        catalog=CatalogSnapshot(endpoint=EndpointInfo(slug="test")),
        tools=CatalogToolRunner(),
        resources=CatalogResourceReader(),
        server_info={"name": "test", "version": "0"},
        progress_token="progress-1",
        log_level="debug",
        send=sent,
    )
    return ToolCallContext(request, "tool")
