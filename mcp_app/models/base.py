"""Abstract bases shared by the catalog models."""

from __future__ import annotations

from django.db import models


class TimestampedModel(models.Model):
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


def team_field() -> models.ForeignKey:
    """The team (a Django group) that owns a row; null: a site-wide row.

    Who may see and change which team's rows is ``services/teams.py``'s; a group used as a
    team may also be used by ``allowed_groups`` (who may call an item), a separate matter.
    """
    return models.ForeignKey(
        "auth.Group",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text=(
            "The team that manages this row: its members (with the model permissions) see and "
            "change it. Empty: a site-wide row, which only operators of every team see."
        ),
    )
