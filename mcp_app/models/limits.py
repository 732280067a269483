"""Rate limits and quotas an operator sets on an endpoint (``services/limits.py`` enforces them).

A row bounds the calls (``tools/call``, ``resources/read``, ``prompts/get``) of one endpoint:
of all its callers together (scope "endpoint") or of each caller on its own (scope "caller":
the OAuth user, or on a public endpoint the client address, never the MCP session), and of
every call or only those of one tool, resource or prompt. It holds any of three bounds: a
rate (a token bucket of ``burst`` calls refilled at ``rate`` per ``window``), a cap on
concurrent calls (background calls hold their slot until they end) and a quota (calls per
day or month, for cost control). Every row that matches a call applies.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from simple_history.models import HistoricalRecords

from mcp_app.models.base import TimestampedModel

WINDOW_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


class RateLimit(TimestampedModel):
    class Scope(models.TextChoices):
        ENDPOINT = "endpoint", "endpoint (all callers together)"
        CALLER = "caller", "per caller (OAuth user, or client address on a public endpoint)"

    class Target(models.TextChoices):
        ALL = "", "every call"
        TOOL = "tool", "one tool"
        RESOURCE = "resource", "one resource (by URI)"
        PROMPT = "prompt", "one prompt"

    class Window(models.TextChoices):
        MINUTE = "minute", "per minute"
        HOUR = "hour", "per hour"
        DAY = "day", "per day"

    class Period(models.TextChoices):
        DAY = "day", "per day (UTC)"
        MONTH = "month", "per month (UTC)"

    class RedisDown(models.TextChoices):
        OPEN = "open", "fail open: let calls through (logged and counted)"
        CLOSED = "closed", "fail closed: refuse calls"

    endpoint = models.ForeignKey(
        "mcp_app.Endpoint", on_delete=models.CASCADE, related_name="rate_limits"
    )
    description = models.CharField(max_length=200, blank=True)
    enabled = models.BooleanField(default=True)
    scope = models.CharField(max_length=16, choices=Scope.choices, default=Scope.CALLER)
    target_kind = models.CharField(max_length=16, choices=Target.choices, blank=True, default="")
    target_name = models.CharField(
        max_length=512,
        blank=True,
        help_text="The tool or prompt name, or the resource URI; empty for every call.",
    )
    rate = models.PositiveIntegerField(
        null=True, blank=True, help_text="Sustained calls per window (empty: no rate)."
    )
    window = models.CharField(max_length=8, choices=Window.choices, default=Window.MINUTE)
    burst = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Calls allowed at once before the sustained rate applies (empty: the rate).",
    )
    max_concurrent = models.PositiveIntegerField(
        null=True, blank=True, help_text="Calls running at once, background calls included."
    )
    quota = models.PositiveIntegerField(
        null=True, blank=True, help_text="Calls per quota period (empty: no quota)."
    )
    quota_period = models.CharField(max_length=8, choices=Period.choices, default=Period.DAY)
    on_redis_down = models.CharField(
        max_length=8,
        choices=RedisDown.choices,
        default=RedisDown.OPEN,
        help_text="What calls get while Redis, which holds the counts, is unreachable.",
    )

    history = HistoricalRecords()

    class Meta:
        ordering = ["endpoint_id", "id"]
        constraints = [
            models.CheckConstraint(
                name="ratelimit_has_a_bound",
                condition=(
                    models.Q(rate__isnull=False)
                    | models.Q(max_concurrent__isnull=False)
                    | models.Q(quota__isnull=False)
                ),
            ),
            models.CheckConstraint(
                name="ratelimit_bounds_positive",
                condition=(
                    (models.Q(rate__isnull=True) | models.Q(rate__gt=0))
                    & (models.Q(burst__isnull=True) | models.Q(burst__gt=0))
                    & (models.Q(max_concurrent__isnull=True) | models.Q(max_concurrent__gt=0))
                    & (models.Q(quota__isnull=True) | models.Q(quota__gt=0))
                ),
            ),
            models.CheckConstraint(
                name="ratelimit_target_named",
                condition=(
                    models.Q(target_kind="", target_name="")
                    | (~models.Q(target_kind="") & ~models.Q(target_name=""))
                ),
            ),
        ]

    def __str__(self) -> str:
        return f"limit {self.pk or 'new'}: {self.label}"

    @property
    def label(self) -> str:
        """What the limit bounds, in words (the wire and the admin say it)."""
        who = "per caller" if self.scope == self.Scope.CALLER else "endpoint"
        what = f"{self.target_kind} {self.target_name}" if self.target_kind else "all calls"
        bounds = []
        if self.rate is not None:
            bounds.append(f"{self.rate}/{self.window}")
        if self.max_concurrent is not None:
            bounds.append(f"{self.max_concurrent} at once")
        if self.quota is not None:
            bounds.append(f"{self.quota}/{self.quota_period} quota")
        return f"{who}, {what}: {', '.join(bounds) or 'no bound'}"

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.rate is None and self.max_concurrent is None and self.quota is None:
            errors["rate"] = "Set a rate, a concurrency cap or a quota (or several)."
        for name in ("rate", "burst", "max_concurrent", "quota"):
            value = getattr(self, name)
            if value is not None and value < 1:
                errors[name] = "Must be at least 1."
        if self.burst is not None and self.rate is None:
            errors["burst"] = "A burst needs a rate."
        if self.target_kind and not self.target_name:
            errors["target_name"] = f"Name the {self.target_kind} this limit applies to."
        if not self.target_kind and self.target_name:
            errors["target_kind"] = "Say what the name is: a tool, a resource or a prompt."
        if errors:
            raise ValidationError(errors)
