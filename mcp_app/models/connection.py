"""A user's own connection to an upstream MCP server that authorizes each user (OAuth).

An upstream whose ``auth_mode`` is per-user OAuth is called with the caller's own access
token at the upstream, got once through the Connections page (authorization code with PKCE
at the upstream's authorization server) and refreshed by ``services.connections``. The row
keeps what a refresh and a revocation need: the authorization server's issuer and endpoints,
the client registration used, and the tokens, encrypted like credential secrets
(``services.credentials.encrypt_secret``). The encrypted fields are never edited, shown,
logged, searched or exported; ``__str__`` names the user and the upstream only.

Also here: which request headers of our clients an upstream may be sent
(``forward_header_problem``), since the deny list is what the model validates.
"""

from __future__ import annotations

import re

from django.conf import settings
from django.db import models

from mcp_app.models.base import TimestampedModel

# Headers of our client's request that never go upstream, whatever the operator lists: its
# credentials at this host (Authorization, Cookie and their proxy forms), this host's own
# MCP session headers (Mcp-*, which name our session, not the upstream's), and what the
# relay sets itself or must not pass (framing, hop-by-hop, content negotiation).
FORWARD_DENIED = frozenset(
    {
        "authorization", "proxy-authorization", "cookie", "set-cookie", "host",
        "transfer-encoding", "te",
        "trailer", "connection", "keep-alive", "upgrade", "accept", "accept-encoding",
        "last-event-id", "origin",
    }
)  # fmt: skip
FORWARD_DENIED_PREFIXES = ("mcp-", "proxy-", "sec-", "content-")
# RFC 9110 section 5.1: a field name is a token.
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def forward_header_problem(name: str) -> str | None:
    """Why the request header ``name`` may not be forwarded to an upstream, or None."""
    if not _TOKEN.match(name):
        return f"{name!r} is not a header name."
    lowered = name.lower()
    if lowered in FORWARD_DENIED or lowered.startswith(FORWARD_DENIED_PREFIXES):
        return f"{name} is never forwarded (credentials, Mcp-* and framing headers stay here)."
    return None


def split_header_names(value: str) -> list[str]:
    """The header names of an upstream's forward list (one per line or comma-separated)."""
    return [item.strip() for item in value.replace(",", "\n").splitlines() if item.strip()]


class UpstreamConnection(TimestampedModel):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="upstream_connections"
    )
    upstream = models.ForeignKey(
        "mcp_app.Upstream", on_delete=models.CASCADE, related_name="connections"
    )
    # The authorization server that issued the tokens (RFC 8414 issuer) and where they go.
    issuer = models.URLField(max_length=500)
    token_endpoint = models.URLField(max_length=500)
    revocation_endpoint = models.URLField(max_length=500, blank=True)
    # The resource indicator the tokens were requested for (RFC 8707): the upstream's own
    # identifier from its protected-resource metadata.
    resource = models.URLField(max_length=500)
    # The client this host was at the authorization server for this connection: configured
    # on the upstream, or registered dynamically (RFC 7591) when the connection was made.
    client_id = models.CharField(max_length=500)
    client_secret_encrypted = models.TextField(blank=True, editable=False)
    token_endpoint_auth_method = models.CharField(max_length=64, default="none")
    # Fernet tokens (services.credentials.encrypt_secret); never the plain values.
    access_token_encrypted = models.TextField(editable=False)
    refresh_token_encrypted = models.TextField(blank=True, editable=False)
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="When the access token expires (empty: not said)."
    )
    scopes = models.CharField(max_length=1000, blank=True, help_text="Scopes granted.")
    refreshed_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["upstream__name", "user_id"]
        constraints = [
            models.UniqueConstraint(fields=["user", "upstream"], name="one_connection_per_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} at {self.upstream}"
