"""Prompt templates: Prompt, its ordered PromptArguments and PromptMessages."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from simple_history.models import HistoricalRecords

from mcp_app.models.access import AccessRules
from mcp_app.models.base import TimestampedModel, team_field
from mcp_app.models.fields import empty_list, validate_icons, validate_mcp_name


class Prompt(TimestampedModel, AccessRules):
    name = models.CharField(
        max_length=128,
        unique=True,
        validators=[validate_mcp_name],
        help_text="What clients ask for: 1-128 letters, digits, _ - or .",
    )
    title = models.CharField(max_length=200, blank=True)
    description = models.TextField(help_text="What the prompt is for.")
    icons = models.JSONField(default=empty_list, blank=True, validators=[validate_icons])
    enabled = models.BooleanField(default=True)
    # Or got from an upstream MCP server on every prompts/get: its messages are the upstream's.
    upstream = models.ForeignKey(
        "mcp_app.Upstream",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="prompts",
        help_text="Get the messages from this upstream MCP server instead of the ones below.",
    )
    remote_name = models.CharField(
        max_length=128,
        blank=True,
        validators=[validate_mcp_name],
        help_text="The prompt's name on the upstream (empty: the same name as here).",
    )

    team = team_field()

    history = HistoricalRecords(m2m_fields=["allowed_groups"])

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if not self.description.strip():
            raise ValidationError({"description": "A prompt needs a description."})
        if self.remote_name and self.upstream is None:
            raise ValidationError({"remote_name": "Only a prompt from an upstream has one."})

    @property
    def upstream_name(self) -> str:
        """The prompt's name on the upstream."""
        return self.remote_name or self.name


class PromptArgument(models.Model):
    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="arguments")
    position = models.PositiveIntegerField(default=0)
    name = models.CharField(max_length=128, validators=[validate_mcp_name])
    title = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    required = models.BooleanField(default=False)
    completion_values = models.TextField(
        blank=True, help_text="Values offered by completion/complete, one per line."
    )

    history = HistoricalRecords()

    class Meta:
        ordering = ["position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["prompt", "name"], name="prompt_argument_unique_name")
        ]

    def __str__(self) -> str:
        return self.name

    def completion_list(self) -> tuple[str, ...]:
        return tuple(v.strip() for v in self.completion_values.splitlines() if v.strip())


class PromptMessage(models.Model):
    class Role(models.TextChoices):
        USER = "user", "User"
        ASSISTANT = "assistant", "Assistant"

    class Kind(models.TextChoices):
        TEXT = "text", "Text"
        IMAGE = "image", "Image (file)"
        AUDIO = "audio", "Audio (file)"
        RESOURCE = "resource", "Embedded resource (text or file)"
        RESOURCE_LINK = "resource_link", "Resource link"

    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="messages")
    position = models.PositiveIntegerField(default=0)
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.USER)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.TEXT)
    text = models.TextField(
        blank=True,
        help_text="Text with {argument} placeholders; write {{ and }} for literal braces.",
    )
    file = models.FileField(upload_to="prompts/", blank=True)
    mime_type = models.CharField(max_length=200, blank=True)
    uri = models.CharField(
        max_length=2048, blank=True, help_text="Resource URI (embedded resource or link)."
    )
    name = models.CharField(max_length=200, blank=True, help_text="Resource link name.")

    history = HistoricalRecords()

    class Meta:
        ordering = ["position", "id"]

    def __str__(self) -> str:
        return f"{self.role} {self.kind} #{self.position}"

    def clean(self) -> None:
        kind = self.Kind
        if self.kind == kind.TEXT and not self.text:
            raise ValidationError({"text": "A text message needs text."})
        if self.kind in (kind.IMAGE, kind.AUDIO):
            if not self.file:
                raise ValidationError({"file": "Upload the image or audio file."})
            if not self.mime_type:
                raise ValidationError({"mime_type": "Give the file's MIME type, e.g. image/png."})
        if self.kind in (kind.RESOURCE, kind.RESOURCE_LINK) and not self.uri:
            raise ValidationError({"uri": "A resource message needs a URI."})
        if self.kind == kind.RESOURCE and bool(self.text) == bool(self.file):
            raise ValidationError("An embedded resource needs either text or a file.")
        if self.kind == kind.RESOURCE_LINK and not self.name:
            raise ValidationError({"name": "A resource link needs a name."})
