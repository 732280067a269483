"""The CallLog model: one append-only row per MCP request (per JSON-RPC message in a batch).

Rows are written only by ``services.calllog`` (a background writer, one COPY per batch) and read
by the audit UI (``mcp_app.audit``). Nothing updates a row; retention deletes old ones
(``manage.py purge_call_logs``). Foreign keys carry no database constraint: a record must
outlive the endpoint or user it names, and an INSERT must never fail because one was deleted.

On PostgreSQL the table is partitioned by range of ``created_at`` (migration 0030,
``services/calllog/partitions.py``): the database's primary key is ``(id, created_at)``
(Django's stays ``id``, unique through one sequence), and nothing may hold a foreign key to
a row. Every write must set ``created_at``. A new index is a plain ``AddIndex`` (PostgreSQL
builds it on every partition; it cannot build one CONCURRENTLY on a partitioned table).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from mcp_app.protocol.results import Outcome

# How a row's request ended: the vocabulary background calls share
# (protocol.results.Outcome), labelled for the audit UI. The worker-only endings (lost, never
# started, asked the client) never reach a row: such calls log as tool errors or ok.
STATUS_CHOICES = [
    (Outcome.OK.value, "ok"),
    (Outcome.TOOL_ERROR.value, "tool error"),
    (Outcome.PROTOCOL_ERROR.value, "protocol error"),
    (Outcome.REJECTED.value, "rejected"),
    (Outcome.RUNNING.value, "running"),
    (Outcome.CANCELLED.value, "cancelled"),
    (Outcome.TIMED_OUT.value, "timed out"),
    (Outcome.UPSTREAM_ERROR.value, "upstream unreachable"),
    (Outcome.RATE_LIMITED.value, "rate limited"),
]


class CallLog(models.Model):
    # Not a second vocabulary: the same enum, under the name the audit code reads.
    Status = Outcome

    class Era(models.TextChoices):
        LEGACY = "legacy", "legacy (sessions)"
        MODERN = "modern", "modern (2026-07-28)"

    class MessageType(models.TextChoices):
        REQUEST = "request", "request"
        NOTIFICATION = "notification", "notification"
        RESPONSE = "response", "response"

    id = models.BigAutoField(primary_key=True)
    created_at = models.DateTimeField(help_text="When the request arrived.")
    duration_ms = models.FloatField(null=True, blank=True)
    # The endpoint row when the slug named one; the slug as requested in any case (a 404 for an
    # unknown slug is recorded with endpoint NULL).
    endpoint = models.ForeignKey(
        "mcp_app.Endpoint",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    endpoint_slug = models.CharField(max_length=100, blank=True)
    # The team of the tool an operator tried in the admin (try-it runs name no endpoint):
    # services/teams.py shows such a row to that team. NULL on every other row, and not
    # indexed: such rows are found through endpoint NULL. Not "team": the row is not the
    # team's own (services/teams.has_team).
    tool_team = models.ForeignKey(
        "auth.Group",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )
    era = models.CharField(max_length=8, choices=Era.choices, blank=True)
    protocol_version = models.CharField(max_length=16, blank=True)
    session_id = models.CharField(max_length=64, blank=True)
    http_method = models.CharField(max_length=8)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    message_type = models.CharField(max_length=12, choices=MessageType.choices, blank=True)
    rpc_method = models.CharField(max_length=128, blank=True)
    rpc_id = models.CharField(max_length=200, blank=True, help_text="The JSON-RPC id, as JSON.")
    target = models.CharField(
        max_length=512, blank=True, help_text="The tool or prompt name, or the resource URI."
    )
    # Who called on an OAuth endpoint (mcp_app.auth.bearer); both empty on public endpoints.
    principal = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    client_id = models.CharField(max_length=200, blank=True, help_text="OAuth client id.")
    remote_addr = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=512, blank=True)
    # The client program: the clientInfo it declared (2026-07-28: in each request's _meta;
    # legacy: at initialize, for its session), else the User-Agent's first product token.
    # client_info holds the declaration as sent (None: nothing declared, the name and version
    # are the User-Agent's). Defaults as for upstream: raw bulk loads may leave them out.
    client_name = models.CharField(max_length=200, blank=True, default="", db_default="")
    client_version = models.CharField(max_length=100, blank=True, default="", db_default="")
    client_info = models.JSONField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=STATUS_CHOICES)
    # The upstream MCP server (Upstream.name) a relayed request went to: a tools/call of an MCP
    # upstream tool, a resource, template, prompt or completion read from one. Empty otherwise.
    # Both defaults: the writer fills the column itself, raw bulk loads may leave it out.
    upstream = models.CharField(max_length=128, blank=True, default="", db_default="")
    # The rate limit (models/limits.py) that refused a rate_limited call; its id outlives it.
    rate_limit = models.ForeignKey(
        "mcp_app.RateLimit",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    error_code = models.IntegerField(null=True, blank=True)
    error_message = models.TextField(blank=True)
    # What the tool's capture policy kept (services/calllog/capture.py); None: nothing kept.
    capture = models.CharField(max_length=8, blank=True)
    arguments = models.JSONField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    arguments_bytes = models.PositiveIntegerField(null=True, blank=True)
    result_bytes = models.PositiveIntegerField(null=True, blank=True)
    truncated = models.BooleanField(default=False)
    # Background calls (a later Celery issue) fill these; inline calls leave them empty.
    task_id = models.CharField(max_length=64, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    # The X-Request-Id the response carried (also in the request's log lines).
    request_id = models.CharField(max_length=64, blank=True)
    progress = models.JSONField(null=True, blank=True)
    # Which definitions answered (README, "History and rollback"): the endpoint's catalog
    # version and the history id (HistoricalTool.history_id) of the tool a tools/call ran, as
    # the serving process's snapshot had them. Empty for rows from before history was kept.
    catalog_version = models.PositiveBigIntegerField(null=True, blank=True)
    tool_history_id = models.PositiveBigIntegerField(null=True, blank=True)
    # What the endpoint's policies decided about the call (services/policies): one object per
    # decision, {"policy", "kind", "mode", "phase", "action", "detail", "applied"}; None: none.
    policy_decisions = models.JSONField(null=True, blank=True)

    class Meta:
        # Append-only: no add/change/delete permissions exist to grant.
        default_permissions = ("view",)
        permissions = [
            ("audit_calls", "Can search, inspect and export the call log"),
            ("view_call_payloads", "Can see recorded arguments and results"),
        ]
        # The list is keyset-paginated on id (newest first); every filter has an index that
        # ends in id, so "filter ... ORDER BY id DESC LIMIT n" is one backward index scan.
        indexes = [
            models.Index(fields=["created_at"], name="calllog_created"),
            models.Index(fields=["endpoint", "-id"], name="calllog_endpoint_id"),
            models.Index(fields=["target", "-id"], name="calllog_target_id"),
            models.Index(fields=["rpc_method", "-id"], name="calllog_method_id"),
            models.Index(fields=["status", "-id"], name="calllog_status_id"),
            models.Index(fields=["session_id", "-id"], name="calllog_session_id"),
            models.Index(fields=["request_id", "-id"], name="calllog_request_id"),
            models.Index(fields=["client_name", "-id"], name="calllog_client_name_id"),
            # Only relayed requests name an upstream: the rest stay out of this index.
            # Only calls a policy acted on have decisions (the audit filter "policy acted").
            models.Index(
                fields=["-id"],
                name="calllog_policy_id",
                condition=models.Q(policy_decisions__isnull=False),
            ),
            models.Index(
                fields=["upstream", "-id"],
                name="calllog_upstream_id",
                condition=~models.Q(upstream=""),
            ),
        ]

    def __str__(self) -> str:
        what = self.rpc_method or self.http_method
        return f"#{self.pk} {what} {self.target} {self.status}".replace("  ", " ")

    @property
    def is_error(self) -> bool:
        return self.status not in (self.Status.OK, self.Status.RUNNING)

    @property
    def client_from_user_agent(self) -> bool:
        """The client's name and version were read from the User-Agent, not declared."""
        return self.client_info is None and bool(self.client_name)
