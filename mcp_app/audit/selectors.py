"""Read-side queries of the call log: filtered search, keyset pages and iteration, statistics.

Every list query is ``filter ... ORDER BY id DESC LIMIT n`` with an id bound instead of an
OFFSET, so page 1,000 costs what page 1 costs, and each filter column has an index ending in
id (models/call_log.py). Statistics aggregate in the database: PostgreSQL computes latency
percentiles with ``percentile_cont``; other databases (SQLite, the embedded default) compute
them in Python over the newest ``PERCENTILE_SAMPLE`` rows of the range.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import (
    Aggregate,
    BigIntegerField,
    Case,
    Count,
    FloatField,
    Max,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Trunc
from django.utils import timezone
from prometheus_client import REGISTRY, CollectorRegistry, multiprocess

from mcp_app.auth.clients import client_ids_named, client_names
from mcp_app.models import BackgroundCall, CallLog, CallLogRollup, Endpoint, Session, Tool
from mcp_app.models.call_log import STATUS_CHOICES
from mcp_app.services.calllog.rollup import (
    Measures,
    add_up,
    rollup_plan,
    rollups_of,
)
from mcp_app.services.teams import calls_of

PAGE_SIZE = 50
FEED_LIMIT = 200
# Rows per export query: one chunk (with its rendered text) is what an export holds at once.
EXPORT_CHUNK = 500
STATS_GROUPS = 15
PERCENTILE_SAMPLE = 200_000
PERCENTILES = (0.5, 0.95, 0.99)
_OK_STATUSES = (CallLog.Status.OK, CallLog.Status.RUNNING)
# The status filter's "any failure": every status but ok and running (CallLog.is_error).
ANY_FAILURE = "failed"
FAILURE_STATUSES = tuple(
    value for value, _ in STATUS_CHOICES if value not in {s.value for s in _OK_STATUSES}
)
T = TypeVar("T")


# The policy filter's value for "any policy decided about the call".
ANY_POLICY = "*"


@dataclass(frozen=True, slots=True)
class CallFilter:
    """The audit list's filters, all optional; the same object drives list, export and stats."""

    endpoint: Endpoint | None = None
    tool: str = ""
    method: str = ""
    status: str = ""
    era: str = ""
    session: str = ""
    since: datetime | None = None
    until: datetime | None = None
    q: str = ""
    user: str = ""
    client: str = ""
    request_id: str = ""
    # The upstream MCP server relayed requests went to (CallLog.upstream).
    upstream: str = ""
    # Calls a policy of this name decided about (CallLog.policy_decisions); "*": any policy.
    policy: str = ""
    # The client program (CallLog.client_name/client_version), in every era.
    client_name: str = ""
    client_version: str = ""
    # The endpoints whose calls the viewer's teams see (services.teams.seen_endpoints);
    # None: every call, those to no endpoint too. Set by the forms from the signed-in user,
    # with ``teams``: the viewer's teams, whose tools' try-it runs (no endpoint) they see.
    endpoints: tuple[int, ...] | None = None
    teams: tuple[int, ...] = ()


def call_log_search(*, filters: CallFilter) -> QuerySet[CallLog]:
    """Return the records matching ``filters``, newest first."""
    qs = _narrowed(CallLog.objects.all(), filters)
    if filters.session:
        qs = qs.filter(session_id=filters.session)
    if filters.request_id:
        qs = qs.filter(request_id=filters.request_id)
    if filters.upstream:
        qs = qs.filter(upstream=filters.upstream)
    if filters.policy:
        # Only rows with decisions are in the partial index calllog_policy_id.
        qs = qs.filter(policy_decisions__isnull=False)
        if filters.policy != ANY_POLICY:
            qs = qs.filter(policy_decisions__contains=[{"policy": filters.policy}])
    if filters.since is not None:
        qs = qs.filter(created_at__gte=filters.since)
    if filters.until is not None:
        qs = qs.filter(created_at__lt=filters.until)
    if filters.q:
        text = filters.q.strip()
        # Names by substring; ids exactly (a session, request or JSON-RPC id is pasted whole).
        match = (
            Q(target__icontains=text)
            | Q(rpc_method__icontains=text)
            | Q(session_id=text)
            | Q(request_id=text)
            | Q(rpc_id=text)
            | Q(rpc_id=f'"{text}"')
        )
        if text.isdigit() and int(text) < 2**63:
            match |= Q(pk=int(text))
        qs = qs.filter(match)
    return qs.select_related("endpoint").order_by("-id")


def sessions_of_client(filters: CallFilter) -> QuerySet[Session]:
    """Legacy sessions whose clientInfo matches the filter's client name and version (the
    overview's count of active sessions)."""
    sessions = Session.objects.order_by()
    if filters.endpoints is not None:
        sessions = sessions.filter(endpoint_id__in=filters.endpoints)
    if filters.client_name:
        sessions = sessions.filter(client_info__name=filters.client_name)
    if filters.client_version:
        sessions = sessions.filter(client_info__version=filters.client_version)
    return sessions


def call_log_page(
    qs: QuerySet[CallLog], *, before: int | None, size: int = PAGE_SIZE
) -> tuple[list[CallLog], int | None]:
    """Return one page older than id ``before`` (the newest page when None) and the next bound."""
    if before is not None:
        qs = qs.filter(id__lt=before)
    rows = list(qs[: size + 1])
    more = len(rows) > size
    rows = rows[:size]
    return rows, rows[-1].pk if more and rows else None


def call_log_newer(qs: QuerySet[CallLog], *, after: int, limit: int = FEED_LIMIT) -> list[CallLog]:
    """Return records newer than id ``after``, newest first (the live tail's poll)."""
    return list(qs.filter(id__gt=after)[:limit])


def call_log_iter(qs: QuerySet[CallLog], *, chunk: int = EXPORT_CHUNK) -> Iterator[CallLog]:
    """Yield every matching record, newest first, ``chunk`` rows per query (keyset, no OFFSET).

    Memory stays at one chunk whatever the total, so an export of millions of rows streams.
    """
    for rows in call_log_chunks(qs, chunk=chunk):
        yield from rows


def call_log_chunks(qs: QuerySet[CallLog], *, chunk: int = EXPORT_CHUNK) -> Iterator[list[CallLog]]:
    """``call_log_iter`` by chunks: one list of up to ``chunk`` records per query."""
    before: int | None = None
    while True:
        rows = call_log_chunk(qs, before=before, size=chunk)
        if rows:
            yield rows
        if len(rows) < chunk:
            return
        before = rows[-1].pk


async def acall_log_chunks(
    qs: QuerySet[CallLog], *, render: Callable[[list[CallLog]], T], chunk: int = EXPORT_CHUNK
) -> AsyncIterator[T]:
    """``call_log_iter`` for the event loop: yield ``render`` of each chunk of records.

    Each chunk is read and rendered in a thread, one at a time, so an ASGI response sends a
    chunk before the next is read (its first byte leaves at once, the process holds one
    chunk, not the export) and the event loop never runs the query or the formatting.
    """

    def read(before: int | None) -> tuple[int | None, int, T | None]:
        rows = call_log_chunk(qs, before=before, size=chunk)
        return (rows[-1].pk if rows else None), len(rows), (render(rows) if rows else None)

    before: int | None = None
    while True:
        before, count, rendered = await sync_to_async(read)(before)
        if rendered is not None:
            yield rendered
        if count < chunk:
            return


def call_log_chunk(qs: QuerySet[CallLog], *, before: int | None, size: int) -> list[CallLog]:
    """Return up to ``size`` records older than id ``before`` (the newest when None)."""
    page = qs if before is None else qs.filter(id__lt=before)
    return list(page[:size])


def tool_for_call(record: CallLog) -> Tool | None:
    """The tool a ``tools/call`` record names, if its endpoint still publishes one by that name."""
    if record.rpc_method != "tools/call" or record.endpoint_id is None or not record.target:
        return None
    return Tool.objects.filter(endpoints=record.endpoint_id, name=record.target).first()


def tool_version_for_call(record: CallLog) -> Any:
    """The history row of the tool definition that answered ``record`` (None if unrecorded).

    It outlives the tool: a deleted or renamed tool's version still opens.
    """
    if record.tool_history_id is None:
        return None
    return Tool.history.filter(history_id=record.tool_history_id).first()


# -- statistics -----------------------------------------------------------------------------


class Percentile(Aggregate):
    """PostgreSQL's ``percentile_cont(fraction) WITHIN GROUP (ORDER BY expression)``."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: str, fraction: float) -> None:
        # A float we choose, never user input: safe to place in the SQL text.
        super().__init__(expression, fraction=repr(float(fraction)))


@dataclass(frozen=True, slots=True)
class Bucket:
    start: datetime
    total: int
    errors: int

    @property
    def error_rate(self) -> float:
        return self.errors / self.total if self.total else 0.0


@dataclass(frozen=True, slots=True)
class LatencyRow:
    name: str
    calls: int
    errors: int
    p50: float | None
    p95: float | None
    p99: float | None

    @property
    def error_rate(self) -> float:
        return self.errors / self.calls if self.calls else 0.0


@dataclass(frozen=True, slots=True)
class CallStats:
    since: datetime
    until: datetime
    bucket: str
    buckets: list[Bucket]
    per_tool: list[LatencyRow]
    per_endpoint: list[LatencyRow]
    per_client: list[LatencyRow]
    # Percentiles estimated from the rollups' latency histogram, not the rows' durations.
    estimated: bool = False

    @property
    def total(self) -> int:
        return sum(bucket.total for bucket in self.buckets)

    @property
    def errors(self) -> int:
        return sum(bucket.errors for bucket in self.buckets)

    @property
    def error_rate(self) -> float:
        return self.errors / self.total if self.total else 0.0


def bucket_kind(span: timedelta) -> str:
    """Pick a bucket size giving a readable number of bars (about 24 to 180)."""
    if span <= timedelta(hours=3):
        return "minute"
    if span <= timedelta(days=7):
        return "hour"
    return "day"


def call_log_stats(
    *, filters: CallFilter, since: datetime, until: datetime, rollups: bool = True
) -> CallStats:
    """Calls over time, error rate and latency percentiles per tool, endpoint and client.

    Four aggregate queries, whatever the number of rows; the time range is required so
    every one of them is bounded by the created_at index. Read from the rollups
    (``_Window``) when the filters are ones they keep: then their cost follows the number of
    buckets, not rows, and percentiles come from the histogram (within one of its bins).
    """
    window = (
        _Window.of(filters, since, until, hours=bucket_kind(until - since) != "minute")
        if rollups
        else None
    )
    if window is not None:
        return window.stats(since, until)
    qs = call_log_search(filters=filters).filter(created_at__gte=since, created_at__lt=until)
    qs = qs.select_related(None).order_by()
    errors = Count("id", filter=~Q(status__in=_OK_STATUSES))
    kind = bucket_kind(until - since)
    buckets = [
        Bucket(row["bucket"], row["total"], row["errors"])
        for row in qs.annotate(bucket=Trunc("created_at", kind, tzinfo=UTC))
        .values("bucket")
        .annotate(total=Count("id"), errors=errors)
        .order_by("bucket")
    ]
    per_tool = _latency(qs.filter(rpc_method="tools/call").exclude(target=""), "target")
    per_endpoint = _latency(qs.exclude(endpoint_slug=""), "endpoint_slug")
    per_client = _latency(qs.exclude(client_name=""), "client_name")
    return CallStats(
        since, until, kind, _fill(buckets, kind, since, until), per_tool, per_endpoint, per_client
    )


def _latency(qs: QuerySet[CallLog], group: str) -> list[LatencyRow]:
    errors = Count("id", filter=~Q(status__in=_OK_STATUSES))
    grouped = qs.values(group).annotate(calls=Count("id"), errors=errors).order_by("-calls")
    if connection.vendor == "postgresql":
        percentiles = {f"p{round(p * 100)}": Percentile("duration_ms", p) for p in PERCENTILES}
        return [
            LatencyRow(row[group], row["calls"], row["errors"], row["p50"], row["p95"], row["p99"])
            for row in grouped.annotate(**percentiles)[:STATS_GROUPS]
        ]
    top = list(grouped[:STATS_GROUPS])
    names = [row[group] for row in top]
    samples: dict[str, list[float]] = defaultdict(list)
    sample = (
        qs.filter(**{f"{group}__in": names}, duration_ms__isnull=False)
        .order_by("-id")
        .values_list(group, "duration_ms")[:PERCENTILE_SAMPLE]
    )
    for name, duration in sample:
        samples[name].append(duration)
    rows = []
    for row in top:
        values = sorted(samples[row[group]])
        p50, p95, p99 = (percentile(values, p) for p in PERCENTILES)
        rows.append(LatencyRow(row[group], row["calls"], row["errors"], p50, p95, p99))
    return rows


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Linear interpolation between closest ranks, as ``percentile_cont`` does."""
    if not values:
        return None
    position = (len(values) - 1) * fraction
    low, high = math.floor(position), math.ceil(position)
    return values[low] + (values[high] - values[low]) * (position - low)


def _fill(buckets: list[Bucket], kind: str, since: datetime, until: datetime) -> list[Bucket]:
    """Add the empty buckets, so the time axis is even and quiet periods show as gaps."""
    step = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}
    start = _truncate(since.astimezone(UTC), kind)
    found = {bucket.start.astimezone(UTC): bucket for bucket in buckets}
    filled = []
    current = start
    while current < until:
        filled.append(found.get(current, Bucket(current, 0, 0)))
        current += step[kind]
    return filled


def _truncate(moment: datetime, kind: str) -> datetime:
    moment = moment.replace(second=0, microsecond=0)
    if kind in ("hour", "day"):
        moment = moment.replace(minute=0)
    if kind == "day":
        moment = moment.replace(hour=0)
    return moment


def caller_names(rows: Sequence[CallLog]) -> tuple[dict[int, str], dict[str, str]]:
    """The usernames and OAuth client names the records name, by id: a query for each kind
    the records hold (none without callers). Read apart rather than joined, so the list and
    export queries keep their backward index scans."""
    user_ids = {row.principal_id for row in rows if row.principal_id is not None}
    client_ids = sorted({row.client_id for row in rows if row.client_id})
    User = get_user_model()
    users = (
        dict(User._default_manager.filter(pk__in=user_ids).values_list("pk", User.USERNAME_FIELD))
        if user_ids
        else {}
    )
    return users, (client_names(client_ids) if client_ids else {})


def as_export_row(
    record: CallLog,
    *,
    payloads: bool,
    names: tuple[Mapping[int, str], Mapping[str, str]] = ({}, {}),
) -> dict[str, Any]:
    """One record as plain JSON data (CSV and JSON Lines exports share this).

    Names stand next to ids, from ``names`` (``caller_names``): the user's and the OAuth
    client's registered name ("" when unknown or deleted).
    """
    users, clients = names
    row: dict[str, Any] = {
        "id": record.pk,
        "created_at": record.created_at.isoformat(),
        "duration_ms": record.duration_ms,
        "endpoint": record.endpoint_slug,
        "era": record.era,
        "protocol_version": record.protocol_version,
        "session_id": record.session_id,
        "http_method": record.http_method,
        "http_status": record.http_status,
        "message_type": record.message_type,
        "rpc_method": record.rpc_method,
        "rpc_id": record.rpc_id,
        "target": record.target,
        "principal_id": record.principal_id,
        "user": users.get(record.principal_id, "") if record.principal_id is not None else "",
        "client_id": record.client_id,
        "oauth_client_name": clients.get(record.client_id, ""),
        "client_name": record.client_name,
        "client_version": record.client_version,
        "client_info": record.client_info,
        "remote_addr": record.remote_addr,
        "user_agent": record.user_agent,
        "status": record.status,
        "error_code": record.error_code,
        "error_message": record.error_message,
        "upstream": record.upstream,
        "policy_decisions": record.policy_decisions,
        "capture": record.capture,
        "arguments_bytes": record.arguments_bytes,
        "result_bytes": record.result_bytes,
        "truncated": record.truncated,
        "task_id": record.task_id,
        "worker": record.worker,
        "request_id": record.request_id,
    }
    if payloads:
        row["arguments"] = record.arguments
        row["result"] = record.result
        row["progress"] = record.progress
    return row


# -- per-tool and per-endpoint figures (admin pages) ------------------------------------------

FIGURES_WINDOW = timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class Figures:
    """How a tool or endpoint did over the window: calls, errors, latency, last call/error."""

    calls: int = 0
    errors: int = 0
    p50: float | None = None
    p95: float | None = None
    last_call: datetime | None = None
    last_error: datetime | None = None
    last_call_id: int | None = None
    last_error_id: int | None = None

    @property
    def error_rate(self) -> float:
        return self.errors / self.calls if self.calls else 0.0


def first_id_since(since: datetime) -> int | None:
    """The id of the first record at or after ``since`` (ids grow with time), via calllog_created.

    Bounding by id lets a per-target query range-scan the ``(target, -id)`` index over the
    window alone, however many rows older days hold.
    """
    return (
        CallLog.objects.filter(created_at__gte=since)
        .order_by("created_at")
        .values_list("id", flat=True)
        .first()
    )


def tool_calls_since(*, tools: Sequence[Tool], since: datetime) -> QuerySet[CallLog]:
    """The ``tools/call`` records of ``tools`` since ``since``, each with its tool's id.

    A record belongs to a tool when it names the tool on one of the tool's endpoints: tool
    names are unique per endpoint only, so a name alone would add up the calls of
    same-named tools on different endpoints. ``tool_pk`` holds the id of the tool a record
    belongs to. Tools must come with their endpoints (prefetched, or a query per tool).
    """
    first = first_id_since(since)
    pairs = [(tool.pk, tool.name, [e.pk for e in tool.endpoints.all()]) for tool in tools]
    pairs = [(pk, name, endpoints) for pk, name, endpoints in pairs if endpoints]
    if first is None or not pairs:
        # Still with the annotation, so figures grouped by it are simply empty.
        return CallLog.objects.annotate(tool_pk=Value(None, BigIntegerField())).none()
    owner = Case(
        *(When(Q(target=name, endpoint_id__in=endpoints), then=Value(pk))
          for pk, name, endpoints in pairs),
        output_field=BigIntegerField(),
    )  # fmt: skip
    return (
        CallLog.objects.filter(
            id__gte=first,
            created_at__gte=since,
            target__in=sorted({name for _, name, _ in pairs}),
            rpc_method="tools/call",
        )
        .annotate(tool_pk=owner)
        .filter(tool_pk__isnull=False)
    )


def tool_figures(*, tools: Sequence[Tool], since: datetime) -> dict[int, Figures]:
    """``tools/call`` figures per tool id since ``since`` (tools absent: no calls)."""
    return _figures(tool_calls_since(tools=tools, since=since), "tool_pk")


def tool_endpoint_figures(*, tool: Tool, since: datetime) -> dict[int, Figures]:
    """One tool's ``tools/call`` figures per endpoint id since ``since``."""
    return _figures(tool_calls_since(tools=[tool], since=since), "endpoint_id")


def endpoint_figures(*, endpoint_ids: Sequence[int], since: datetime) -> dict[int, Figures]:
    """Figures of every request per endpoint id since ``since``."""
    first = first_id_since(since)
    if first is None or not endpoint_ids:
        return {}
    qs = CallLog.objects.filter(
        id__gte=first, created_at__gte=since, endpoint_id__in=list(endpoint_ids)
    )
    return _figures(qs, "endpoint_id")


def _figures(qs: QuerySet[CallLog], group: str) -> dict[Any, Figures]:
    failed = ~Q(status__in=_OK_STATUSES)
    aggregates: dict[str, Any] = {
        "calls": Count("id"),
        "errors": Count("id", filter=failed),
        "last_call": Max("created_at"),
        "last_error": Max("created_at", filter=failed),
        "last_call_id": Max("id"),
        "last_error_id": Max("id", filter=failed),
    }
    if connection.vendor == "postgresql":
        aggregates["p50"] = Percentile("duration_ms", 0.5)
        aggregates["p95"] = Percentile("duration_ms", 0.95)
    rows = qs.order_by().values(group).annotate(**aggregates)
    figures = {
        row[group]: Figures(
            calls=row["calls"],
            errors=row["errors"],
            p50=row.get("p50"),
            p95=row.get("p95"),
            last_call=row["last_call"],
            last_error=row["last_error"],
            last_call_id=row["last_call_id"],
            last_error_id=row["last_error_id"],
        )
        for row in rows
    }
    if connection.vendor != "postgresql":
        samples: dict[Any, list[float]] = defaultdict(list)
        durations = qs.filter(duration_ms__isnull=False).order_by("-id")
        for key, duration in durations.values_list(group, "duration_ms")[:PERCENTILE_SAMPLE]:
            samples[key].append(duration)
        for key, found in figures.items():
            values = sorted(samples[key])
            figures[key] = dataclasses.replace(
                found, p50=percentile(values, 0.5), p95=percentile(values, 0.95)
            )
    return figures


# -- overview ---------------------------------------------------------------------------------

OVERVIEW_TOP = 5
BREAKDOWN_TOP = 10
ACTIVE_BACKGROUND = (
    BackgroundCall.Status.QUEUED,
    BackgroundCall.Status.WORKING,
    BackgroundCall.Status.INPUT_REQUIRED,
)


@dataclass(frozen=True, slots=True)
class Breakdown:
    """Calls of one user or OAuth client."""

    key: str
    calls: int
    errors: int

    @property
    def error_rate(self) -> float:
        return self.errors / self.calls if self.calls else 0.0


@dataclass(frozen=True, slots=True)
class ClientProgram:
    """Calls of one client program (name and version), in every era.

    ``from_user_agent``: no call of it declared a ``clientInfo``; the User-Agent named it.
    """

    name: str
    version: str
    calls: int
    errors: int
    from_user_agent: bool

    @property
    def error_rate(self) -> float:
        return self.errors / self.calls if self.calls else 0.0


@dataclass(frozen=True, slots=True)
class OpenStreams:
    """SSE streams open now; ``all_processes`` when every web process's count is summed."""

    count: int
    all_processes: bool


def open_streams() -> OpenStreams:
    """The ``mcphost_sse_streams_open`` gauge: of every web process in multiprocess mode.

    Without ``PROMETHEUS_MULTIPROC_DIR`` each process counts only its own streams, so the
    figure is this process's (one web process, as the run command starts, is all of them).
    """
    name = "mcphost_sse_streams_open"
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return OpenStreams(int(registry.get_sample_value(name) or 0), True)
    return OpenStreams(int(REGISTRY.get_sample_value(name) or 0), False)


@dataclass(frozen=True, slots=True)
class Overview:
    """The fleet at a glance: which tools are busiest, failing and slowest, and what is live."""

    busiest: list[LatencyRow]
    failing: list[LatencyRow]
    slowest: list[LatencyRow]
    active_sessions: int
    background: dict[str, int]
    users: list[Breakdown]
    clients: list[Breakdown]
    open_streams: OpenStreams
    client_programs: list[ClientProgram]
    # The tools' percentiles are estimated from the rollups' latency histogram.
    estimated: bool = False


def call_log_overview(
    *,
    since: datetime,
    idle_seconds: int,
    filters: CallFilter | None = None,
    rollups: bool = True,
) -> Overview:
    """Tools ranked over the window, live sessions and background calls, per-caller counts.

    The rankings cover the STATS_GROUPS busiest tools of the window (one percentile query).
    ``filters`` (user, OAuth client, client name and version) narrow the rankings, the
    per-caller and per-client counts and the legacy sessions; ``filters.endpoints`` (the
    viewer's teams) narrows all but the open streams, which are the fleet's. The rankings and
    counts read the rollups where there are some (as ``call_log_stats``; ``rollups=False``:
    the call log alone).
    """
    filters = filters or CallFilter()
    window = call_log_search(filters=filters).filter(created_at__gte=since)
    window = window.select_related(None).order_by()
    rolled = _Window.of(filters, since, timezone.now(), hours=True) if rollups else None
    if rolled is not None:
        tools, users, clients, programs = rolled.overview()
    else:
        tools = _latency(window.filter(rpc_method="tools/call").exclude(target=""), "target")
        users = _breakdown(window.exclude(principal__isnull=True), "principal__username")
        clients = _breakdown(window.exclude(client_id=""), "client_id")
        programs = _client_programs(window)
    failing = sorted((row for row in tools if row.errors), key=lambda r: -r.error_rate)
    slowest = sorted((row for row in tools if row.p95 is not None), key=lambda r: -(r.p95 or 0))
    live = timezone.now() - timedelta(seconds=idle_seconds)
    sessions = sessions_of_client(filters)
    if filters.user:
        sessions = sessions.filter(user__username=filters.user)
    if filters.client:
        sessions = sessions.filter(
            Q(oauth_client_id=filters.client)
            | Q(oauth_client_id__in=client_ids_named(filters.client))
        )
    running = BackgroundCall.objects.filter(status__in=ACTIVE_BACKGROUND)
    if filters.endpoints is not None:
        running = running.filter(endpoint_id__in=filters.endpoints)
    background = dict(running.order_by().values_list("status").annotate(n=Count("id")))
    return Overview(
        busiest=tools[:OVERVIEW_TOP],
        failing=failing[:OVERVIEW_TOP],
        slowest=slowest[:OVERVIEW_TOP],
        active_sessions=sessions.filter(closed_at__isnull=True, last_seen_at__gte=live).count(),
        background={status: background.get(status, 0) for status in ACTIVE_BACKGROUND},
        users=users,
        clients=clients,
        open_streams=open_streams(),
        client_programs=programs,
        estimated=rolled is not None,
    )


def _client_programs(window: QuerySet[CallLog]) -> list[ClientProgram]:
    rows = (
        window.values("client_name", "client_version")
        .annotate(
            calls=Count("id"),
            errors=Count("id", filter=~Q(status__in=_OK_STATUSES)),
            declared=Count("id", filter=Q(client_info__isnull=False)),
        )
        .order_by("-calls")[:BREAKDOWN_TOP]
    )
    return [
        ClientProgram(
            row["client_name"],
            row["client_version"],
            row["calls"],
            row["errors"],
            bool(row["client_name"]) and not row["declared"],
        )
        for row in rows
    ]


def _breakdown(qs: QuerySet[CallLog], group: str) -> list[Breakdown]:
    rows = (
        qs.values(group)
        .annotate(calls=Count("id"), errors=Count("id", filter=~Q(status__in=_OK_STATUSES)))
        .order_by("-calls")[:BREAKDOWN_TOP]
    )
    return [Breakdown(str(row[group]), row["calls"], row["errors"]) for row in rows]


# -- the charts from rollups ------------------------------------------------------------------

# Filters the rollups keep a column for; any other (session, request id, search, upstream,
# policy) reads the call log itself, as the list does.
_UNROLLED = ("session", "q", "request_id", "upstream", "policy")


@dataclass(frozen=True, slots=True)
class _Window:
    """The calls of a time range matching some filters, as rollup rows plus raw rows.

    ``rollups``: the rollup rows of the range's rolled-up minutes and hours; ``raw``: the
    query of the call-log rows of the parts not rolled up, if there are some
    (services/calllog/rollup.rollup_plan).
    Every figure adds up both, so counts are exactly those of the call log.
    """

    rollups: QuerySet[CallLogRollup]
    raw: list[QuerySet[CallLog]]

    @classmethod
    def of(
        cls, filters: CallFilter, since: datetime, until: datetime, *, hours: bool
    ) -> _Window | None:
        """None when a filter is one the rollups cannot answer."""
        if any(getattr(filters, name) for name in _UNROLLED):
            return None
        # A tool name alone matches every method's target; rollups keep tools/call's only.
        if filters.tool and filters.method != "tools/call":
            return None
        since = max(since, filters.since) if filters.since else since
        until = min(until, filters.until) if filters.until else until
        plan = rollup_plan(since=since, until=until, hours=hours)
        if plan.rollups is None:
            # Nothing rolled up in the range: the call log's exact percentiles, as before.
            return None
        base = dataclasses.replace(filters, since=None, until=None)
        # The parts not rolled up (a partial minute at each end, the open minutes) in one
        # query: each figure then reads the call log once, not once a part.
        unrolled = Q()
        for start, end in plan.raw:
            unrolled |= Q(created_at__gte=start, created_at__lt=end)
        raw = (
            [call_log_search(filters=base).filter(unrolled).select_related(None).order_by()]
            if plan.raw
            else []
        )
        return cls(rollups_of(_rollup_search(base), plan), raw)

    def grouped(self, key: Sequence[str]) -> dict[Any, Measures]:
        """Measures per combination of ``key``'s values (fields both models share): one query
        of the rollups and one of the raw parts, whatever the figures made of it."""
        found: dict[Any, Measures] = {}
        for qs in (self.rollups, *self.raw):
            add_up(found, qs, key)
        return found

    def overview(self) -> tuple[list[LatencyRow], list[Breakdown], list[Breakdown],
                                list[ClientProgram]]:  # fmt: skip
        """The overview's tools, users, OAuth clients and client programs, from one grouping."""
        found = self.grouped(_OVERVIEW_KEY)
        users = _by(found, lambda v: v[2])
        User = get_user_model()
        names = dict(
            User._default_manager.filter(pk__in=list(users)).values_list("pk", User.USERNAME_FIELD)
        )
        # By username, as the call log's join names them (a deleted user's: "None").
        by_name = _by({(str(names.get(pk)),): m for pk, m in users.items()}, lambda v: v[0])
        return (
            _latency_rows(_by(found, _tool))[:STATS_GROUPS],
            [Breakdown(name, m.calls, m.errors) for name, m in _top(by_name, BREAKDOWN_TOP)],
            [
                Breakdown(str(name), m.calls, m.errors)
                for name, m in _top(_by(found, lambda v: v[3] or None), BREAKDOWN_TOP)
            ],
            [
                ClientProgram(name, version, m.calls, m.errors, bool(name) and not m.declared)
                for (name, version), m in _top(_by(found, lambda v: (v[4], v[5])), BREAKDOWN_TOP)
            ],
        )

    def stats(self, since: datetime, until: datetime) -> CallStats:
        kind = bucket_kind(until - since)
        totals: dict[datetime, list[int]] = defaultdict(lambda: [0, 0])
        errors = Sum("calls", filter=~Q(status__in=_OK_STATUSES))
        rolled = (
            self.rollups.annotate(bucket=Trunc("bucket_start", kind, tzinfo=UTC))
            .values("bucket")
            .annotate(total=Sum("calls"), errors=errors)
        )
        raw_errors = Count("id", filter=~Q(status__in=_OK_STATUSES))
        sources: list[Iterable[Mapping[str, Any]]] = [rolled]
        sources += [
            raw.annotate(bucket=Trunc("created_at", kind, tzinfo=UTC))
            .values("bucket")
            .annotate(total=Count("id"), errors=raw_errors)
            for raw in self.raw
        ]
        for rows in sources:
            for row in rows:
                found = totals[row["bucket"].astimezone(UTC)]
                found[0] += row["total"] or 0
                found[1] += row["errors"] or 0
        buckets = [Bucket(start, total, errs) for start, (total, errs) in sorted(totals.items())]
        groups = self.grouped(_STATS_KEY)
        return CallStats(
            since,
            until,
            kind,
            _fill(buckets, kind, since, until),
            _latency_rows(_by(groups, _tool)),
            _latency_rows(_by(groups, lambda v: v[2] or None)),
            _latency_rows(_by(groups, lambda v: v[3] or None)),
            estimated=True,
        )


# What the stats and the overview group by: each figure regroups these in Python.
_STATS_KEY = ("rpc_method", "target", "endpoint_slug", "client_name")
_OVERVIEW_KEY = (
    "rpc_method", "target", "principal_id", "client_id", "client_name", "client_version",
)  # fmt: skip


def _tool(values: tuple[Any, ...]) -> Any:
    """The tool of a ``tools/call`` group (keys starting with method and target), else None."""
    return values[1] if values[0] == "tools/call" and values[1] else None


def _by(found: Mapping[Any, Measures], name: Callable[[Any], Any]) -> dict[Any, Measures]:
    """``found`` added up by ``name`` of each key (None: left out)."""
    groups: dict[Any, Measures] = {}
    for values, measures in found.items():
        key = name(values)
        if key is not None:
            groups.setdefault(key, Measures()).add(measures)
    return groups


def _top(groups: Mapping[Any, Measures], top: int) -> list[tuple[Any, Measures]]:
    """The ``top`` groups with the most calls (ties by name, so the page does not shuffle)."""
    return sorted(groups.items(), key=lambda item: (-item[1].calls, str(item[0])))[:top]


def _latency_rows(groups: Mapping[Any, Measures]) -> list[LatencyRow]:
    return [
        LatencyRow(name, m.calls, m.errors, *(m.percentile(p) for p in PERCENTILES))
        for name, m in _top(groups, STATS_GROUPS)
    ]


def _rollup_search(filters: CallFilter) -> QuerySet[CallLogRollup]:
    """The rollup rows matching the filters ``_Window.of`` lets through, as call_log_search
    narrows call-log rows."""
    return _narrowed(CallLogRollup.objects.order_by(), filters)


Logged = TypeVar("Logged", CallLog, CallLogRollup)


def _narrowed(qs: QuerySet[Logged], filters: CallFilter) -> QuerySet[Logged]:
    """``qs`` narrowed by the filters a call-log row and a rollup row both have columns for
    (the same names on both models)."""
    if filters.endpoints is not None:
        qs = qs.filter(calls_of(filters.endpoints, filters.teams))
    if filters.endpoint is not None:
        qs = qs.filter(endpoint_id=filters.endpoint.pk)
    if filters.tool:
        qs = qs.filter(target=filters.tool)
    if filters.method:
        qs = qs.filter(rpc_method=filters.method)
    if filters.status == ANY_FAILURE:
        qs = qs.filter(status__in=FAILURE_STATUSES)
    elif filters.status:
        qs = qs.filter(status=filters.status)
    if filters.era:
        qs = qs.filter(era=filters.era)
    if filters.user:
        qs = qs.filter(principal__username=filters.user)
    if filters.client:
        # The OAuth client by id or by its registered name (one subquery, no round trip).
        qs = qs.filter(
            Q(client_id=filters.client) | Q(client_id__in=client_ids_named(filters.client))
        )
    if filters.client_name:
        qs = qs.filter(client_name=filters.client_name)
    if filters.client_version:
        qs = qs.filter(client_version=filters.client_version)
    return qs
