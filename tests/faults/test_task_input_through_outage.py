"""An MCP task whose tool asks the client while PostgreSQL is down (issue #13, left open before).

The worker writes the task's move to ``input_required`` (and its heartbeats while it waits for
answers) to the call's row: a database outage at that moment must be waited out, as the
outcome write is, not end the run so that the task is later failed as "worker stopped".
The test runs its own Redis and worker, which load a tool that asks when the test says.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.faults.conftest import FaultStack, Redis, WebProcess, run_manage
from tests.faults.wire import MODERN, final_message
from tests.support.raw_mcp import JSON_HEADERS
from tests.support.worker import celery_worker

TOOL = "ask_when_told"
MODULES = "mcp_app.builtin_tools,tests.support.long_tools"
CREATE_TOOL = f"""
from mcp_app.models import Endpoint, Tool
from mcp_app.services.catalog_writes import tool_create
if not Tool.objects.filter(name={TOOL!r}).exists():
    tool_create(name={TOOL!r}, kind="python", config={{"function": "test_ask_when_told"}},
                execution_mode=Tool.Execution.BACKGROUND, task_support="optional",
                endpoints=[Endpoint.objects.get(slug="faults")])
"""
EXTENSION = "io.modelcontextprotocol/tasks"
# Longer than the tests' lost-worker bound (3 s): a run that ended would be failed meanwhile.
OUTAGE_SECONDS = 4.0


async def _modern(
    client: httpx.AsyncClient, url: str, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {},
            "extensions": {EXTENSION: {}},
        },
    }
    headers = {**JSON_HEADERS, "mcp-protocol-version": MODERN, "mcp-method": method}
    headers["mcp-name"] = str(params.get("taskId", params.get("name")))
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    response = await client.post(url, headers=headers, json=message)
    return await final_message(response)


async def _until_status(
    client: httpx.AsyncClient, url: str, task_id: str, *wanted: str
) -> dict[str, Any]:
    """Poll tasks/get (bounded) until the task is in one of ``wanted``; return its state."""
    async with asyncio.timeout(20):
        while True:
            body = await _modern(client, url, "tasks/get", {"taskId": task_id})
            # An error answer (a 503 just after the restart) is polled again.
            if body.get("result", {}).get("status") in wanted:
                return body["result"]
            await asyncio.sleep(0.05)


def _beating(stack: FaultStack, call_id: str) -> bool:
    rows = stack.postgres.query(
        "SELECT heartbeat_at > started_at + interval '0.1 second' FROM mcp_app_backgroundcall"
        " WHERE id = %s",
        call_id,
    )
    return bool(rows and rows[0][0])


async def test_a_task_asking_during_a_database_outage_waits_it_out(
    fault_stack: FaultStack,
    private_redis: Redis,
    web_process: Callable[..., WebProcess],
    tmp_path: Path,
) -> None:
    broker = {
        "REDIS_URL": private_redis.url,
        "CELERY_BROKER_URL": private_redis.url,
        "MCP_PYTHON_TOOL_MODULES": MODULES,
    }
    env = {**fault_stack.env, **broker}
    await asyncio.to_thread(run_manage, env, "shell", "--no-imports", "-c", CREATE_TOOL)
    trigger = tmp_path / "ask-now"
    web = web_process("uvicorn", env=broker)
    with celery_worker(extra_env=env) as worker:
        async with httpx.AsyncClient(timeout=30) as client:
            created = await _modern(
                client, web.url, "tools/call", {"name": TOOL, "arguments": {"path": str(trigger)}}
            )
            task_id = created["result"]["taskId"]
            await _until_status(client, web.url, task_id, "working")
            async with asyncio.timeout(20):
                # The tool runs (past the run's setup): a heartbeat came after the claim.
                while not await asyncio.to_thread(_beating, fault_stack, task_id):
                    await asyncio.sleep(0.05)
            fault_stack.postgres.stop("fast")
            try:
                trigger.touch()  # the tool asks now, while the row cannot be written
                await asyncio.sleep(OUTAGE_SECONDS)  # the outage itself, not a wait
            finally:
                fault_stack.postgres.start()
            final = ("completed", "failed", "cancelled")
            waiting = await _until_status(client, web.url, task_id, "input_required", *final)
            assert waiting["status"] == "input_required", (waiting, worker.log()[-3000:])
            answers = {"go_on": {"action": "accept", "content": {"confirm": True}}}
            await _modern(
                client, web.url, "tasks/update", {"taskId": task_id, "inputResponses": answers}
            )
            done = await _until_status(client, web.url, task_id, *final)
    assert done["status"] == "completed", done
    assert done["result"]["content"] == [{"type": "text", "text": "answered accept"}], done
