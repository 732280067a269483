"""PostgreSQL restarted (``pg_ctl stop -m fast``, then start) under web processes and a worker.

Issue #13, item 1: background calls must work again as soon as the database is back, in every
web process and every worker pool child, and a call that ran through the outage must end
with its result, not be reaped as "worker crashed".
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx

from mcpsite.celery import app
from tests.faults.conftest import FaultStack, WebProcess, run_manage
from tests.faults.wire import (
    MODERN_META,
    final_message,
    modern_headers,
    session_headers,
    tool_call,
)
from tests.support.raw_mcp import open_session

# Longer than MCP_BACKGROUND_LOST_AFTER_SECONDS (3 s in the tests): no heartbeat gets through.
OUTAGE_SECONDS = 4.0


async def countdown(client: httpx.AsyncClient, url: str, request_id: Any, seconds: int) -> Any:
    response = await client.post(
        url,
        headers=modern_headers("tools/call", "countdown"),
        json=tool_call(request_id, "countdown", {"seconds": seconds}, **MODERN_META),
    )
    return await final_message(response)


def assert_counted(message: dict[str, Any], seconds: int) -> None:
    assert "result" in message, message
    assert message["result"].get("structuredContent") == {"counted": seconds}, message


async def test_background_calls_survive_a_database_restart(
    fault_stack: FaultStack, web_process: Callable[[str], WebProcess]
) -> None:
    webs = [web_process("daphne"), web_process("uvicorn")]
    async with httpx.AsyncClient(timeout=60) as client:
        # Every web process and both pool children hold a database connection now.
        async with asyncio.timeout(30):
            before = await asyncio.gather(
                *(countdown(client, web.url, n, 1) for n, web in enumerate(webs * 2))
            )
        for message in before:
            assert_counted(message, 1)
        async with asyncio.timeout(60):
            through = asyncio.create_task(countdown(client, webs[0].url, "through", 8))
            # The call is running on the worker before the database goes away.
            while not any(status == "working" for _, status, _ in fault_stack.call_rows()):
                await asyncio.sleep(0.05)
            await asyncio.to_thread(fault_stack.restart_postgres, OUTAGE_SECONDS)
            # The call that ran through the outage ends with its result.
            assert_counted(await through, 8)
        async with asyncio.timeout(30):
            after = await asyncio.gather(
                *(countdown(client, web.url, 10 + n, 1) for n, web in enumerate(webs * 2))
            )
        for message in after:
            assert_counted(message, 1)
    assert all(status == "completed" for _, status, _ in fault_stack.call_rows())


QUEUED_CALL = """
from mcp_app.models import BackgroundCall, Endpoint, Tool
call = BackgroundCall.objects.create(
    endpoint=Endpoint.objects.get(slug="faults"), tool=Tool.objects.get(name="countdown"),
    tool_name="countdown", arguments={"seconds": 1}, protocol_version="2026-07-28",
    soft_time_limit=60, hard_time_limit=90,
)
print(call.id)
"""


async def test_a_job_taken_while_the_database_is_down_runs_once_it_is_back(
    fault_stack: FaultStack,
) -> None:
    call_id = run_manage(fault_stack.env, "shell", "--no-imports", "-c", QUEUED_CALL).strip()
    fault_stack.postgres.stop("fast")
    try:
        with app.connection_for_write(fault_stack.redis.url) as connection:
            app.send_task("mcp_app.run_background_call", args=[call_id], connection=connection)
        async with asyncio.timeout(20):
            # The worker took the job and could not claim it: it is retried, not dropped.
            while "Retry in" not in fault_stack.worker.log():
                await asyncio.sleep(0.1)
    finally:
        fault_stack.postgres.start()
    async with asyncio.timeout(20):
        while fault_stack.postgres.query(
            "SELECT status FROM mcp_app_backgroundcall WHERE id = %s", call_id
        ) != [("completed",)]:
            await asyncio.sleep(0.1)


async def test_a_background_call_during_a_database_outage_gets_503_with_its_id(
    fault_stack: FaultStack, web_process: Callable[[str], WebProcess]
) -> None:
    """The endpoint and session come from memory, the call's row cannot be written: 503."""
    web = web_process("uvicorn")
    async with httpx.AsyncClient(timeout=30) as client:
        session_id = await open_session(client, web.url)
        # The process holds the endpoint and the session now: the outage hits the row's INSERT.
        for headers, meta in ((modern_headers("tools/call", "echo"), MODERN_META), (None, {})):
            warm = await client.post(
                web.url,
                headers=headers or session_headers(session_id),
                json=tool_call("warm", "echo", {"message": "hi"}, **meta),
            )
            assert "result" in await final_message(warm)
        fault_stack.postgres.stop("fast")
        try:
            async with asyncio.timeout(20):
                modern = await client.post(
                    web.url,
                    headers=modern_headers("tools/call", "countdown"),
                    json=tool_call(41, "countdown", {"seconds": 1}, **MODERN_META),
                )
                legacy = await client.post(
                    web.url,
                    headers=session_headers(session_id),
                    json=tool_call(42, "countdown", {"seconds": 1}),
                )
        finally:
            fault_stack.postgres.start()
    for response, request_id in ((modern, 41), (legacy, 42)):
        assert response.status_code == 503, response.text
        assert int(response.headers["retry-after"]) > 0
        body = await final_message(response)
        assert body["id"] == request_id
        assert body["error"]["message"] == "Service temporarily unavailable", body
