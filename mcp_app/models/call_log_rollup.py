"""Roll-ups of the call log: the audit's charts read these instead of every row of their range.

One ``CallLogRollup`` row counts the calls of one time bucket (a minute, or an hour summed from
its minutes) that share every value the charts group or filter by: endpoint, tool team,
method, tool (``tools/call`` only), status, era, caller and client program. Besides counts it
holds the duration's sum, minimum and maximum and a fixed latency histogram (``h00`` ...), so
percentiles come from bucket counts instead of sorted rows. Rows are written only by
``services.calllog.rollup`` (the upkeep job ``call_log_rollup``) and read by
``mcp_app.audit.selectors``. ``CallLogRollupMark`` (one row) says which range they cover.

The histogram's edges are ``LATENCY_EDGES``: bin 0 holds [0, 0.1 ms), bin k holds
[edge k-1, edge k) with eight bins a decade (each edge 1.334 times the last), and the last bin
everything from 1,000,000 ms on. Changing the edges changes what stored rows mean: a new
migration and a rebuild (``manage.py call_log_rollup --rebuild``).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

# Upper edges (ms) of the histogram's bins but the last: 0.1 ms to 1,000,000 ms, 8 a decade.
BINS_PER_DECADE = 8
LATENCY_EDGES: tuple[float, ...] = tuple(
    0.1 * 10 ** (k / BINS_PER_DECADE) for k in range(7 * BINS_PER_DECADE + 1)
)
# One more bin than edges: the last is open above.
HISTOGRAM_FIELDS: tuple[str, ...] = tuple(f"h{k:02d}" for k in range(len(LATENCY_EDGES) + 1))


class Grain(models.TextChoices):
    MINUTE = "minute", "minute"
    HOUR = "hour", "hour"


class CallLogRollup(models.Model):
    Grain = Grain

    grain = models.CharField(max_length=6, choices=Grain.choices)
    bucket_start = models.DateTimeField()
    # The grouping values, as the call log stores them (no database constraints: a rollup
    # outlives the endpoint, team or user it names, as the rows it counts do).
    endpoint = models.ForeignKey(
        "mcp_app.Endpoint",
        null=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )
    endpoint_slug = models.CharField(max_length=100, blank=True)
    tool_team = models.ForeignKey(
        "auth.Group",
        null=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )
    rpc_method = models.CharField(max_length=128, blank=True)
    # The tool of a ``tools/call``; "" for every other method (resource URIs would multiply
    # the rows, and no chart names them).
    target = models.CharField(max_length=512, blank=True)
    status = models.CharField(max_length=16, blank=True)
    era = models.CharField(max_length=8, blank=True)
    principal = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )
    client_id = models.CharField(max_length=200, blank=True)
    client_name = models.CharField(max_length=200, blank=True)
    client_version = models.CharField(max_length=100, blank=True)
    calls = models.PositiveBigIntegerField(default=0)
    # Calls that declared a clientInfo (the overview tells declared programs from guessed).
    declared = models.PositiveBigIntegerField(default=0)
    # Calls with a duration, and its sum, minimum and maximum over them.
    timed = models.PositiveBigIntegerField(default=0)
    duration_sum = models.FloatField(default=0.0)
    duration_min = models.FloatField(null=True)
    duration_max = models.FloatField(null=True)

    class Meta:
        indexes = [models.Index(fields=["grain", "bucket_start"], name="calllogrollup_bucket")]

    def __str__(self) -> str:
        return f"{self.grain} {self.bucket_start:%Y-%m-%d %H:%M} {self.endpoint_slug} {self.calls}"


for _name in HISTOGRAM_FIELDS:
    models.PositiveBigIntegerField(default=0).contribute_to_class(CallLogRollup, _name)


class CallLogRollupMark(models.Model):
    """What the rollups cover: every minute in [``start``, ``minute_until``) and every hour in
    [``start``, ``hour_until``); ``seen_id`` and ``prior_id``: the newest call-log id the last
    run and the one before it saw (each run re-reads the rows inserted since the one before
    last, so a row committed late in a batch still reaches its bucket)."""

    start = models.DateTimeField()
    minute_until = models.DateTimeField()
    hour_until = models.DateTimeField()
    seen_id = models.BigIntegerField(default=0)
    prior_id = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.start:%Y-%m-%d %H:%M} .. {self.minute_until:%Y-%m-%d %H:%M}"
