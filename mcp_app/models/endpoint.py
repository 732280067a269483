"""The Endpoint model: one MCP URL (``/mcp/<slug>``) and the catalog rows it publishes."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from mcp_app.models.base import TimestampedModel
from mcp_app.models.fields import validate_origin_lines


class Endpoint(TimestampedModel):
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
    tools = models.ManyToManyField("Tool", related_name="endpoints", blank=True)
    resources = models.ManyToManyField("Resource", related_name="endpoints", blank=True)
    resource_templates = models.ManyToManyField(
        "ResourceTemplate", related_name="endpoints", blank=True
    )
    prompts = models.ManyToManyField("Prompt", related_name="endpoints", blank=True)
    allowed_origins = models.TextField(
        blank=True,
        validators=[validate_origin_lines],
        help_text=(
            "Extra browser origins allowed to call this endpoint, one per line, e.g. "
            "https://app.example.com. Loopback and the site's own origin are always allowed."
        ),
    )
    # Bumped (F() + 1) by services.catalog.catalog_changed whenever what the endpoint publishes
    # changes; the cached snapshot is keyed on it.
    catalog_version = models.PositiveBigIntegerField(default=1, editable=False)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    def mcp_path(self) -> str:
        return f"/mcp/{self.slug}"

    def public_url(self) -> str:
        return f"{settings.PUBLIC_BASE_URL}{self.mcp_path()}"

    def origin_list(self) -> tuple[str, ...]:
        """Return the extra allowed origins, normalized (no blank lines, no trailing slash)."""
        return tuple(
            line.strip().rstrip("/").lower()
            for line in self.allowed_origins.splitlines()
            if line.strip()
        )
