"""The port through which operator policies see a call before and after it runs.

A policy (``services/policies``) may read or rewrite what a ``tools/call``, ``resources/read``
or ``prompts/get`` receives, refuse it with a reason, and read or rewrite what it answers,
including what a tool call tells the client while it runs (its progress messages and log
notifications: ``ToolCallContext`` passes them through ``notification``).
The handlers call the endpoint's ``CallPolicies`` (carried by its catalog snapshot; None when
the endpoint has none, which costs a request nothing) at one place per operation, and each
decision a policy takes is appended to the request's ``PolicyRecord``, which dispatch makes
for each request and passes explicitly to the handler, ``run_tool`` and the running tool's
``ToolCallContext``, and which the reply carries to the call log. Pure: JSON in, JSON out.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableSequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mcp_app.protocol.errors import InvalidParams, McpError
from mcp_app.protocol.results import Outcome

# The operations policies apply to, by their method names.
TOOLS_CALL = "tools/call"
RESOURCES_READ = "resources/read"
PROMPTS_GET = "prompts/get"


@dataclass(frozen=True, slots=True)
class PolicyCall:
    """What a policy knows about the call it guards."""

    operation: str
    # The tool or prompt name, or the resource URI.
    target: str
    # The tool's annotations (destructiveHint...); empty for resources and prompts.
    annotations: Mapping[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class PolicyRecord:
    """What the endpoint's policies did about one request, for its call log.

    Made by dispatch for each request and handed down explicitly (never kept on the
    ``RequestContext``): the policies append their decisions, and the tools and prompts
    handlers set the arguments the call log keeps when a policy masked them.
    """

    decisions: list[dict[str, Any]] = field(default_factory=list)
    # The arguments the call log keeps in place of those received (None: as received).
    logged_arguments: Any = None


class PolicyRefused(Exception):
    """A policy in enforce mode refused the call: nothing ran.

    A tool call answers an error result with ``message``; a resource read or prompt get a
    JSON-RPC error carrying it.
    """

    def __init__(self, policy: str, reason: str) -> None:
        super().__init__(reason)
        self.policy = policy
        self.reason = reason

    @property
    def message(self) -> str:
        return f"Refused by policy {self.policy}: {self.reason}"


def policy_refusal(refused: PolicyRefused) -> McpError:
    """The JSON-RPC error of a refused resource read or prompt get (-32602, our choice: the
    request's input is what the policy refused), naming the policy in ``data``."""
    error = InvalidParams(refused.message, {"policy": refused.policy, "reason": refused.reason})
    error.outcome = Outcome.REJECTED
    return error


class CallPolicies(Protocol):
    """An endpoint's ordered policies, applied to one call's input or output."""

    def before(
        self,
        call: PolicyCall,
        arguments: Mapping[str, Any],
        decisions: MutableSequence[dict[str, Any]],
    ) -> Mapping[str, Any]:
        """Return the arguments the call runs with (maybe rewritten).

        Raises:
            PolicyRefused: a policy in enforce mode refused the call.
        """
        ...

    def after(
        self, call: PolicyCall, result: dict[str, Any], decisions: MutableSequence[dict[str, Any]]
    ) -> dict[str, Any]:
        """Return the wire result the caller gets (maybe rewritten)."""
        ...

    def logged_arguments(self, call: PolicyCall, arguments: Any) -> Any:
        """Return the arguments as the call log may keep them (masked where a policy says)."""
        ...

    def notification(
        self,
        call: PolicyCall,
        content: dict[str, Any],
        decisions: MutableSequence[dict[str, Any]],
    ) -> dict[str, Any]:
        """Return what a notification the call sends while it runs carries (maybe rewritten):
        ``content`` is the progress ``message`` or the log ``data`` (and ``logger``)."""
        ...
