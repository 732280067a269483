"""The registry of tool kinds: ``get_executor(kind)``.

Executor classes are listed by dotted path in the ``MCP_EXECUTORS`` setting (default: the python,
template, http and mcp_upstream kinds). The registry is built once and rebuilt when that setting
changes, as ``django.contrib.auth.hashers.get_hashers`` does.
"""

from __future__ import annotations

import functools
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from mcp_app.executors.base import Executor, setting_list

DEFAULT_EXECUTORS: tuple[str, ...] = (
    "mcp_app.executors.python.PythonExecutor",
    "mcp_app.executors.template.TemplateExecutor",
    "mcp_app.executors.http.HttpExecutor",
    "mcp_app.executors.mcp_upstream.McpUpstreamExecutor",
)


@functools.lru_cache
def get_executors() -> dict[str, Executor[Any]]:
    """Return the configured executors by kind, in settings order.

    Raises:
        ImproperlyConfigured: a listed class is not an Executor with a kind, or kinds repeat.
    """
    executors: dict[str, Executor[Any]] = {}
    for path in setting_list("MCP_EXECUTORS", DEFAULT_EXECUTORS):
        executor_class = import_string(path)
        executor = executor_class()
        if not isinstance(executor, Executor) or not executor.kind:
            raise ImproperlyConfigured(f"{path} is not an Executor with a kind.")
        if executor.kind in executors:
            raise ImproperlyConfigured(
                f"Two executors in MCP_EXECUTORS claim kind {executor.kind!r}."
            )
        executors[executor.kind] = executor
    return executors


def get_executor(kind: str) -> Executor[Any]:
    """Return the executor of ``kind``.

    Raises:
        LookupError: no executor of that kind is configured.
    """
    try:
        return get_executors()[kind]
    except KeyError:
        raise LookupError(f"no executor is registered for tool kind {kind!r}") from None


def executor_kinds() -> list[tuple[str, str]]:
    """Return ``(kind, label)`` pairs for choice lists."""
    return [(kind, executor.label or kind) for kind, executor in get_executors().items()]


@receiver(setting_changed)
def _reset_executors(*, setting: str, **kwargs: Any) -> None:
    if setting == "MCP_EXECUTORS":
        get_executors.cache_clear()
