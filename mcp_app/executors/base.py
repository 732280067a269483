"""The Executor interface every tool kind implements, ConfigError, and the list-setting reader.

An executor turns a tool's plain ``config`` plus the call's ``arguments`` into a ``ToolResult``.
It never touches rows or the transport, so the same code runs inline in a web process or in a
Celery worker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings

from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.results import ToolResult


def setting_list(name: str, default: Sequence[str]) -> list[str]:
    """Read a list setting; a string (as set from the environment) is split on commas."""
    value = getattr(settings, name, default)
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return list(value)


class ConfigError(Exception):
    """A tool's config is unusable; the message is shown to the operator in the admin."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Executor:
    """One tool kind. Subclasses set ``kind`` and ``label`` and implement both methods."""

    kind: str = ""
    label: str = ""

    def validate_config(self, config: Mapping[str, Any]) -> None:
        """Check ``config`` once, when the operator saves the tool.

        Raises:
            ConfigError: the config cannot run; the message says why.
        """
        raise NotImplementedError("subclasses of Executor must provide validate_config()")

    async def run(
        self, config: Mapping[str, Any], arguments: Mapping[str, Any], ctx: ToolCallContext
    ) -> ToolResult:
        """Run the tool with arguments that already passed its input schema.

        Raises:
            ToolError: a failure the caller should read (becomes ``isError: true``).
        """
        raise NotImplementedError("subclasses of Executor must provide run()")
