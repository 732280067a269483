"""The Celery worker outlives Redis dying under it (issue #13, the soak's finding).

The test runs its own Redis and worker (on the fault stack's PostgreSQL): the worker under
test may die, and the session's worker and Redis must stay usable for the other fault tests.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from mcpsite.celery import app
from scripts import services
from tests.faults.conftest import FaultStack, Redis, run_manage
from tests.support.worker import celery_worker

QUEUED_CALL = """
from mcp_app.models import BackgroundCall, Endpoint, Tool
call = BackgroundCall.objects.create(
    endpoint=Endpoint.objects.get(slug="faults"), tool=Tool.objects.get(name="countdown"),
    tool_name="countdown", arguments={{"seconds": {seconds}}}, protocol_version="2026-07-28",
    soft_time_limit=60, hard_time_limit=90,
)
print(call.id)
"""
FINAL = ("completed", "failed", "cancelled")


def _beating(stack: FaultStack, call_id: str) -> bool:
    """Whether the call's tool runs: a heartbeat came after the claim (so after its setup)."""
    rows = stack.postgres.query(
        "SELECT heartbeat_at > started_at + interval '0.1 second' FROM mcp_app_backgroundcall"
        " WHERE id = %s",
        call_id,
    )
    return bool(rows[0][0])


def _status(stack: FaultStack, call_id: str) -> str:
    rows = stack.postgres.query("SELECT status FROM mcp_app_backgroundcall WHERE id = %s", call_id)
    return rows[0][0]


async def _wait_status(stack: FaultStack, call_id: str, wanted: tuple[str, ...]) -> str:
    while (status := await asyncio.to_thread(_status, stack, call_id)) not in wanted:
        await asyncio.sleep(0.05)
    return status


def _enqueue(env: dict[str, str], broker: str, seconds: int) -> str:
    """A queued call's row, and its job on the broker, as the web process would make them."""
    call_id = run_manage(env, "shell", "--no-imports", "-c", QUEUED_CALL.format(seconds=seconds))
    with app.connection_for_write(broker) as connection:
        app.send_task("mcp_app.run_background_call", args=[call_id.strip()], connection=connection)
    return call_id.strip()


async def test_the_worker_survives_redis_killed_under_an_unacknowledged_job(
    fault_stack: FaultStack, private_redis: Redis
) -> None:
    redis = private_redis
    env = {**fault_stack.env, "REDIS_URL": redis.url, "CELERY_BROKER_URL": redis.url}
    with celery_worker(concurrency=2, extra_env=env) as worker:
        # acks_late: while the call runs, its job is delivered and not acknowledged, so
        # the worker holds it in its unacknowledged set when the broker disappears.
        running = await asyncio.to_thread(_enqueue, env, redis.url, 3)
        async with asyncio.timeout(20):
            while not await asyncio.to_thread(_beating, fault_stack, running):
                await asyncio.sleep(0.05)
        await asyncio.to_thread(redis.kill)
        try:
            # The consumer sees the loss and tears its connection down.
            async with asyncio.timeout(20):
                while "Connection to broker lost" not in worker.log():
                    await asyncio.sleep(0.05)
        finally:
            await asyncio.to_thread(redis.start)
        async with asyncio.timeout(30):
            await _wait_status(fault_stack, running, FINAL)
        # The worker reconnected and runs the next call.
        after = await asyncio.to_thread(_enqueue, env, redis.url, 1)
        async with asyncio.timeout(30):
            while (status := await asyncio.to_thread(_status, fault_stack, after)) not in FINAL:
                assert worker.process.poll() is None, worker.log()[-4000:]
                await asyncio.sleep(0.1)
        assert status == "completed", worker.log()[-4000:]
        assert worker.process.poll() is None, worker.log()[-4000:]
        assert "Unrecoverable error" not in worker.log(), worker.log()[-4000:]


async def test_a_call_taken_while_the_channel_layer_is_down_still_runs(
    fault_stack: FaultStack, private_redis: Redis, tmp_path: Path
) -> None:
    """The broker works, the channel layer's Redis does not (a restart caught mid-claim).

    The run cannot join its control group; it goes on without it (a cancellation still
    reaches it through the row), rather than ending with the row left "working".
    """
    layer = Redis(tmp_path / "layer", services.free_port())
    layer.workdir.mkdir()
    layer.start()
    broker = private_redis
    env = {**fault_stack.env, "REDIS_URL": layer.url, "CELERY_BROKER_URL": broker.url}
    try:
        with celery_worker(concurrency=1, extra_env=env) as worker:
            await asyncio.to_thread(layer.kill)
            call_id = await asyncio.to_thread(_enqueue, env, broker.url, 1)
            async with asyncio.timeout(20):
                status = await _wait_status(fault_stack, call_id, FINAL)
            assert status == "completed", worker.log()[-4000:]
    finally:
        layer.stop()
