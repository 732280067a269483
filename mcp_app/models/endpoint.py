"""The Endpoint model: one MCP URL (``/mcp/<slug>``) and the catalog rows it publishes."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from simple_history.models import HistoricalRecords

from mcp_app.models.access import validate_scope_name
from mcp_app.models.base import TimestampedModel, team_field
from mcp_app.models.fields import empty_list, validate_icons, validate_origin_lines
from mcp_app.models.prompt import Prompt
from mcp_app.models.resource import Resource, ResourceTemplate
from mcp_app.models.tool import Tool

DEFAULT_SCOPES = (
    "mcp:read Use this endpoint: list and call its tools, read its resources and prompts\n"
    "mcp:write Use the tools that change things"
)


def parse_scope_lines(text: str) -> tuple[tuple[str, str], ...]:
    """Return ``(name, description)`` pairs of an endpoint's scope lines ("name description")."""
    pairs = []
    for line in text.splitlines():
        name, _, description = line.strip().partition(" ")
        if name:
            pairs.append((name, description.strip() or name))
    return tuple(pairs)


def validate_scope_lines(value: str) -> None:
    pairs = parse_scope_lines(value)
    names = [name for name, _ in pairs]
    for name in names:
        validate_scope_name(name)
    if len(set(names)) != len(names):
        raise ValidationError("Each scope may be listed only once.")


class Endpoint(TimestampedModel):
    class AuthMode(models.TextChoices):
        OAUTH = "oauth", "OAuth required"
        PUBLIC = "public", "Public: anyone who can reach the URL (local trials only)"

    slug = models.SlugField(
        max_length=64, unique=True, help_text="The endpoint is served at /mcp/&lt;slug&gt;."
    )
    title = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    instructions = models.TextField(
        blank=True, help_text="Sent to clients as the server instructions (how to use the tools)."
    )
    enabled = models.BooleanField(
        default=True, help_text="A disabled endpoint answers every request with an error."
    )
    # Off by default: an endpoint is found by its URL alone until an operator chooses to
    # advertise it (mcp_app/discovery.py).
    listed = models.BooleanField(
        default=False,
        help_text=(
            "Advertise this endpoint in the site's discovery catalog "
            "(/.well-known/ai-catalog.json) with a server card at /mcp/&lt;slug&gt;/server-card. "
            "A disabled endpoint is never listed."
        ),
    )
    # serverInfo.icons (2025-11-25 and later) and the server card's.
    icons = models.JSONField(default=empty_list, blank=True, validators=[validate_icons])
    # The classes, not their names: django-stubs then types both sides (tool.endpoints).
    tools = models.ManyToManyField(Tool, related_name="endpoints", blank=True)
    resources = models.ManyToManyField(Resource, related_name="endpoints", blank=True)
    resource_templates = models.ManyToManyField(
        ResourceTemplate, related_name="endpoints", blank=True
    )
    prompts = models.ManyToManyField(Prompt, related_name="endpoints", blank=True)
    allowed_origins = models.TextField(
        blank=True,
        validators=[validate_origin_lines],
        help_text=(
            "Extra browser origins allowed to call this endpoint, one per line, e.g. "
            "https://app.example.com. Loopback and the site's own origin are always allowed."
        ),
    )
    # Who may connect (mcp_app.auth): OAuth tokens bound to this endpoint, or anyone.
    auth_mode = models.CharField(
        max_length=8,
        choices=AuthMode.choices,
        default=AuthMode.OAUTH,
        help_text=(
            "OAuth: clients sign a user in and present a token issued for this endpoint. "
            "Public ignores scopes and groups."
        ),
    )
    scopes = models.TextField(
        default=DEFAULT_SCOPES,
        blank=True,
        validators=[validate_scope_lines],
        help_text=(
            "The OAuth scopes of this endpoint, one per line: the name, a space, and what it "
            "allows in plain words (shown on the consent page)."
        ),
    )
    base_scope = models.CharField(
        max_length=64,
        default="mcp:read",
        blank=True,
        help_text=(
            "Every token must carry this scope (one of the scopes above); clients ask for it "
            "first. Empty: any token issued for this endpoint."
        ),
    )
    require_review = models.BooleanField(
        default=False,
        help_text=(
            "Changes to this endpoint and the rows it publishes go through a draft that a second "
            "user with the approve permission approves before it is published."
        ),
    )
    # Bumped (F() + 1) by services.catalog_changes.catalog_changed whenever what the endpoint
    # publishes changes; the cached snapshot is keyed on it.
    catalog_version = models.PositiveBigIntegerField(default=1, editable=False)

    # catalog_version is a counter bumped by every catalog edit, not part of the definition;
    # a revert must never move it back.
    team = team_field()

    history = HistoricalRecords(excluded_fields=["catalog_version"])

    class Meta:
        ordering = ["slug"]
        # Without it a staff user is team-scoped (services/teams.py).
        permissions = [("manage_every_team", "Can see and change every team's rows")]

    def __str__(self) -> str:
        return self.slug

    def clean(self) -> None:
        if self.base_scope and self.base_scope not in dict(self.scope_list()):
            raise ValidationError({"base_scope": "The base scope must be one of the scopes."})

    def mcp_path(self) -> str:
        return f"/mcp/{self.slug}"

    def public_url(self) -> str:
        return f"{settings.PUBLIC_BASE_URL}{self.mcp_path()}"

    def scope_list(self) -> tuple[tuple[str, str], ...]:
        return parse_scope_lines(self.scopes)

    def origin_list(self) -> tuple[str, ...]:
        """Return the extra allowed origins, normalized (no blank lines, no trailing slash)."""
        return tuple(
            line.strip().rstrip("/").lower()
            for line in self.allowed_origins.splitlines()
            if line.strip()
        )
