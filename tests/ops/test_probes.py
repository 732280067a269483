"""``/healthz`` and ``/readyz`` in-process: open to any Host, JSON naming what failed.

Outages of real processes are in tests/faults/test_readiness.py. These tests point REDIS_URL
at a Redis database of their own, so workers other tests run never count as heartbeats here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from asgiref.sync import sync_to_async
from django.conf import settings
from prometheus_client import REGISTRY

from mcp_app.models import Tool
from mcp_app.ops.heartbeat import heartbeat_once, worker_heartbeats_key
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from tests.support.inprocess import acall, encode_headers

# A pod's address as a kubelet sends it: not in ALLOWED_HOSTS.
PROBE_HEADERS = encode_headers({"host": "10.1.2.3:8000"})


@pytest.fixture
def own_redis(settings: Any) -> Iterator[redis.Redis]:
    if not settings.REDIS_URL:
        pytest.skip("needs REDIS_URL")
    settings.REDIS_URL = settings.REDIS_URL.rsplit("/", 1)[0] + "/3"
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(worker_heartbeats_key())
    yield client
    client.delete(worker_heartbeats_key())
    client.close()


async def test_healthz_answers_any_host_without_checking_dependencies() -> None:
    answer = await acall("/healthz", method="GET", headers=PROBE_HEADERS)
    assert (answer.status, answer.json()) == (200, {"status": "alive"})
    assert answer.header("cache-control") == "no-store"


@pytest.mark.django_db(transaction=True)
async def test_readyz_needs_no_worker_when_every_tool_is_inline(own_redis: redis.Redis) -> None:
    answer = await acall("/readyz", method="GET", headers=PROBE_HEADERS)
    assert answer.status == 200
    assert answer.json() == {
        "status": "ready",
        "failed": [],
        "checks": {
            "database": {"ok": True, "detail": "ok", "required": True},
            "redis": {"ok": True, "detail": "ok", "required": True},
        },
    }


@sync_to_async
def make_background_tool() -> None:
    endpoint = endpoint_create(slug="bg", auth_mode="public")
    tool_create(
        name="countdown",
        kind="python",
        config={"function": "countdown"},
        execution_mode=Tool.Execution.BACKGROUND,
        endpoints=[endpoint],
    )


def gauge(check: str) -> float | None:
    return REGISTRY.get_sample_value("mcphost_readiness_check", {"check": check})


@pytest.mark.django_db(transaction=True)
async def test_readyz_without_a_worker_heartbeat_is_degraded_but_ready(
    own_redis: redis.Redis,
) -> None:
    """No worker stops background calls only: the process still serves (issue #25)."""
    await make_background_tool()
    answer = await acall("/readyz", method="GET", headers=PROBE_HEADERS)
    stale = f"{settings.WORKER_HEARTBEAT_STALE_SECONDS:g}"
    assert answer.status == 200
    assert answer.json() == {
        "status": "degraded",
        "failed": ["workers"],
        "checks": {
            "database": {"ok": True, "detail": "ok", "required": True},
            "redis": {"ok": True, "detail": "ok", "required": True},
            "workers": {
                "ok": False,
                "detail": f"no worker heartbeat within {stale} s",
                "required": False,
            },
        },
    }
    assert (gauge("workers"), gauge("database")) == (0, 1)

    heartbeat_once(own_redis, "probe-test@localhost")
    answer = await acall("/readyz", method="GET", headers=PROBE_HEADERS)
    assert (answer.status, answer.json()["status"], answer.json()["failed"]) == (200, "ready", [])
    assert gauge("workers") == 1


@pytest.mark.django_db(transaction=True)
async def test_readyz_needs_a_worker_heartbeat_when_required(
    own_redis: redis.Redis, settings: Any
) -> None:
    settings.MCP_READY_REQUIRES_WORKER = True
    await make_background_tool()
    answer = await acall("/readyz", method="GET", headers=PROBE_HEADERS)
    assert (answer.status, answer.json()["status"], answer.json()["failed"]) == (
        503,
        "unavailable",
        ["workers"],
    )
    assert answer.json()["checks"]["workers"]["required"] is True

    heartbeat_once(own_redis, "probe-test@localhost")
    answer = await acall("/readyz", method="GET", headers=PROBE_HEADERS)
    assert (answer.status, answer.json()["checks"]["workers"]) == (
        200,
        {"ok": True, "detail": "1 alive", "required": True},
    )


async def test_probes_refuse_other_methods() -> None:
    answer = await acall("/readyz", method="POST", headers=PROBE_HEADERS)
    assert (answer.status, answer.header("allow")) == (405, "GET, HEAD")
