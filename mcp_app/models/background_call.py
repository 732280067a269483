"""The BackgroundCall model: one tool call run on a Celery worker, and the MCP task behind it.

The row is written before the call is enqueued (and before a task handle goes out), so any web
process can follow, poll or cancel it. Status moves only forward, by conditional UPDATEs
(``services.background.calls``): ``queued`` -> ``working`` (a worker claimed it) -> a final
status. The worker refreshes ``heartbeat_at`` while it runs; a row whose heartbeat went stale
belongs to a worker that died, and whoever notices marks it failed (``outcome = "lost"``).
"""

from __future__ import annotations

import secrets

from django.db import models
from django.utils import timezone

from mcp_app.protocol.results import Outcome

# How a background call ended, in the vocabulary it shares with the call log
# (protocol.results.Outcome), labelled for the admin. A call never ends "rejected" or
# "running"; "input_required" is a plain (non-task) 2026-07-28 call whose tool asked the
# client: the web process answers input_required and the client retries with the answers.
OUTCOME_CHOICES = [
    (Outcome.OK.value, "finished"),
    (Outcome.TOOL_ERROR.value, "tool reported an error"),
    (Outcome.PROTOCOL_ERROR.value, "protocol error"),
    (Outcome.TIMED_OUT.value, "timed out"),
    (Outcome.LOST.value, "worker lost"),
    (Outcome.NOT_STARTED.value, "no worker started it"),
    (Outcome.CANCELLED.value, "cancelled"),
    (Outcome.INPUT_REQUIRED.value, "asked the client"),
    (Outcome.UPSTREAM_ERROR.value, "upstream unreachable"),
]


def new_call_id() -> str:
    """An unguessable id: it is also the MCP ``taskId`` the client polls with."""
    return f"tsk_{secrets.token_urlsafe(18)}"


class BackgroundCall(models.Model):
    class Status(models.TextChoices):
        # MCP task statuses (2025-11-25 basic/utilities/tasks), plus `queued` before a worker
        # claims the call (reported to clients as `working`).
        QUEUED = "queued", "queued"
        WORKING = "working", "working"
        INPUT_REQUIRED = "input_required", "input required"
        COMPLETED = "completed", "completed"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"

    ACTIVE = (Status.QUEUED, Status.WORKING, Status.INPUT_REQUIRED)

    id = models.CharField(primary_key=True, max_length=40, default=new_call_id, editable=False)
    endpoint = models.ForeignKey(
        "mcp_app.Endpoint", on_delete=models.CASCADE, related_name="background_calls"
    )
    tool = models.ForeignKey(
        "mcp_app.Tool", null=True, on_delete=models.SET_NULL, related_name="background_calls"
    )
    tool_name = models.CharField(max_length=128)
    arguments = models.JSONField(default=dict)
    # Who may see and cancel it: the authenticated principal's key, and for legacy calls the
    # session too ("" for none).
    principal = models.CharField(max_length=200, blank=True)
    session_id = models.CharField(max_length=64, blank=True)
    # The JSON-RPC id of the tools/call request, so notifications/cancelled can find the call.
    request_id = models.JSONField(null=True, blank=True)
    # What the worker needs to shape progress and logs like the caller's request would.
    protocol_version = models.CharField(max_length=16)
    progress_token = models.JSONField(null=True, blank=True)
    log_level = models.CharField(max_length=16, blank=True)
    client_capabilities = models.JSONField(default=dict, blank=True)

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    outcome = models.CharField(max_length=16, choices=OUTCOME_CHOICES, blank=True)
    status_message = models.CharField(max_length=500, blank=True)
    # The tool's result (content, structuredContent, isError) once completed; a JSON-RPC
    # error object when it failed with a protocol error.
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    # What the endpoint's policies decided on the worker (services/policies), which the web
    # request's call-log row takes over; None: none.
    policy_decisions = models.JSONField(null=True, blank=True)
    # MCP tasks: the questions the call waits on, and the answers given so far.
    input_requests = models.JSONField(null=True, blank=True)
    input_responses = models.JSONField(default=dict, blank=True)
    # A plain 2026-07-28 call that asked while its worker holds it open between rounds
    # (services/continuations.py): the held run the client's retry resumes ("<id>/<round>").
    continuation = models.CharField(max_length=80, blank=True, default="", db_default="")
    is_task = models.BooleanField(default=False, help_text="A task handle went to the client.")
    ttl_ms = models.PositiveBigIntegerField(null=True, blank=True)
    poll_interval_ms = models.PositiveIntegerField(default=1000)

    soft_time_limit = models.FloatField()
    hard_time_limit = models.FloatField()
    worker = models.CharField(max_length=200, blank=True)
    worker_pid = models.PositiveIntegerField(null=True, blank=True)
    last_progress = models.JSONField(null=True, blank=True)

    created_at = models.DateTimeField(default=timezone.now, editable=False)
    # The last status change (a task's lastUpdatedAt): services.background sets it with each
    # one, never with heartbeats or progress. Equal to created_at until the first.
    updated_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Deleted after this.")

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # tasks/list: a principal's tasks, newest first; the reaper: active rows.
            models.Index(fields=["endpoint", "principal", "-created_at"], name="bgcall_owner"),
            models.Index(fields=["status", "heartbeat_at"], name="bgcall_status"),
            models.Index(fields=["expires_at"], name="bgcall_expires"),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} {self.id} {self.status}"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE
