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

from mcp_app.models import Tool
from mcp_app.ops.heartbeat import heartbeat_once, worker_heartbeats_key
from mcp_app.services.catalog import endpoint_create, tool_create
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
            "database": {"ok": True, "detail": "ok"},
            "redis": {"ok": True, "detail": "ok"},
        },
    }


@pytest.mark.django_db(transaction=True)
async def test_readyz_needs_a_worker_heartbeat_when_a_tool_runs_on_workers(
    own_redis: redis.Redis,
) -> None:
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

    await make_background_tool()
    answer = await acall("/readyz", method="GET", headers=PROBE_HEADERS)
    stale = f"{settings.WORKER_HEARTBEAT_STALE_SECONDS:g}"
    assert (answer.status, answer.json()["failed"]) == (503, ["workers"])
    assert answer.json()["checks"]["workers"] == {
        "ok": False,
        "detail": f"no worker heartbeat within {stale} s",
    }

    heartbeat_once(own_redis, "probe-test@localhost")
    answer = await acall("/readyz", method="GET", headers=PROBE_HEADERS)
    assert (answer.status, answer.json()["checks"]["workers"]) == (
        200,
        {"ok": True, "detail": "1 alive"},
    )


async def test_probes_refuse_other_methods() -> None:
    answer = await acall("/readyz", method="POST", headers=PROBE_HEADERS)
    assert (answer.status, answer.header("allow")) == (405, "GET, HEAD")
