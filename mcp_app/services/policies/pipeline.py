"""An endpoint's policies as its catalog snapshot carries them: ``endpoint_policies``.

``EndpointPolicies`` implements the protocol's ``CallPolicies`` port: the policies that are
not off, in order, each with its config prepared once when the snapshot is built (so a call
pays no query and no parsing). A policy whose kind is no longer configured, or whose config no
longer prepares, refuses the calls it applies to (in enforce mode): a guard that cannot run
must not let calls through unguarded.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableSequence
from dataclasses import dataclass
from typing import Any

from mcp_app.models import Endpoint, Policy
from mcp_app.protocol.policies import PolicyCall, PolicyRefused
from mcp_app.services.policies import get_policy_kinds
from mcp_app.services.policies.base import Decision, PolicyConfigError, PolicyKind

logger = logging.getLogger(__name__)

ENFORCE = Policy.Mode.ENFORCE.value
# The phase of a decision about the user's confirmation (asked where the tool runs).
CONFIRM = "confirm"
# The phase of a decision about what the call sends while it runs (progress, log lines).
NOTIFICATION = "notification"


class _Broken(PolicyKind):
    """Stands in for a policy that cannot run: it refuses what it guards."""

    kind = "broken"

    def before(self, prepared: Any, call: PolicyCall, arguments: Mapping[str, Any]) -> Decision:
        return Decision("refused", str(prepared), refusal="the policy cannot run (see its config)")


@dataclass(frozen=True, slots=True)
class _Entry:
    name: str
    kind: PolicyKind
    mode: str
    target: str
    prepared: Any

    def applies(self, call: PolicyCall) -> bool:
        if self.target and self.target != call.target:
            return False
        return not self.kind.operations or call.operation in self.kind.operations

    def record(
        self, decisions: MutableSequence[dict[str, Any]], phase: str, decision: Decision
    ) -> None:
        decisions.append(
            {
                "policy": self.name,
                "kind": self.kind.kind,
                "mode": self.mode,
                "phase": phase,
                "action": decision.action,
                "detail": decision.detail,
                "applied": self.mode == ENFORCE,
            }
        )


class EndpointPolicies:
    """The ``CallPolicies`` of one endpoint: its policies, in order."""

    def __init__(self, entries: tuple[_Entry, ...]) -> None:
        self.entries = entries

    def __len__(self) -> int:
        return len(self.entries)

    def before(
        self,
        call: PolicyCall,
        arguments: Mapping[str, Any],
        decisions: MutableSequence[dict[str, Any]],
    ) -> Mapping[str, Any]:
        for entry in self.entries:
            if entry.applies(call):
                decision = entry.kind.before(entry.prepared, call, arguments)
                arguments = _applied(entry, "before", decision, arguments, decisions)
        return arguments

    def after(
        self, call: PolicyCall, result: dict[str, Any], decisions: MutableSequence[dict[str, Any]]
    ) -> dict[str, Any]:
        for entry in self.entries:
            if entry.applies(call):
                decision = entry.kind.after(entry.prepared, call, result)
                result = _applied(entry, "after", decision, result, decisions)
        return result

    def notification(
        self,
        call: PolicyCall,
        content: dict[str, Any],
        decisions: MutableSequence[dict[str, Any]],
    ) -> dict[str, Any]:
        """What a notification of the call carries after the policies (recorded once per
        policy and call, not per notification: a long call may send thousands)."""
        for entry in self.entries:
            if not entry.applies(call):
                continue
            decision = entry.kind.notification(entry.prepared, call, content)
            if decision is None:
                continue
            if not any(
                seen.get("policy") == entry.name and seen.get("phase") == NOTIFICATION
                for seen in decisions
            ):
                entry.record(decisions, NOTIFICATION, decision)
            if entry.mode == ENFORCE and decision.replacement is not None:
                content = decision.replacement
        return content

    def confirmations(
        self,
        call: PolicyCall,
        arguments: Mapping[str, Any],
        decisions: MutableSequence[dict[str, Any]],
    ) -> list[tuple[str, str]]:
        """Return ``(policy, question)`` for each enforced policy that wants the user to
        confirm the call; a permissive one records that it would have asked."""
        asked = []
        for entry in self.entries:
            if not entry.applies(call):
                continue
            question = entry.kind.confirmation(entry.prepared, call, arguments)
            if question is None:
                continue
            if entry.mode == ENFORCE:
                asked.append((entry.name, question))
            else:
                entry.record(decisions, CONFIRM, Decision("would ask", question))
        return asked

    def confirmed(
        self,
        call: PolicyCall,
        policy: str,
        answer: str,
        decisions: MutableSequence[dict[str, Any]],
    ) -> None:
        """Record the user's ``answer`` to ``policy``'s question ("confirmed", "declined"...).

        Raises:
            PolicyRefused: the user did not confirm.
        """
        entry = next(entry for entry in self.entries if entry.name == policy)
        refusal = "" if answer == "confirmed" else "the user did not confirm the call"
        decision = Decision(answer, refusal=refusal)
        _applied(entry, CONFIRM, decision, None, decisions)

    def logged_arguments(self, call: PolicyCall, arguments: Any) -> Any:
        logged = None
        for entry in self.entries:
            if entry.mode == ENFORCE and entry.applies(call):
                masked = entry.kind.logged_arguments(
                    entry.prepared, call, logged if logged is not None else arguments
                )
                logged = masked if masked is not None else logged
        return logged


def _applied(
    entry: _Entry,
    phase: str,
    decision: Decision | None,
    value: Any,
    decisions: MutableSequence[dict[str, Any]],
) -> Any:
    """``value`` after ``decision`` (unchanged in permissive mode, which only records it).

    Raises:
        PolicyRefused: an enforced decision refuses the call.
    """
    if decision is None:
        return value
    entry.record(decisions, phase, decision)
    if entry.mode != ENFORCE:
        return value
    if decision.refusal:
        raise PolicyRefused(entry.name, decision.refusal)
    return decision.replacement if decision.replacement is not None else value


def endpoint_policies(endpoint: Endpoint) -> EndpointPolicies | None:
    """The policies ``endpoint`` applies (one query), or None when it has none that are on."""
    rows = endpoint.policies.exclude(mode=Policy.Mode.OFF).order_by("position", "id")
    entries = tuple(_entry(row) for row in rows)
    return EndpointPolicies(entries) if entries else None


def _entry(row: Policy) -> _Entry:
    kind = get_policy_kinds().get(row.kind)
    try:
        if kind is None:
            raise PolicyConfigError(f"No policy kind {row.kind!r} is configured.")
        return _Entry(row.name, kind, row.mode, row.target, kind.prepare(row.config))
    except PolicyConfigError as exc:
        logger.warning("Policy %s of endpoint %s cannot run: %s", row.name, row.endpoint_id, exc)
        return _Entry(row.name, _Broken(), row.mode, row.target, exc.message)
