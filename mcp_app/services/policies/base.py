"""What a policy kind is: ``PolicyKind``, and the ``Decision`` it returns about one call.

A kind is stateless and reads no rows: ``prepare`` checks a policy's config once (when it is
saved, and when the endpoint's catalog snapshot is built) and returns what ``before``,
``after``, ``confirmation`` and ``logged_arguments`` then receive on every call. Each returns
None when it has nothing to say about the call; the pipeline (``pipeline.py``) applies a
decision in enforce mode, records it without applying it in permissive mode, and never calls
a policy that is off.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp_app.protocol.policies import PolicyCall


class PolicyConfigError(Exception):
    """A policy's config is unusable: ``message`` says why, ``key`` names the config key."""

    def __init__(self, message: str, key: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.key = key


@dataclass(frozen=True, slots=True)
class Decision:
    """What a policy decided about one call.

    ``action`` is a short verb for the call log ("masked", "refused", "truncated"), ``detail``
    what it saw (never the secret it masked). ``replacement`` is the rewritten arguments or
    result (None: unchanged); ``refusal`` the reason the call is refused ("": it is not).
    """

    action: str
    detail: str = ""
    replacement: Any = None
    refusal: str = ""


class PolicyKind:
    """One kind of policy, listed by dotted path in ``MCP_POLICY_KINDS``."""

    kind: str = ""
    label: str = ""
    # The operations it applies to (protocol/policies.py names); empty: all of them.
    operations: frozenset[str] = frozenset()

    def prepare(self, config: Mapping[str, Any]) -> Any:
        """Check ``config`` and return what the other methods receive.

        Raises:
            PolicyConfigError: the config is unusable (shown to the operator).
        """
        raise NotImplementedError("subclasses of PolicyKind must provide prepare()")

    def before(
        self, prepared: Any, call: PolicyCall, arguments: Mapping[str, Any]
    ) -> Decision | None:
        """Decide about the call's arguments before it runs."""
        return None

    def after(self, prepared: Any, call: PolicyCall, result: Mapping[str, Any]) -> Decision | None:
        """Decide about the call's wire result (a CallToolResult, ReadResourceResult or
        GetPromptResult) after it ran."""
        return None

    def notification(
        self, prepared: Any, call: PolicyCall, content: Mapping[str, Any]
    ) -> Decision | None:
        """Decide about what a notification the call sends while it runs carries (a progress
        ``message``, or a log line's ``data`` and ``logger``); a replacement rewrites it."""
        return None

    def confirmation(
        self, prepared: Any, call: PolicyCall, arguments: Mapping[str, Any]
    ) -> str | None:
        """Return what to ask the user to confirm before the tool runs, or None: no question.

        Asked where the tool runs (``services.policies.confirm``), through elicitation.
        """
        return None

    def logged_arguments(self, prepared: Any, call: PolicyCall, arguments: Any) -> Any:
        """Return the arguments as the call log may keep them, or None when unchanged."""
        return None


def config_keys(config: Mapping[str, Any], allowed: set[str]) -> None:
    """Refuse a config that is not an object or holds a key outside ``allowed``.

    Raises:
        PolicyConfigError: naming the first unknown key.
    """
    if not isinstance(config, Mapping):
        raise PolicyConfigError("The config must be a JSON object.")
    for key in config:
        if key not in allowed:
            raise PolicyConfigError(
                f"Unknown key {key!r}; this kind takes: {', '.join(sorted(allowed))}.", key
            )
