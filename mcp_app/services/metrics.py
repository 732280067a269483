"""Prometheus metrics of this process, fed from a few places only (docs/operations.md, "Metrics").

- MCP messages and tool-call latency come from the call-log records as ``CallRecorder``
  hands them to the writer (``services/calllog/``): the hot path adds no instrumentation of
  its own, and a count here is a row there.
- The call-log writer reports its queue depth, batch latency and dropped rows.
- The transport counts open SSE streams; the bearer check counts token-cache hits and misses.

Database- and Redis-wide values (live sessions, background calls by status, worker heartbeats)
are not kept per process: ``mcp_app/ops/metrics.py`` reads them when scraped.

With ``PROMETHEUS_MULTIPROC_DIR`` set (before the process starts), prometheus-client keeps
every value in a file there, and a scrape of any process adds up those of all processes.

Labels take only bounded values: an endpoint slug only when the endpoint exists, a tool name
only when the endpoint has that tool, a method only when MCP defines it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from mcp_app.protocol.methods import LEGACY_METHODS, MODERN_METHODS

_KNOWN_METHODS = (
    LEGACY_METHODS
    | MODERN_METHODS
    | {
        "notifications/initialized",
        "notifications/cancelled",
        "notifications/progress",
        "notifications/roots/list_changed",
    }
)

MCP_MESSAGES = Counter(
    "mcphost_mcp_messages",
    "MCP JSON-RPC messages served (one per call-log row: an HTTP request without a decodable "
    'message counts once, with method "").',
    ["endpoint", "method", "era", "status"],
)
# Tool-call latency: a histogram per endpoint (15 buckets, sum and count), and per tool only
# two counters (calls and their seconds: rate and mean duration). A histogram per tool made 17
# series of each tool, 170,000 for an endpoint of 10,000 tools.
TOOL_CALL_SECONDS = Histogram(
    "mcphost_tool_call_duration_seconds",
    "Duration of tools/call requests of known tools, from dispatch to answer, by endpoint.",
    ["endpoint"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
TOOL_CALLS = Counter(
    "mcphost_tool_calls",
    "tools/call requests of known tools answered, by tool.",
    ["endpoint", "tool"],
)
TOOL_CALL_TIME = Counter(
    "mcphost_tool_call_seconds",
    "Seconds spent answering tools/call requests of known tools, by tool (over "
    "mcphost_tool_calls_total: the mean duration).",
    ["endpoint", "tool"],
)
SSE_STREAMS = Gauge(
    "mcphost_sse_streams_open",
    "SSE response streams currently open.",
    multiprocess_mode="livesum",
)
HELD_CALLS = Gauge(
    "mcphost_held_calls",
    "2026-07-28 calls held open waiting for their client's next round (upstream questions).",
    multiprocess_mode="livesum",
)
TOKEN_CACHE = Counter(
    "mcphost_token_cache_lookups",
    "Bearer-token lookups by whether this process's cache answered (hit) or the database did.",
    ["result"],
)
TOKEN_CACHE_HIT = TOKEN_CACHE.labels("hit")
# Rate limits (services/limits.py): labelled by the limit's id (bounded by the rows an
# operator made) and the reason (rate, concurrency, quota, unavailable).
RATE_LIMIT_REJECTIONS = Counter(
    "mcphost_rate_limit_rejections",
    "Calls refused by a rate limit, concurrency cap or quota, by limit id and reason.",
    ["limit", "reason"],
)
RATE_LIMIT_REDIS_ERRORS = Counter(
    "mcphost_rate_limit_redis_errors",
    "Limit checks that could not reach Redis, by what the call got (open: let through; "
    "closed: refused).",
    ["result"],
)
TOKEN_CACHE_MISS = TOKEN_CACHE.labels("miss")
CALL_LOG_QUEUE = Gauge(
    "mcphost_call_log_queue_depth",
    "Call-log records waiting for the writer, as the writer last saw them.",
    multiprocess_mode="livesum",
)
CALL_LOG_BATCH_SECONDS = Histogram(
    "mcphost_call_log_batch_seconds",
    "Time the call-log writer took to write one batch.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10),
)
CALL_LOG_DROPPED = Counter(
    "mcphost_call_log_dropped_rows",
    "Call-log records dropped (queue full, or a batch the database refused).",
)
# Received minus written minus dropped is what a process still holds: its backlog, which an
# outage grows and a graceful stop (or a test's cleanup) waits to see reach zero.
CALL_LOG_RECEIVED = Counter(
    "mcphost_call_log_received_rows",
    "Call-log records handed to the writer.",
)
CALL_LOG_WRITTEN = Counter(
    "mcphost_call_log_written_rows",
    "Call-log records written to the database (reduced to their metadata or whole).",
)


# Labelled children by label values: ``labels()`` takes a lock and builds a key per call,
# which cost about as much again as the increment on the hot path. Bounded like the labels.
_message_counters: dict[tuple[str, str, str, str], Any] = {}
_endpoint_histograms: dict[str, Any] = {}
_tool_counters: dict[tuple[str, str], tuple[Any, Any]] = {}


def record_calls(rows: Iterable[tuple[dict[str, Any], bool]]) -> None:
    """Count the call-log rows of one request; each with whether its tool is known."""
    for row, tool_known in rows:
        endpoint = row["endpoint_slug"] if row["endpoint_id"] is not None else ""
        method = row["rpc_method"]
        if method not in _KNOWN_METHODS:
            method = "other" if method else ""
        key = (endpoint, method, row["era"], row["status"])
        counter = _message_counters.get(key)
        if counter is None:
            counter = _message_counters[key] = MCP_MESSAGES.labels(*key)
        counter.inc()
        if method == "tools/call" and tool_known and row["duration_ms"] is not None:
            seconds = row["duration_ms"] / 1000
            histogram = _endpoint_histograms.get(endpoint)
            if histogram is None:
                histogram = _endpoint_histograms[endpoint] = TOOL_CALL_SECONDS.labels(endpoint)
            histogram.observe(seconds)
            tool_key = (endpoint, row["target"])
            counters = _tool_counters.get(tool_key)
            if counters is None:
                counters = _tool_counters[tool_key] = (
                    TOOL_CALLS.labels(*tool_key),
                    TOOL_CALL_TIME.labels(*tool_key),
                )
            counters[0].inc()
            counters[1].inc(seconds)


# -- Degraded dependencies: throttles without Redis, readiness (docs/operations.md) --
API_THROTTLE_LOCAL = Counter(
    "mcphost_api_throttle_local_counts",
    "API throttle reads and writes kept in this process's memory because Redis failed.",
)
API_AUTH_THROTTLED = Counter(
    "mcphost_api_auth_throttled",
    "API requests refused (429) because their address failed to authenticate too often.",
)
READINESS_CHECK = Gauge(
    "mcphost_readiness_check",
    "1 when the check passed at the latest /readyz that ran it, else 0 (by check).",
    ["check"],
    multiprocess_mode="livemostrecent",
)

# -- Read replica (services/replica.py; docs/operations.md "With a read replica") --
REPLICA_READS = Counter(
    "mcphost_replica_reads",
    "Scopes of call-log reads (an audit page, an export, an API call-log request) by where "
    'they read: source "replica", or "primary" with the reason ("lagging", "unreachable").',
    ["source", "reason"],
)
REPLICA_LAG = Gauge(
    "mcphost_replica_lag_seconds",
    "How far behind the read replica was when last measured (-1: unknown or unreachable).",
    multiprocess_mode="livemostrecent",
)
