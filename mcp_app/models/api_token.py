"""The ApiToken model: a personal token for the management API (``/api/v1/``).

Only a SHA-256 digest of the token is stored: tokens are 256-bit random strings, so a plain
digest cannot be reversed or guessed, and it lets a request find its row by an indexed
lookup. ``services.api_tokens`` makes and checks tokens; the plain token is shown once.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="mcp_api_tokens",
        help_text="The API acts as this user, with this user's permissions.",
    )
    name = models.CharField(max_length=200, help_text="What it is for, e.g. the CI pipeline.")
    # The token's first characters, shown to tell tokens apart; not enough to use it.
    prefix = models.CharField(max_length=16, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="Empty: never (not recommended)."
    )
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}...)"

    def is_expired(self, now: datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())
