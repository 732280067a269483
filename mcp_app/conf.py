"""Every MCP_* setting with its default, read lazily (never at import time).

Settings come from Django settings, which mcpsite/settings.py fills from MCP_* environment
variables (as strings); values are coerced to the type of their default here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver


@dataclass(frozen=True)
class McpConf:
    # Largest accepted POST body, in bytes (413 above it).
    MCP_MAX_BODY_BYTES: int = 4 * 1024 * 1024
    # Seconds a client may take to send a request body (408 after that).
    MCP_BODY_TIMEOUT_SECONDS: float = 30.0
    # Messages in one JSON-RPC batch (2025-03-26 sessions); a larger batch is refused whole
    # (400, -32600) before any of it runs.
    MCP_MAX_BATCH_MESSAGES: int = 100
    # Background tool calls one batch may start; the calls past it are answered with an
    # error (-32600) and not run, so one request cannot fill the workers.
    MCP_MAX_BATCH_BACKGROUND_CALLS: int = 1
    # Items per page of tools/list, resources/list, resources/templates/list, prompts/list.
    MCP_PAGE_SIZE: int = 100
    # A legacy session unused for this long is expired (404 afterwards).
    MCP_SESSION_IDLE_SECONDS: int = 30 * 60
    # Each web process keeps endpoints and legacy sessions in memory, dropped when another
    # process pushes a change over Redis; should a push be missed, an entry is re-read from the
    # database at most this many seconds after it was last read (the bound on staleness).
    MCP_CACHE_RECHECK_SECONDS: float = 5.0
    # A stream sends each kind of notifications/<kind>/list_changed at most once per this
    # many seconds: the first change at once, later ones within the window merged into one
    # sent when it closes, so a burst of edits is announced once and its last change is
    # never lost; 0 sends every change as it comes (services/notify.py).
    MCP_LIST_CHANGED_COALESCE_SECONDS: float = 0.25
    # A web process's cyclic garbage collector looks at its young objects every this many
    # allocations (Python's default: 700); 0 leaves the collector as Python sets it
    # (mcp_app/ops/collector.py).
    MCP_GC_YOUNG_THRESHOLD: int = 50_000
    # Seconds between SSE keep-alive comments on long-lived streams.
    MCP_SSE_KEEPALIVE_SECONDS: int = 15
    # Events of a 2025-11-25 stream stay replayable (GET + Last-Event-ID) this long, and at
    # most this many per stream.
    MCP_SSE_EVENT_TTL_SECONDS: int = 300
    MCP_SSE_MAX_EVENTS: int = 1000
    # A 2025-11-25 call still running after this many seconds has its POST stream closed
    # (after a retry hint) and the client resumes by polling; 0 keeps streams open.
    MCP_SSE_POLL_AFTER_SECONDS: float = 0.0
    # The retry hint (milliseconds) sent in a stream's priming event.
    MCP_SSE_RETRY_MS: int = 1000
    # Hosts always allowed in Host/Origin besides PUBLIC_BASE_URL's host (comma separated).
    MCP_ALLOWED_HOSTS: str = "127.0.0.1,localhost,[::1]"
    # Seconds a legacy call waits for the client to answer its question (elicitation,
    # sampling, roots) before it ends with an error result.
    MCP_CLIENT_REQUEST_TIMEOUT_SECONDS: float = 120.0
    # 2026-07-28 calls whose run is held open between rounds (an upstream MCP server's
    # question, services/continuations.py): seconds the run waits for the client's retry
    # (an MCP task's for tasks/update) before it is cancelled, and the most runs one process
    # holds waiting at once (tasks are bounded by their workers' slots instead).
    MCP_CONTINUATION_SECONDS: float = 120.0
    MCP_CONTINUATIONS_MAX: int = 1000
    # Seconds an inline tool call may run before it is stopped with an error result.
    MCP_INLINE_TOOL_TIMEOUT_SECONDS: float = 300.0
    # Largest resource blob an operator may upload, in bytes.
    MCP_MAX_RESOURCE_BYTES: int = 10 * 1024 * 1024
    # Largest icon an operator may upload (or link as a data: URI), in bytes: every list
    # names icons, so they stay small.
    MCP_MAX_ICON_BYTES: int = 100 * 1024
    # Catalog import (the API and ``mcp_import``): the largest document read, in bytes,
    # and the most values it may hold once YAML aliases are expanded (each use of an alias
    # counts its whole value again). Both are checked while reading, before any other work.
    MCP_CATALOG_MAX_BYTES: int = 32 * 1024 * 1024
    MCP_CATALOG_MAX_VALUES: int = 1_000_000
    # Template tool output cap, in characters.
    MCP_TEMPLATE_MAX_OUTPUT: int = 1024 * 1024
    # HTTP tools: seconds per attempt unless the tool sets "timeout".
    MCP_HTTP_TIMEOUT_SECONDS: float = 30.0
    # HTTP tools: largest response body read, in bytes (larger ones end with an error result).
    MCP_HTTP_MAX_RESPONSE_BYTES: int = 2 * 1024 * 1024
    # HTTP tools: redirects followed per request, each hop re-checked by the SSRF guard.
    MCP_HTTP_MAX_REDIRECTS: int = 5
    # HTTP tools: networks (CIDR, comma separated) reachable although not public, e.g. an
    # internal API range; every tool may then reach them.
    MCP_HTTP_ALLOWED_NETWORKS: str = ""
    # Background calls (services/background/). Soft limit when the tool sets none; the
    # hard limit (the worker process is killed) defaults to the soft one plus 30 s.
    MCP_BACKGROUND_SOFT_TIME_LIMIT_SECONDS: float = 600.0
    # A queued call no worker has started after this many seconds ends with an error.
    MCP_BACKGROUND_START_TIMEOUT_SECONDS: float = 60.0
    # A running call's worker refreshes its heartbeat this often (it also notices there that
    # the call was cancelled); a call whose heartbeat is older than LOST_AFTER is failed.
    MCP_BACKGROUND_HEARTBEAT_SECONDS: float = 1.0
    MCP_BACKGROUND_LOST_AFTER_SECONDS: float = 10.0
    # Finished plain (non-task) background calls are kept this long, then purged.
    MCP_BACKGROUND_KEEP_SECONDS: int = 24 * 3600
    # MCP tasks: the lifetime granted when the client asks for none or for more, and the
    # poll interval suggested to clients (milliseconds).
    MCP_TASK_DEFAULT_TTL_MS: int = 3600 * 1000
    MCP_TASK_MAX_TTL_MS: int = 24 * 3600 * 1000
    MCP_TASK_POLL_INTERVAL_MS: int = 1000
    # /readyz answers 503 while no Celery worker has a fresh heartbeat (and some tool may run
    # on one); by default that only degrades readiness: inline calls, lists and reads go on.
    MCP_READY_REQUIRES_WORKER: bool = False
    # Fernet keys (comma separated) for credential secrets: the first encrypts, all decrypt.
    # Empty: a key derived from SECRET_KEY (a system check warns).
    MCP_SECRET_KEYS: str = field(default="", repr=False)
    # stdio upstreams (mcp_app/bridge/, docs/operations.md "stdio upstreams"): the
    # administrator's allow-list (JSON, mcp_app/bridge/servers.py), where the web and worker
    # processes reach the bridge (empty: stdio upstreams fail with a clear error), and the
    # secret every request to it carries (empty: derived from SECRET_KEY).
    MCP_STDIO_SERVERS: str = ""
    MCP_STDIO_BRIDGE_URL: str = ""
    MCP_STDIO_BRIDGE_SECRET: str = field(default="", repr=False)
    # Rate limits (services/limits.py, docs/operations.md "Rate limits"): the Redis holding the
    # counts (empty: REDIS_URL), how long a check may wait for it before the limit's
    # on_redis_down choice applies, and how long a concurrency slot outlives a process that
    # died holding it.
    MCP_RATE_LIMIT_REDIS_URL: str = ""
    MCP_RATE_LIMIT_TIMEOUT_SECONDS: float = 0.25
    MCP_RATE_LIMIT_SLOT_SECONDS: int = 3600
    # The call log on PostgreSQL (services/calllog/partitions.py, docs/operations.md "Call-log
    # partitions"): days each partition of mcp_app_calllog covers (aligned on UTC midnights),
    # and how many days ahead the upkeep job and migrate create them.
    MCP_CALL_LOG_PARTITION_DAYS: int = 1
    MCP_CALL_LOG_PARTITIONS_AHEAD_DAYS: int = 7
    # A read replica (DATABASE_REPLICA_URL; services/replica.py, docs/operations.md "With a
    # read replica"): the call-log reads of the audit, the exports and the API go to the
    # primary instead while the replica is more than this many seconds behind or does not
    # answer; how far behind it is, is measured at most once per this many seconds per process.
    MCP_REPLICA_MAX_LAG_SECONDS: float = 30.0
    MCP_REPLICA_CHECK_SECONDS: float = 5.0


def redis_key(name: str) -> str:
    """``name`` as a Redis key or channel of this installation (``REDIS_NAMESPACE``).

    Installations sharing one Redis database must never read each other's keys or hear each
    other's channels; every key this product names goes through here.
    """
    return f"{settings.REDIS_NAMESPACE}:{name}"


def _coerce(value: object, default: object) -> object:
    if not isinstance(value, str) or isinstance(default, str):
        return value
    if isinstance(default, bool):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    if isinstance(default, int):
        return int(value)
    if isinstance(default, float):
        return float(value)
    return value


logger = logging.getLogger(__name__)

# Settings renamed (new name: old name). The old name is still read when the new one is not
# set, with a warning in the log each time the settings are read.
RENAMED = {
    "MCP_INLINE_TOOL_TIMEOUT_SECONDS": "MCP_INLINE_TOOL_TIMEOUT",
    "MCP_BACKGROUND_SOFT_TIME_LIMIT_SECONDS": "MCP_BACKGROUND_SOFT_TIME_LIMIT",
}


@lru_cache(maxsize=1)
def get_conf() -> McpConf:
    values: dict[str, Any] = {}  # settings are untyped; _coerce gives each its field's type
    for f in fields(McpConf):
        name = f.name
        if not hasattr(settings, name) and hasattr(settings, old := RENAMED.get(name, "")):
            logger.warning("The setting %s is deprecated: set %s instead.", old, name)
            name = old
        if hasattr(settings, name):
            values[f.name] = _coerce(getattr(settings, name), f.default)
    return McpConf(**values)


@dataclass(frozen=True)
class SiteConf:
    """The Django settings every MCP request reads, read once (``settings.X`` goes through
    a lazy proxy each time)."""

    SECRET_KEY: str = field(repr=False)
    PUBLIC_BASE_URL: str
    ALLOWED_HOSTS: tuple[str, ...]
    OAUTH_TOKEN_CACHE_SECONDS: float


_SITE_SETTINGS = frozenset(f.name for f in fields(SiteConf))


@lru_cache(maxsize=1)
def get_site() -> SiteConf:
    return SiteConf(
        SECRET_KEY=settings.SECRET_KEY,
        PUBLIC_BASE_URL=str(settings.PUBLIC_BASE_URL),
        ALLOWED_HOSTS=tuple(settings.ALLOWED_HOSTS),
        OAUTH_TOKEN_CACHE_SECONDS=float(getattr(settings, "OAUTH_TOKEN_CACHE_SECONDS", 10)),
    )


@receiver(setting_changed)
def _reset_conf(*, setting: str, **kwargs: object) -> None:
    if setting.startswith("MCP_"):
        get_conf.cache_clear()
    if setting in _SITE_SETTINGS:
        get_site.cache_clear()
