"""System checks: misconfigured executors or python tool modules fail ``manage.py check``.

With a database (``check --database default``, ``migrate``), the catalog rows are also checked
against the executors, as a warning: a row whose function went away fails only that tool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.core.checks import CheckMessage, Error, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError

from mcp_app.executors import get_executors
from mcp_app.executors.base import ConfigError
from mcp_app.executors.python import resource_functions, tool_functions
from mcp_app.models import ResourceTemplate, Tool


@register("mcp")
def check_executors(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    try:
        executors = get_executors()
        tool_functions()
        resource_functions()
    except (ImproperlyConfigured, ImportError) as exc:
        return [Error(str(exc), id="mcp_app.E001")]
    return [
        Error(
            f"Tool kind {kind!r} has no executor in MCP_EXECUTORS.",
            hint="Add the executor class of that kind to MCP_EXECUTORS.",
            id="mcp_app.E002",
        )
        for kind in Tool.Kind.values
        if kind not in executors
    ]


@register("mcp", "database")
def check_catalog_rows(
    app_configs: Sequence[AppConfig] | None = None,
    databases: Sequence[str] | None = None,
    **kwargs: Any,
) -> list[CheckMessage]:
    if not databases:
        return []
    try:
        executors = get_executors()
        functions = resource_functions()
    except (ImproperlyConfigured, ImportError):
        return []  # reported by check_executors
    messages: list[CheckMessage] = []
    try:
        for database in databases:
            for tool in Tool.objects.using(database).only("pk", "name", "kind", "config"):
                executor = executors.get(tool.kind)
                try:
                    if executor is None:
                        raise ConfigError(f"no executor for kind {tool.kind!r}")
                    executor.validate_config(tool.config)
                except ConfigError as exc:
                    messages.append(
                        Warning(
                            f"Tool {tool.name!r} (id {tool.pk}) cannot run: {exc}",
                            obj=tool,
                            id="mcp_app.W001",
                        )
                    )
            templates = ResourceTemplate.objects.using(database).filter(
                kind=ResourceTemplate.Kind.PYTHON
            )
            messages.extend(
                Warning(
                    f"Resource template {template.uri_template!r} names the unregistered "
                    f"resource function {template.config.get('function')!r}.",
                    obj=template,
                    id="mcp_app.W002",
                )
                for template in templates
                if template.config.get("function") not in functions
            )
    except DatabaseError:
        # Before the first migrate the tables do not exist yet; nothing to check.
        return []
    return messages
