"""The Tool model: one callable tool, its schemas, hints and the executor config behind it."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from simple_history.models import HistoricalRecords

from mcp_app.executors import get_executor, get_executors
from mcp_app.executors.base import ConfigError
from mcp_app.models.access import AccessRules
from mcp_app.models.base import TimestampedModel, team_field
from mcp_app.models.fields import (
    default_input_schema,
    empty_dict,
    empty_list,
    validate_icons,
    validate_input_schema,
    validate_json_object,
    validate_mcp_name,
    validate_output_schema,
)


def tool_kinds() -> list[tuple[str, str]]:
    """The kinds a tool may have: one per configured executor (MCP_EXECUTORS).

    A callable, so adding an executor needs no migration of ``Tool.kind``.
    """
    return [(kind, executor.label or kind) for kind, executor in get_executors().items()]


class Tool(TimestampedModel, AccessRules):
    # The built-in kinds, for code that names one; the field's choices are ``tool_kinds``.
    class Kind(models.TextChoices):
        PYTHON = "python", "Python function"
        TEMPLATE = "template", "Text template"
        HTTP = "http", "HTTP request"
        MCP_UPSTREAM = "mcp_upstream", "MCP upstream tool"

    class Capture(models.TextChoices):
        """How much of a call's arguments and result the call log keeps (calllog/capture.py)."""

        NONE = "none", "Nothing"
        METADATA = "metadata", "Metadata only (field names, types and sizes)"
        FULL = "full", "Full (up to the byte cap, with redaction)"

    class Execution(models.TextChoices):
        """Where a call runs (services/background/): the executor code is the same."""

        INLINE = "inline", "Inline (in the web process)"
        AUTO = "auto", "Auto (inline; on a worker when the client asks for a task)"
        BACKGROUND = "background", "Background (always on a Celery worker)"

    class TaskSupport(models.TextChoices):
        """Whether clients may, or must, run the tool as an MCP task (never for inline)."""

        OPTIONAL = "optional", "Optional"
        REQUIRED = "required", "Required (only as a task)"

    name = models.CharField(
        max_length=128,
        validators=[validate_mcp_name],
        help_text="What clients call: 1-128 letters, digits, _ - or . (unique per endpoint).",
    )
    title = models.CharField(max_length=200, blank=True, help_text="Human-friendly display name.")
    description = models.TextField(
        help_text="Tells the model what the tool does and when to use it."
    )
    input_schema = models.JSONField(
        default=default_input_schema,
        validators=[validate_input_schema],
        help_text='JSON Schema (2020-12 unless $schema says otherwise) with "type": "object".',
    )
    output_schema = models.JSONField(
        null=True,
        blank=True,
        validators=[validate_output_schema],
        help_text=(
            'Optional JSON Schema of structuredContent. Its root must be "type": "object": '
            "clients of revisions 2025-06-18 and 2025-11-25 accept nothing else."
        ),
    )
    # Behaviour hints (2025-03-26 server/tools "Tool annotations"); None means "not stated", so
    # the client applies the spec default.
    read_only_hint = models.BooleanField(null=True, blank=True)
    destructive_hint = models.BooleanField(null=True, blank=True)
    idempotent_hint = models.BooleanField(null=True, blank=True)
    open_world_hint = models.BooleanField(null=True, blank=True)
    icons = models.JSONField(default=empty_list, blank=True, validators=[validate_icons])
    meta = models.JSONField(
        default=empty_dict,
        blank=True,
        validators=[validate_json_object],
        help_text="Published as _meta on the tool definition.",
    )
    # MCP Apps (protocol/apps.py): the URI of the view resource published as
    # _meta.ui.resourceUri; checked against the catalog by services.catalog_writes.
    ui_resource_uri = models.CharField(
        max_length=2048,
        blank=True,
        verbose_name="view (MCP Apps)",
        help_text=(
            "The ui:// URI of a resource of MIME type text/html;profile=mcp-app that shows "
            "this tool's results in clients that render MCP Apps (empty: none)."
        ),
    )
    enabled = models.BooleanField(default=True)
    kind = models.CharField(max_length=32, choices=tool_kinds, default=Kind.PYTHON)
    config = models.JSONField(
        default=empty_dict,
        blank=True,
        validators=[validate_json_object],
        help_text="Kind-specific settings, checked by the executor of that kind.",
    )
    # The call log's policy for this tool. Metadata by default: values may be personal data,
    # so keeping them is an operator's explicit choice.
    capture_mode = models.CharField(
        max_length=8,
        choices=Capture.choices,
        default=Capture.METADATA,
        verbose_name="call log capture",
        help_text="What the call log keeps of this tool's arguments and results.",
    )
    capture_max_bytes = models.PositiveIntegerField(
        default=4096,
        validators=[MinValueValidator(16), MaxValueValidator(1_048_576)],
        verbose_name="capture byte cap",
        help_text="Full capture: arguments and result are each cut to this many bytes of JSON.",
    )
    capture_redact = models.TextField(
        blank=True,
        verbose_name="redacted fields",
        help_text=(
            "Field names (one per line or comma-separated) whose values are never kept, at any "
            "depth. Secret-looking names (password, token, secret, api key, authorization) and "
            'input fields marked "writeOnly" or "format": "password" are always redacted.'
        ),
    )

    execution_mode = models.CharField(
        max_length=10,
        choices=Execution.choices,
        default=Execution.INLINE,
        help_text=(
            "Background calls run on a Celery worker and stream progress; use it for anything "
            "that takes more than a few seconds."
        ),
    )
    task_support = models.CharField(
        max_length=8,
        choices=TaskSupport.choices,
        default=TaskSupport.OPTIONAL,
        verbose_name="MCP task support",
        help_text="Auto and background tools can run as MCP tasks; required refuses plain calls.",
    )
    soft_time_limit = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.1), MaxValueValidator(7 * 24 * 3600)],
        help_text=(
            "Seconds a background call may run before it is stopped with an error result "
            "(empty: MCP_BACKGROUND_SOFT_TIME_LIMIT_SECONDS)."
        ),
    )
    hard_time_limit = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.1), MaxValueValidator(7 * 24 * 3600)],
        help_text=(
            "Seconds after which the worker process running a background call is killed, for "
            "tools that ignore the soft limit (empty: soft limit + 30 s)."
        ),
    )

    # Every change, with who and from where (README, "History and rollback"); call-log rows
    # name the version that answered.
    team = team_field()

    history = HistoricalRecords(m2m_fields=["allowed_groups"])

    class Meta:
        ordering = ["name", "id"]
        indexes = [models.Index(fields=["name"])]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if not self.description.strip():
            raise ValidationError({"description": "A tool needs a description."})
        if (
            self.execution_mode == self.Execution.INLINE
            and self.task_support == self.TaskSupport.REQUIRED
        ):
            raise ValidationError(
                {"task_support": "An inline tool cannot require tasks: tasks run on a worker."}
            )
        soft, hard = self.soft_time_limit, self.hard_time_limit
        if soft is not None and hard is not None and hard <= soft:
            raise ValidationError(
                {"hard_time_limit": "The hard limit must be longer than the soft limit."}
            )

    def clean_fields(self, exclude: Collection[str] | None = None) -> None:
        # The config check lives here, not in clean(), because clean_fields() knows the
        # excluded fields: the admin form edits config through other fields and checks it there.
        errors: dict[str, Any] = {}
        try:
            super().clean_fields(exclude=exclude)
        except ValidationError as exc:
            errors = exc.update_error_dict(errors)
        skip = set(exclude or ()) | set(errors)
        if not skip & {"kind", "config"}:
            try:
                get_executor(self.kind).validate_config(self.config)
            except ConfigError as exc:
                errors["config"] = [exc.message]
            except LookupError:
                errors["kind"] = [f"No executor is registered for kind {self.kind!r}."]
        if errors:
            raise ValidationError(errors)

    def annotations(self) -> dict[str, Any]:
        """Return the stated hints as an MCP ``ToolAnnotations`` dict (camelCase)."""
        hints = {
            "title": self.title or None,
            "readOnlyHint": self.read_only_hint,
            "destructiveHint": self.destructive_hint,
            "idempotentHint": self.idempotent_hint,
            "openWorldHint": self.open_world_hint,
        }
        return {key: value for key, value in hints.items() if value is not None}
