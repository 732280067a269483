"""The registry of resource-template kinds: ``get_resolver(kind)``.

Resolver classes are listed by dotted path in the ``MCP_RESOURCE_TEMPLATE_KINDS`` setting
(default: the python, template and upstream kinds). The registry is built once and rebuilt when
that setting changes, as the executors' (``mcp_app.executors.get_executors``) is. Nothing
outside a kind's module names a kind: the model, admin, API, catalog import and the
``resources/read`` path ask the registry.
"""

from __future__ import annotations

import functools
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from mcp_app.executors.base import setting_list
from mcp_app.executors.resource_kinds.base import Resolver

DEFAULT_RESOURCE_TEMPLATE_KINDS: tuple[str, ...] = (
    "mcp_app.executors.resource_kinds.python.PythonResolver",
    "mcp_app.executors.resource_kinds.template.TextTemplateResolver",
    "mcp_app.executors.resource_kinds.upstream.UpstreamResolver",
)


@functools.lru_cache
def get_resolvers() -> dict[str, Resolver]:
    """Return the configured resolvers by kind, in settings order.

    Raises:
        ImproperlyConfigured: a listed path does not import, is not a Resolver class with a
            kind, or kinds repeat.
    """
    resolvers: dict[str, Resolver] = {}
    for path in setting_list("MCP_RESOURCE_TEMPLATE_KINDS", DEFAULT_RESOURCE_TEMPLATE_KINDS):
        try:
            resolver_class = import_string(path)
        except ImportError as exc:
            raise ImproperlyConfigured(f"{path} cannot be imported: {exc}") from exc
        if not (isinstance(resolver_class, type) and issubclass(resolver_class, Resolver)):
            raise ImproperlyConfigured(f"{path} is not a Resolver class.")
        resolver = resolver_class()
        if not resolver.kind:
            raise ImproperlyConfigured(f"{path} names no kind.")
        if resolver.kind in resolvers:
            raise ImproperlyConfigured(
                f"Two resolvers in MCP_RESOURCE_TEMPLATE_KINDS claim kind {resolver.kind!r}."
            )
        resolvers[resolver.kind] = resolver
    return resolvers


def get_resolver(kind: str) -> Resolver:
    """Return the resolver of ``kind``.

    Raises:
        LookupError: no resolver of that kind is configured.
    """
    try:
        return get_resolvers()[kind]
    except KeyError:
        raise LookupError(
            f"no resolver is registered for resource template kind {kind!r}"
        ) from None


@receiver(setting_changed)
def _reset_resolvers(*, setting: str, **kwargs: Any) -> None:
    if setting == "MCP_RESOURCE_TEMPLATE_KINDS":
        get_resolvers.cache_clear()
