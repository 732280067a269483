"""The Policy model: one operator rule an endpoint applies around its calls.

An endpoint's policies run in ``position`` order before each ``tools/call``, ``resources/read``
and ``prompts/get`` it serves (they may rewrite the arguments or refuse the call) and after it
(they may rewrite the result). What a kind does, and which config it takes, is the kind's
(``services/policies``, registered by dotted path in ``MCP_POLICY_KINDS``): the write path
(``services.policies.writes``) checks the config with it, so the model names no kind.
"""

from __future__ import annotations

from django.db import models
from simple_history.models import HistoricalRecords

from mcp_app.models.base import TimestampedModel


class Policy(TimestampedModel):
    class Mode(models.TextChoices):
        ENFORCE = "enforce", "enforce (act on the call)"
        PERMISSIVE = "permissive", "permissive (record what it would do, change nothing)"
        OFF = "off", "off"

    endpoint = models.ForeignKey(
        "mcp_app.Endpoint", on_delete=models.CASCADE, related_name="policies"
    )
    name = models.CharField(
        max_length=100, help_text="Names the policy in refusals and in the call log."
    )
    kind = models.CharField(max_length=64, help_text="What the policy does (MCP_POLICY_KINDS).")
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.ENFORCE)
    position = models.PositiveIntegerField(
        default=0, help_text="Policies run in increasing position (then by id)."
    )
    target = models.CharField(
        max_length=512,
        blank=True,
        help_text="Only calls of this tool or prompt name, or resource URI; empty: every call.",
    )
    config = models.JSONField(
        default=dict, blank=True, help_text="Kind-specific settings, checked by the kind."
    )

    history = HistoricalRecords()

    class Meta:
        ordering = ["endpoint", "position", "id"]
        verbose_name_plural = "policies"
        constraints = [
            models.UniqueConstraint(fields=["endpoint", "name"], name="policy_unique_name"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind}, {self.mode})"
