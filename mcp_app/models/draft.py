"""Drafts: changes to catalog rows saved for later, invisible to clients until published.

A draft holds a catalog document (``services/catalog_io.py``'s format) listing only the
entries it changes: a tool, resource, resource template or prompt as it would be, with the
endpoints it would be published on (an endpoint's membership is its items' ``endpoints``
lists), or an endpoint's own settings. Nothing a draft holds is in the catalog tables, so no
client and no catalog snapshot can see it; ``services/drafts.py`` checks it by the rules of a
live save, shows it beside the live rows, and publishes it through catalog import, the write
path every interface shares. ``base`` keeps the live entries the draft was made from, so a
publish refuses to overwrite a change someone made to the live rows since.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from mcp_app.models.base import TimestampedModel, team_field


class Draft(TimestampedModel):
    class Status(models.TextChoices):
        OPEN = "open", "open"
        PUBLISHED = "published", "published"
        DISCARDED = "discarded", "discarded"

    title = models.CharField(max_length=200, help_text="What the change is, in a few words.")
    # A catalog document holding the changed entries only (format, sections; no scope).
    document = models.JSONField()
    # "section/key" -> the live entry the draft was made from, None for a row it creates.
    base = models.JSONField(default=dict)
    # The endpoints the draft touches, live or drafted: whose review rule applies, whose
    # team sees it, and which drafts may be published together.
    endpoints = models.ManyToManyField(
        "mcp_app.Endpoint", blank=True, related_name="drafts", editable=False
    )
    team = team_field()
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.OPEN, editable=False
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        on_delete=models.SET_NULL,
        related_name="+",
        editable=False,
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        editable=False,
    )
    approved_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The document ``approved_by`` saw: an edit after the approval withdraws it.
    approved_document = models.JSONField(null=True, blank=True, editable=False)
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        editable=False,
    )
    published_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Shared by the drafts published together in one change.
    change_set = models.UUIDField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-updated_at", "-id"]
        permissions = [
            ("approve_draft", "Can approve another user's draft of an endpoint that needs review")
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.title}"

    @property
    def approved(self) -> bool:
        return self.approved_by_id is not None and self.approved_document == self.document
