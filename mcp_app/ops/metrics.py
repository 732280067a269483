"""``/metrics``: Prometheus exposition of this process (or, in multiprocess mode, of every
web process), plus values read from the database and Redis at scrape time.

Access is restricted: a client whose address is in ``METRICS_ALLOWED_NETWORKS`` (loopback by
default), or one that sends ``Authorization: Bearer $METRICS_BEARER_TOKEN`` when that is set.
Everything else gets 403, before anything is collected.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hmac
import ipaddress
import logging
import os
import re
import time
from collections.abc import Iterator
from datetime import timedelta
from functools import lru_cache, partial
from typing import Any

import redis
from django.conf import settings
from django.db import close_old_connections
from django.db.models import Count
from django.utils import timezone
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    ProcessCollector,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mcp_app.conf import get_conf
from mcp_app.models import BackgroundCall, Session, Upstream
from mcp_app.ops.heartbeat import worker_heartbeats_key
from mcp_app.services import redis_sentinel

logger = logging.getLogger(__name__)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=4)
def _networks(spec: str) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(item.strip()) for item in spec.split(",") if item.strip())


def allowed(scope: dict[str, Any], headers: dict[bytes, bytes]) -> bool:
    """Whether this request may read the metrics (network or bearer token)."""
    token = settings.METRICS_BEARER_TOKEN
    if token:
        sent = headers.get(b"authorization", b"")
        if hmac.compare_digest(sent, b"Bearer " + token.encode()):
            return True
    client = scope.get("client")
    if not client:
        return False
    try:
        address = ipaddress.ip_address(client[0])
    except ValueError:
        return False
    return any(address in network for network in _networks(settings.METRICS_ALLOWED_NETWORKS))


# The database counts run on a thread of their own, waited on for READINESS_TIMEOUT_SECONDS:
# a frozen database leaves them out of the scrape instead of hanging it, and a count still
# hanging from an earlier scrape is waited on again rather than joined by another thread.
_database_thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mcp-metrics-db")
_database_counts: (
    concurrent.futures.Future[tuple[int, dict[str, int], list[tuple[str, str]]]] | None
) = None


def _count_shared_state() -> tuple[int, dict[str, int], list[tuple[str, str]]]:
    """Live legacy sessions, background calls not yet finished by status, and the probe
    state of each enabled upstream."""
    close_old_connections()
    try:
        idle = timedelta(seconds=get_conf().MCP_SESSION_IDLE_SECONDS)
        live = Session.objects.filter(
            closed_at__isnull=True, last_seen_at__gte=timezone.now() - idle
        ).count()
        counts = dict(
            BackgroundCall.objects.filter(status__in=BackgroundCall.ACTIVE)
            .values_list("status")
            .annotate(n=Count("id"))
        )
        upstreams = list(
            Upstream.objects.filter(enabled=True)
            .order_by("name")
            .values_list("name", "probe_state")
        )
    finally:
        close_old_connections()
    return live, counts, upstreams


class SharedStateCollector(Collector):
    """What no single process holds: live sessions, background calls, worker heartbeats."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        global _database_counts
        if _database_counts is None or _database_counts.done():
            _database_counts = _database_thread.submit(_count_shared_state)
        timeout = settings.READINESS_TIMEOUT_SECONDS
        try:
            live, counts, upstreams = _database_counts.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            logger.warning(
                "Metrics: no database answer within %g s; sessions, calls, upstreams left out",
                timeout,
            )
        except Exception:
            # A scrape during an outage still returns every per-process metric.
            logger.warning("Metrics: database unavailable; sessions, calls, upstreams left out")
        else:
            yield GaugeMetricFamily(
                "mcphost_sessions_live", "Legacy MCP sessions open and not idle.", value=live
            )
            calls = GaugeMetricFamily(
                "mcphost_background_calls",
                "Background tool calls not yet finished, by status.",
                labels=["status"],
            )
            for status in BackgroundCall.ACTIVE:
                calls.add_metric([str(status)], counts.get(status, 0))
            yield calls
            # One series per upstream: its current state is the label, the value always 1.
            states = GaugeMetricFamily(
                "mcphost_upstream_state",
                "Each enabled upstream MCP server, labelled with its state at its last probe "
                "(unknown, active, degraded, offline).",
                labels=["upstream", "state"],
            )
            for name, state in upstreams:
                states.add_metric([name, state], 1)
            yield states
        if settings.REDIS_URL:
            yield from self._workers()

    def _workers(self) -> Iterator[GaugeMetricFamily]:
        timeout = settings.READINESS_TIMEOUT_SECONDS
        client = redis_sentinel.sync_client(
            settings.REDIS_URL, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        try:
            since = time.time() - settings.WORKER_HEARTBEAT_STALE_SECONDS
            alive = client.zcount(worker_heartbeats_key(), since, "+inf")
        except redis.RedisError:
            logger.warning("Metrics: Redis unavailable; worker heartbeats left out")
            return
        finally:
            client.close()
        yield GaugeMetricFamily(
            "mcphost_workers_alive",
            "Celery workers whose heartbeat is fresh (WORKER_HEARTBEAT_STALE_SECONDS).",
            value=alive,
        )


# The values file of one process in PROMETHEUS_MULTIPROC_DIR ("counter_1234.db",
# "gauge_livesum_1234.db"): the pid of every process that keeps metrics there.
_PID_FILE = re.compile(r"_(\d+)\.db$")


class ProcessesCollector(Collector):
    """``process_*`` (memory, CPU, open and max fds, start time) of every running process of
    PROMETHEUS_MULTIPROC_DIR, labelled ``pid``, read from /proc when scraped.

    prometheus-client's ProcessCollector reports only the process it runs in, so a scrape in
    multiprocess mode had none: the processes sharing the directory are siblings on this host
    (uvicorn's workers), whose /proc entries any of them may read.
    """

    def __init__(self, directory: str) -> None:
        self._directory = directory

    def collect(self) -> Iterator[Metric]:
        try:
            names = os.listdir(self._directory)
        except OSError:
            return
        pids = sorted({int(found[1]) for name in names if (found := _PID_FILE.search(name))})
        families: dict[str, Metric] = {}
        for pid in pids:
            if not os.path.isdir(f"/proc/{pid}"):
                continue  # exited: its files stay until the directory is emptied
            for family in ProcessCollector(pid=partial(int, pid), registry=None).collect():
                merged = families.get(family.name)
                if merged is None:
                    merged = families[family.name] = Metric(
                        family.name, family.documentation, family.type, family.unit
                    )
                for sample in family.samples:
                    merged.add_sample(sample.name, {**sample.labels, "pid": str(pid)}, sample.value)
        yield from families.values()


def _exposition() -> bytes:
    shared = CollectorRegistry(auto_describe=False)
    shared.register(SharedStateCollector())
    if directory := os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # Every process's values, added up (live gauges: of the processes still running).
        processes = CollectorRegistry()
        multiprocess.MultiProcessCollector(processes)
        shared.register(ProcessesCollector(directory))
        return generate_latest(processes) + generate_latest(shared)
    return generate_latest(REGISTRY) + generate_latest(shared)


# Scrapes collect on one thread of their own: its database connection is kept between
# scrapes, and overlapping scrapes queue instead of holding several connections.
_collector_thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mcp-metrics")


async def metrics_response() -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Collect on a thread (the database and Redis are read); answer status, headers, body."""
    body = await asyncio.get_running_loop().run_in_executor(_collector_thread, _exposition)
    return 200, [(b"content-type", CONTENT_TYPE_LATEST.encode())], body
