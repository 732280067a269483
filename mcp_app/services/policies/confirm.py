"""Asking the user to confirm a call before its tool runs, for policies that want it.

Asked where the tool runs (``services.execution.execute_tool``: inline, on a worker, in a run
held open between rounds), through the same ``ToolCallContext`` a tool asks with, so every
era and mode works as it does for a tool that asks: a legacy call sends
``elicitation/create`` on its stream (from a worker, through the web process that follows
it); a 2026-07-28 call answers ``input_required`` and runs again on the retry, which carries
the answer (under a key of the policy's, stable across rounds). Nothing of the tool has run
when the user declines.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_app.protocol.catalog import ToolDef
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.policies import TOOLS_CALL, PolicyCall, PolicyRefused
from mcp_app.protocol.results import Outcome, ToolError
from mcp_app.services.policies.pipeline import EndpointPolicies

# The form the user fills in: one checkbox.
CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "confirm": {"type": "boolean", "title": "Run it", "description": "Confirm the call."}
    },
    "required": ["confirm"],
}


class PolicyDeclined(ToolError):
    """The user did not confirm (or could not be asked): an error result, logged as rejected."""

    outcome = Outcome.REJECTED


async def policy_confirm(tool: ToolDef, arguments: Mapping[str, Any], ctx: ToolCallContext) -> None:
    """Ask the user every confirmation the endpoint's policies want before ``tool`` runs.

    Raises:
        PolicyDeclined: the user declined, or this client cannot be asked (legacy).
        InputRequired: a 2026-07-28 call has no answer yet (the client retries with it).
        MissingClientCapability: a 2026-07-28 client that did not declare elicitation.
    """
    policies = ctx.request.catalog.policies
    if not isinstance(policies, EndpointPolicies):
        return
    call = PolicyCall(TOOLS_CALL, tool.name, tool.annotations)
    decisions = ctx.record.decisions
    for policy, question in policies.confirmations(call, arguments, decisions):
        try:
            answer = await ctx.elicit(question, CONFIRM_SCHEMA, key=f"policy-confirm-{policy}")
        except ToolError as failure:
            # A legacy client without elicitation, or a call that cannot stream.
            _record(policies, call, policy, "not asked", decisions)
            raise PolicyDeclined(f"Refused by policy {policy}: {failure.message}") from None
        content = answer.get("content")
        accepted = answer.get("action") == "accept" and isinstance(content, Mapping)
        confirmed = accepted and content.get("confirm") is True  # type: ignore[union-attr]
        _record(policies, call, policy, "confirmed" if confirmed else "declined", decisions)


def _record(
    policies: EndpointPolicies,
    call: PolicyCall,
    policy: str,
    answer: str,
    decisions: list[dict[str, Any]],
) -> None:
    try:
        policies.confirmed(call, policy, answer, decisions)
    except PolicyRefused as refused:
        raise PolicyDeclined(refused.message) from None
