"""The registry of policy kinds: ``get_policy_kinds()``.

Kinds are listed by dotted path in the ``MCP_POLICY_KINDS`` setting (default: the built-in
mask, deny, max_result_size and confirm_destructive kinds); a project adds its own by listing
its class. The registry is built once and rebuilt when that setting changes, as
``mcp_app.executors`` is.
"""

from __future__ import annotations

import functools
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from mcp_app.executors.base import setting_list
from mcp_app.services.policies.base import PolicyKind

DEFAULT_POLICY_KINDS: tuple[str, ...] = (
    "mcp_app.services.policies.builtin.MaskPolicy",
    "mcp_app.services.policies.builtin.DenyPolicy",
    "mcp_app.services.policies.builtin.MaxResultSizePolicy",
    "mcp_app.services.policies.builtin.ConfirmDestructivePolicy",
)


@functools.lru_cache
def get_policy_kinds() -> dict[str, PolicyKind]:
    """Return the configured policy kinds by name, in settings order.

    Raises:
        ImproperlyConfigured: a listed class is not a PolicyKind with a kind, or kinds repeat.
    """
    kinds: dict[str, PolicyKind] = {}
    for path in setting_list("MCP_POLICY_KINDS", DEFAULT_POLICY_KINDS):
        kind = import_string(path)()
        if not isinstance(kind, PolicyKind) or not kind.kind:
            raise ImproperlyConfigured(f"{path} is not a PolicyKind with a kind.")
        if kind.kind in kinds:
            raise ImproperlyConfigured(f"Two classes in MCP_POLICY_KINDS claim {kind.kind!r}.")
        kinds[kind.kind] = kind
    return kinds


def policy_kind_choices() -> list[tuple[str, str]]:
    """Return ``(kind, label)`` pairs for choice lists."""
    return [(name, kind.label or name) for name, kind in get_policy_kinds().items()]


@receiver(setting_changed)
def _reset_policy_kinds(*, setting: str, **kwargs: Any) -> None:
    if setting == "MCP_POLICY_KINDS":
        get_policy_kinds.cache_clear()
