"""The write path of policies: checked by their kind, saved and deleted inside ``writing``.

The admin and the API call these; neither saves a policy itself. ``policy_check`` is the
model's own validation plus the kind's: the kind must be configured and the config must
prepare (``PolicyKind.prepare``); errors come as one ``ValidationError`` keyed by field
(``config`` for the config's, naming the key). Saving or deleting a policy bumps its
endpoint's catalog version (``mcp_app.signals``), so every process rebuilds its snapshot.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError

from mcp_app.models import Policy
from mcp_app.services.catalog_writes import Actor, writing
from mcp_app.services.policies import get_policy_kinds
from mcp_app.services.policies.base import PolicyConfigError


def policy_check(policy: Policy) -> None:
    """Check ``policy`` as it would be saved.

    Raises:
        ValidationError: by field name; nothing was written.
    """
    errors: dict[str, list[str]] = {}
    try:
        policy.full_clean()
    except ValidationError as exc:
        errors = dict(exc.message_dict)
    kind = get_policy_kinds().get(policy.kind)
    if kind is None:
        if "kind" not in errors:
            known = ", ".join(get_policy_kinds()) or "none"
            errors["kind"] = [f"Unknown policy kind {policy.kind!r}; configured: {known}."]
    elif "config" not in errors:
        try:
            kind.prepare(policy.config)
        except PolicyConfigError as exc:
            where = f"{exc.key}: " if exc.key else ""
            errors["config"] = [f"{where}{exc.message}"]
    if errors:
        raise ValidationError(errors)


def policy_save(policy: Policy, *, actor: Actor, source: str | None) -> None:
    """Check ``policy`` and save it.

    Raises:
        ValidationError: by field name; nothing was written.
    """
    with writing(policy, actor=actor, source=source):
        policy_check(policy)
        policy.save()


def policy_delete(policy: Policy, *, actor: Actor, source: str | None) -> None:
    """Delete ``policy``; its endpoint's next calls run without it."""
    with writing(policy, actor=actor, source=source):
        policy.delete()
