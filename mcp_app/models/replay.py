"""ReplayRun: one replay of recorded calls against a draft, kept so its page can be revisited.

Written only by ``services/replay.py``. ``results`` holds each call's comparison as the
service made it: secrets redacted by the call log's rules and every payload cut to a byte cap,
so a run of the largest sample stays a few hundred kilobytes. A run belongs to its draft: it
is seen by whoever sees the draft, and goes when the draft does.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ReplayRun(models.Model):
    draft = models.ForeignKey("mcp_app.Draft", on_delete=models.CASCADE, related_name="replays")
    # The tool replayed, by name (a draft's tool has no row of its own until published).
    tool = models.CharField(max_length=128)
    # The filter the calls were picked by, as given (tool, endpoint, client, status, range).
    filter = models.JSONField(default=dict)
    sample = models.PositiveIntegerField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Whether the tool may have side effects elsewhere, replayed after a confirmation.
    confirmed = models.BooleanField(default=False)
    calls = models.PositiveIntegerField(default=0, help_text="Calls replayed.")
    refused = models.PositiveIntegerField(
        default=0, help_text="Calls the draft's input schema refuses."
    )
    changed = models.PositiveIntegerField(
        default=0, help_text="Calls whose outcome or result changed."
    )
    identical = models.PositiveIntegerField(default=0)
    skipped_unrecorded = models.PositiveIntegerField(
        default=0, help_text="Calls passed over: their arguments were not recorded (or cut)."
    )
    not_run = models.PositiveIntegerField(
        default=0, help_text="Calls picked but not replayed: the run's time budget ran out."
    )
    skipped_redacted = models.PositiveIntegerField(
        default=0, help_text="Calls passed over: their recorded arguments hold redacted values."
    )
    # One object per call replayed (services/replay.py, CallComparison.as_dict).
    results = models.JSONField(default=list)

    class Meta:
        ordering = ["-created_at", "-id"]
        # Seen and made through its draft's permissions (services/replay.py).
        default_permissions = ()

    def __str__(self) -> str:
        return f"Replay #{self.pk} of {self.tool} (draft #{self.draft_id})"
