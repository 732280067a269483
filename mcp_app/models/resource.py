"""Resource (fixed URI, text or uploaded file) and ResourceTemplate (RFC 6570 URI template)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import uritemplate
from django.core.exceptions import ValidationError
from django.db import models
from simple_history.models import HistoricalRecords

from mcp_app.conf import get_conf
from mcp_app.executors.base import ConfigError
from mcp_app.executors.resource_kinds import get_resolver, get_resolvers
from mcp_app.models.access import AccessRules
from mcp_app.models.base import TimestampedModel, team_field
from mcp_app.models.fields import (
    empty_dict,
    empty_list,
    validate_absolute_uri,
    validate_icons,
    validate_json_object,
    validate_ui_meta,
    validate_uri_template,
)
from mcp_app.protocol import apps


class Resource(TimestampedModel, AccessRules):
    uri = models.CharField(
        max_length=2048,
        unique=True,
        validators=[validate_absolute_uri],
        help_text="Absolute URI with a scheme, e.g. demo://readme or file:///docs/guide.md.",
    )
    name = models.CharField(max_length=200)
    title = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    mime_type = models.CharField(max_length=200, blank=True, help_text="e.g. text/markdown")
    text = models.TextField(
        blank=True, help_text="Text content (leave empty when uploading a file)."
    )
    file = models.FileField(
        upload_to="resources/", blank=True, help_text="Binary or text file (instead of text)."
    )
    # Or read from an upstream MCP server on every resources/read (services/resources.py).
    upstream = models.ForeignKey(
        "mcp_app.Upstream",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="resources",
        help_text="Read from this upstream MCP server instead of text or a file.",
    )
    remote_uri = models.CharField(
        max_length=2048,
        blank=True,
        help_text="The resource's URI on the upstream (empty: the same URI as here).",
    )
    # Bytes of the content, kept in sync by clean(): text as UTF-8, or the file's size (None
    # for an upstream's resource: it is not known before a read).
    size = models.PositiveBigIntegerField(null=True, blank=True, editable=False)
    icons = models.JSONField(default=empty_list, blank=True, validators=[validate_icons])
    # An MCP Apps view (protocol/apps.py): served as _meta.ui on its resources/read contents.
    ui_meta = models.JSONField(
        default=empty_dict,
        blank=True,
        validators=[validate_ui_meta],
        verbose_name="view metadata (_meta.ui)",
        help_text=(
            'MCP Apps views only: {"csp": {"connectDomains": [...], "resourceDomains": [...], '
            '"frameDomains": [...], "baseUriDomains": [...]}, "permissions": {"camera": {}}, '
            '"domain": "...", "prefersBorder": true}.'
        ),
    )
    enabled = models.BooleanField(default=True)

    team = team_field()

    history = HistoricalRecords(m2m_fields=["allowed_groups"])

    class Meta:
        ordering = ["uri"]

    @property
    def is_view(self) -> bool:
        """Whether this is an MCP Apps view a tool may link (a ui:// URI, the view MIME)."""
        return apps.is_view(self.uri, self.mime_type)

    def __str__(self) -> str:
        return self.uri

    def clean(self) -> None:
        if self.mime_type == apps.MIME_TYPE and not self.uri.startswith(apps.URI_SCHEME):
            raise ValidationError({"uri": f"An MCP Apps view has a {apps.URI_SCHEME} URI."})
        if self.ui_meta and self.mime_type != apps.MIME_TYPE:
            raise ValidationError(
                {"ui_meta": f"Only an MCP Apps view (MIME type {apps.MIME_TYPE}) has one."}
            )
        has_text, has_file = bool(self.text), bool(self.file)
        # An upstream the same catalog import creates is not saved yet: it has no id.
        if self.upstream is not None:
            if has_text or has_file:
                raise ValidationError(
                    "A resource read from an upstream has no text or file of its own."
                )
            if self.remote_uri:
                try:
                    validate_absolute_uri(self.remote_uri)
                except ValidationError as exc:
                    raise ValidationError({"remote_uri": exc.messages}) from None
            self.size = None
            return
        if self.remote_uri:
            raise ValidationError({"remote_uri": "Only a resource read from an upstream has one."})
        if has_text == has_file:
            raise ValidationError("Give the resource either text or a file, not both or neither.")
        if has_file:
            limit = get_conf().MCP_MAX_RESOURCE_BYTES
            if self.file.size > limit:
                raise ValidationError({"file": f"The file is larger than {limit} bytes."})
        self.size = self.content_size()

    @property
    def upstream_uri(self) -> str:
        """The URI to read on the upstream."""
        return self.remote_uri or self.uri

    def content_size(self) -> int:
        """Return the size of the content in bytes (text encoded as UTF-8)."""
        if self.file:
            return int(self.file.size)
        return len(self.text.encode())


def resource_template_kinds() -> list[tuple[str, str]]:
    """The kinds a resource template may have: one per configured resolver
    (MCP_RESOURCE_TEMPLATE_KINDS).

    A callable, so adding a resolver needs no migration of ``ResourceTemplate.kind``.
    """
    return [(kind, resolver.label or kind) for kind, resolver in get_resolvers().items()]


class ResourceTemplate(TimestampedModel, AccessRules):
    # The built-in kinds, for code that names one (the upstream sync, the demo); the field's
    # choices are ``resource_template_kinds``.
    class Kind(models.TextChoices):
        PYTHON = "python", "Python resource function"
        TEMPLATE = "template", "Text template"
        UPSTREAM = "upstream", "Upstream MCP server"

    uri_template = models.CharField(
        max_length=2048,
        unique=True,
        validators=[validate_uri_template],
        help_text="RFC 6570 template with at least one variable, e.g. demo://notes/{topic}.",
    )
    name = models.CharField(max_length=200)
    title = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    mime_type = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=32, choices=resource_template_kinds, default=Kind.TEMPLATE)
    config = models.JSONField(
        default=empty_dict,
        blank=True,
        validators=[validate_json_object],
        help_text="Kind-specific settings, checked by the resolver of that kind.",
    )
    # A kind that reads from an upstream MCP server (its resolver's ``reads_upstream``): each
    # URI the template matches is read there.
    upstream = models.ForeignKey(
        "mcp_app.Upstream",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="resource_templates",
        help_text="A kind read from an upstream: read the matching URIs from this server.",
    )
    remote_uri_template = models.CharField(
        max_length=2048,
        blank=True,
        validators=[validate_uri_template],
        help_text=(
            "The template on the upstream, with the same variables (empty: the same template "
            "as here). A URI matching ours is read there with the variables put into it."
        ),
    )
    completions = models.JSONField(
        default=empty_dict,
        blank=True,
        validators=[validate_json_object],
        help_text='Values offered by completion/complete per variable: {"topic": ["a", "b"]}.',
    )
    icons = models.JSONField(default=empty_list, blank=True, validators=[validate_icons])
    enabled = models.BooleanField(default=True)

    team = team_field()

    history = HistoricalRecords(m2m_fields=["allowed_groups"])

    class Meta:
        ordering = ["uri_template"]

    @property
    def upstream_uri_template(self) -> str:
        """The template to fill in and read on the upstream."""
        return self.remote_uri_template or self.uri_template

    def __str__(self) -> str:
        return self.uri_template

    def clean(self) -> None:
        if isinstance(self.completions, dict) and not all(
            isinstance(values, list) and all(isinstance(v, str) for v in values)
            for values in self.completions.values()
        ):
            raise ValidationError({"completions": "Each variable maps to a list of strings."})
        resolver = get_resolvers().get(self.kind)
        if resolver is not None and resolver.reads_upstream != (self.upstream is not None):
            reading = [kind for kind, other in get_resolvers().items() if other.reads_upstream]
            raise ValidationError(
                {
                    "upstream": (
                        f"A template of a kind read from an upstream ({', '.join(reading)}) "
                        "names its upstream; no other kind does."
                    )
                }
            )
        if self.remote_uri_template:
            if self.upstream is None:
                raise ValidationError(
                    {"remote_uri_template": "Only a template read from an upstream has one."}
                )
            if _variables(self.remote_uri_template) != _variables(self.uri_template):
                raise ValidationError(
                    {"remote_uri_template": "It must have the same variables as the template."}
                )

    def clean_fields(self, exclude: Collection[str] | None = None) -> None:
        # As Tool.clean_fields: the admin form edits config through other fields.
        errors: dict[str, Any] = {}
        try:
            super().clean_fields(exclude=exclude)
        except ValidationError as exc:
            errors = exc.update_error_dict(errors)
        if not (set(exclude or ()) | set(errors)) & {"kind", "config"}:
            try:
                get_resolver(self.kind).validate_config(self.config)
            except ConfigError as exc:
                errors["config"] = [exc.message]
            except LookupError:
                errors["kind"] = [f"No resolver is registered for kind {self.kind!r}."]
        if errors:
            raise ValidationError(errors)


def _variables(template: str) -> set[str]:
    try:
        return set(uritemplate.URITemplate(template).variable_names)
    except Exception:  # noqa: BLE001 (the field's own validator names the problem)
        return set()
