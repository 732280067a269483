"""The Credential model: how an HTTP tool authenticates upstream, with its secret encrypted.

The secret is stored only as a Fernet token (``secret_encrypted``); ``services.credentials``
encrypts, decrypts and rotates it. Nothing here decrypts, and ``__str__`` shows the name only.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from simple_history.models import HistoricalRecords

from mcp_app.models.base import TimestampedModel, team_field
from mcp_app.models.fields import validate_mcp_name


class Credential(TimestampedModel):
    class Kind(models.TextChoices):
        BEARER = "bearer", "Bearer token (Authorization: Bearer ...)"
        BASIC = "basic", "HTTP Basic (user name and password)"
        API_KEY_HEADER = "api_key_header", "API key in a header"
        API_KEY_QUERY = "api_key_query", "API key in a query parameter"
        OAUTH_CLIENT_CREDENTIALS = "oauth_client_credentials", "OAuth 2.0 client credentials"

    name = models.CharField(
        max_length=128,
        unique=True,
        validators=[validate_mcp_name],
        help_text='HTTP tools name it in their config ("credential": "<name>").',
    )
    kind = models.CharField(max_length=32, choices=Kind.choices, default=Kind.BEARER)
    description = models.TextField(blank=True)
    header_name = models.CharField(
        max_length=128, blank=True, help_text="API key in a header: the header, e.g. X-API-Key."
    )
    query_param = models.CharField(
        max_length=128, blank=True, help_text="API key in a query parameter: its name, e.g. key."
    )
    username = models.CharField(max_length=200, blank=True, help_text="HTTP Basic: the user.")
    token_url = models.URLField(
        max_length=500, blank=True, help_text="OAuth client credentials: the token endpoint."
    )
    client_id = models.CharField(max_length=200, blank=True, help_text="OAuth: the client id.")
    scopes = models.CharField(
        max_length=500, blank=True, help_text="OAuth: scopes to request, separated by spaces."
    )
    # A Fernet token; the plain secret (token, password, key or client secret) is never stored.
    secret_encrypted = models.TextField(editable=False)

    # Metadata only: the encrypted secret never enters the history table, and a revert keeps
    # the current secret (simple-history reads excluded fields from the live row).
    team = team_field()

    history = HistoricalRecords(excluded_fields=["secret_encrypted"])

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        required_by_kind: dict[str, list[str]] = {
            self.Kind.API_KEY_HEADER: ["header_name"],
            self.Kind.API_KEY_QUERY: ["query_param"],
            self.Kind.BASIC: ["username"],
            self.Kind.OAUTH_CLIENT_CREDENTIALS: ["token_url", "client_id"],
        }
        required = required_by_kind.get(self.kind, [])
        errors = {
            name: f"Required for {self.get_kind_display()}."
            for name in required
            if not getattr(self, name).strip()
        }
        if errors:
            raise ValidationError(errors)

    @property
    def has_secret(self) -> bool:
        return bool(self.secret_encrypted)
