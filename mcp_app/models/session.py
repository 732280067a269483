"""Session: the server side of one legacy-era (handshake) MCP session.

Rows are written only by ``mcp_app.services.sessions``; any web process can serve any session.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from mcp_app.models.endpoint import Endpoint
from mcp_app.models.fields import empty_dict, empty_list


class Session(models.Model):
    id = models.CharField(primary_key=True, max_length=64)
    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="sessions")
    protocol_version = models.CharField(max_length=16)
    client_info = models.JSONField(default=empty_dict)
    client_capabilities = models.JSONField(default=empty_dict)
    # None (not "") means the client never called logging/setLevel: no log notifications.
    log_level = models.CharField(max_length=16, null=True, blank=True)  # noqa: DJ001
    subscriptions = models.JSONField(default=empty_list)
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(default=timezone.now, db_index=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    # Who opened it on an OAuth endpoint: only the same user through the same client may use
    # it (tokens rotate, so the binding is to user and client, never to one token).
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
    )
    oauth_client_id = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["-last_seen_at"]

    def __str__(self) -> str:
        return self.id

    @property
    def client_name(self) -> str:
        info = self.client_info if isinstance(self.client_info, dict) else {}
        return f"{info.get('name', '?')} {info.get('version', '')}".strip()
