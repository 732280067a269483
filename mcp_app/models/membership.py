"""MembershipChange: one catalog row attached to or detached from an endpoint.

An endpoint's membership (which tools, resources, templates and prompts it publishes) is the
one part of the catalog history django-simple-history does not keep well: its m2m support
copies every through row of an endpoint into each new version (a one-tool edit on a
10,000-tool endpoint writes 10,000 rows, an import of N tools N² rows) and misses attaches
made from the other side (``tool.endpoints.add``). So membership is recorded as deltas, one
row per attach or detach, written by the m2m receivers in ``signals.py``; the membership at
any moment is the current one with the later deltas undone (``services.history``).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from mcp_app.models.endpoint import Endpoint


class MembershipChange(models.Model):
    class Kind(models.TextChoices):
        TOOL = "tool", "tool"
        RESOURCE = "resource", "resource"
        RESOURCE_TEMPLATE = "resource_template", "resource template"
        PROMPT = "prompt", "prompt"

    class Action(models.TextChoices):
        ADDED = "+", "Attached"
        REMOVED = "-", "Detached"

    # No database constraint: the record outlives a deleted endpoint, like its history rows.
    endpoint = models.ForeignKey(
        Endpoint, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    kind = models.CharField(max_length=20, choices=Kind.choices)
    item_id = models.PositiveBigIntegerField()
    # The tool's name (a resource's URI, a template's URI template) when it changed.
    item_name = models.CharField(max_length=2048)
    action = models.CharField(max_length=1, choices=Action.choices)
    changed_at = models.DateTimeField(default=timezone.now)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    # Where the change came from, like history_change_reason: admin, api, import, upstream sync.
    source = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["-changed_at", "-id"]
        indexes = [
            models.Index(fields=["endpoint", "changed_at"], name="mcp_membership_endpoint"),
            models.Index(fields=["changed_at"], name="mcp_membership_changed_at"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.item_name}"
