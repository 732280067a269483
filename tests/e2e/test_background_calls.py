"""Background tool calls on a real Celery worker process, followed by a real Daphne process.

Everything is real: the web server and the worker are separate processes on the test
PostgreSQL and Redis (broker and channel layer); clients are the official SDK and raw HTTP.
Covered: progress from the worker in order, logs, asking the client from the worker in both
eras, cancellation (legacy notification; 2026 closed stream), soft and hard time limits, a
worker killed mid-call, no worker at all, and a legacy client that leaves and resumes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterator
from typing import Any

import httpx
import mcp.types as types
import pytest
from mcp import Client

from mcp_app.models import BackgroundCall, CallLog, Tool
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from tests.support.live import asgi_server, flush_database
from tests.support.raw_mcp import JSON_HEADERS, open_session, sse_events, sse_messages
from tests.support.waiting import await_until
from tests.support.worker import BACKGROUND_ENV, WorkerProcess, celery_worker

pytestmark = pytest.mark.django_db

SLUG = "bg"
TOOL_MODULES = {"MCP_PYTHON_TOOL_MODULES": "mcp_app.builtin_tools,tests.support.long_tools"}
ENV = {**BACKGROUND_ENV, **TOOL_MODULES}
MODES = ["legacy", "2026-07-28"]


@pytest.fixture(scope="module")
def bg_server(django_db_setup: None, django_db_blocker: Any) -> Iterator[tuple[str, WorkerProcess]]:
    with django_db_blocker.unblock():
        endpoint = endpoint_create(slug=SLUG, auth_mode="public")
        background = {"execution_mode": Tool.Execution.BACKGROUND, "endpoints": [endpoint]}
        for name, function, limits in [
            ("sleepy", "sleep_with_progress", {}),
            ("countdown", "countdown", {}),
            ("ask_confirmation", "ask_confirmation", {}),
            ("ask_value", "ask_value", {}),
            ("quick_limit", "sleep_with_progress", {"soft_time_limit": 0.5}),
        ]:
            tool_create(
                name=name, kind="python", config={"function": function}, **background, **limits
            )
        # Not validated against the test process's registry: only server and worker load it.
        blocker = Tool.objects.create(
            name="blocker",
            description="Blocks its event loop.",
            kind=Tool.Kind.PYTHON,
            config={"function": "test_block_loop"},
            execution_mode=Tool.Execution.BACKGROUND,
            soft_time_limit=0.3,
            hard_time_limit=1.0,
        )
        blocker.endpoints.add(endpoint)
    with celery_worker(extra_env=TOOL_MODULES) as worker, asgi_server("daphne", ENV) as server:
        yield f"{server}/mcp/{SLUG}", worker
    flush_database(django_db_blocker)


@pytest.fixture(scope="module")
def bg_url(bg_server: tuple[str, WorkerProcess]) -> str:
    return bg_server[0]


@pytest.fixture(scope="module")
def bg_worker(bg_server: tuple[str, WorkerProcess]) -> WorkerProcess:
    return bg_server[1]


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


async def _latest_call(tool_name: str) -> BackgroundCall:
    return await BackgroundCall.objects.filter(tool_name=tool_name).order_by("-created_at").afirst()


async def _wait_for(predicate: Any) -> Any:
    return await await_until(predicate, "the background call's state")


async def test_progress_from_the_worker_reaches_the_sdk_client_in_order(bg_url, mode):
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with asyncio.timeout(30), Client(bg_url, mode=mode) as client:
        result = await client.call_tool(
            "sleepy", {"seconds": 0.5, "steps": 5}, progress_callback=on_progress
        )
    assert not result.is_error, result.content
    assert result.content[0].text == "Slept 0.5 seconds in 5 steps."
    assert [p for p, _, _ in seen] == [1, 2, 3, 4, 5]
    assert all(total == 5 for _, total, _ in seen)
    call = await _latest_call("sleepy")
    assert call.status == BackgroundCall.Status.COMPLETED
    assert call.worker.startswith("test-") and call.worker_pid != os.getpid()
    assert call.last_progress["progress"] == 5


async def test_structured_output_from_the_worker_is_checked_and_kept(bg_url, mode):
    async with asyncio.timeout(30), Client(bg_url, mode=mode) as client:
        result = await client.call_tool("countdown", {"seconds": 1})
    assert result.structured_content == {"counted": 1}


async def test_the_worker_asks_the_client_in_both_eras(bg_url, mode):
    async def accept(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with (
        asyncio.timeout(30),
        Client(bg_url, mode=mode, elicitation_callback=accept) as client,
    ):
        result = await client.call_tool("ask_confirmation", {"question": "Ship it?"})
    assert result.structured_content == {"confirmed": True, "action": "accept"}


async def test_an_answer_with_nul_is_refused_not_lost_with_the_call(bg_url, mode):
    """The answer would reach the call's row (its result, or its inputResponses): U+0000."""

    async def accept(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"value": "a\x00b"})

    async with (
        asyncio.timeout(30),
        Client(bg_url, mode=mode, elicitation_callback=accept) as client,
    ):
        try:
            result = await client.call_tool("ask_value", {"question": "Which?"})
        except Exception as exc:  # a JSON-RPC error (2026-07-28: the retry's inputResponses)
            refused = str(exc)
        else:  # legacy: the worker's question failed, so the tool's result says why
            assert result.is_error, result
            refused = result.content[0].text
    assert "NUL" in refused, refused
    call = await _latest_call("ask_value")
    assert call is None or call.status != BackgroundCall.Status.WORKING


async def test_a_soft_time_limit_ends_the_call_with_an_error_result(bg_url, mode):
    async with asyncio.timeout(30), Client(bg_url, mode=mode) as client:
        result = await client.call_tool("quick_limit", {"seconds": 20, "steps": 2})
    assert result.is_error
    assert result.content[0].text == "Tool timed out after 0.5 s"
    call = await _latest_call("quick_limit")
    assert (call.status, call.outcome) == ("completed", "timed_out")
    log = await _wait_for(lambda: CallLog.objects.filter(task_id=call.id).afirst())
    assert (log.status, log.target) == (CallLog.Status.TIMED_OUT, "quick_limit")


async def test_a_tool_that_ignores_the_soft_limit_is_killed_at_the_hard_limit(bg_url):
    async with asyncio.timeout(30), Client(bg_url, mode="2026-07-28") as client:
        result = await client.call_tool("blocker", {"seconds": 60})
    assert result.is_error
    assert result.content[0].text == "Tool timed out after 1 s (hard limit)"
    call = await _latest_call("blocker")
    assert (call.status, call.outcome) == ("failed", "timed_out")


async def _legacy_headers(client: httpx.AsyncClient, url: str) -> dict[str, str]:
    session_id = await open_session(client, url, version="2025-11-25")
    return {**JSON_HEADERS, "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}


def _call(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": {"progressToken": "p"}},
    }


async def test_notifications_cancelled_stops_the_worker_and_sends_no_response(bg_url, bg_worker):
    finished_jobs = bg_worker.log().count(" succeeded in ")
    async with asyncio.timeout(30), httpx.AsyncClient(timeout=30) as client:
        headers = await _legacy_headers(client, bg_url)
        # Far longer than the test may take: only a stopped worker ends the job in time.
        body = _call(41, "countdown", {"seconds": 600})
        async with client.stream("POST", bg_url, json=body, headers=headers) as response:
            messages = sse_messages(response)
            first = await anext(messages)
            assert first["method"] == "notifications/progress"
            cancel = {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 41, "reason": "changed my mind"},
            }
            answer = await client.post(bg_url, json=cancel, headers=headers)
            assert answer.status_code == 202
            rest = [message async for message in messages]
    assert all("id" not in message for message in rest), "a cancelled request got a response"
    call = await _latest_call("countdown")
    assert call.status == BackgroundCall.Status.CANCELLED

    async def job_ended() -> bool:
        return bg_worker.log().count(" succeeded in ") > finished_jobs

    await _wait_for(job_ended)
    log = await _wait_for(
        lambda: CallLog.objects.filter(rpc_id="41", rpc_method="tools/call").afirst()
    )
    assert log.status == CallLog.Status.CANCELLED


async def test_closing_a_2026_stream_cancels_the_call(bg_url):
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "progressToken": "p",
    }
    body = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": "countdown", "arguments": {"seconds": 30}, "_meta": meta},
    }
    headers = {
        **JSON_HEADERS,
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "countdown",
    }
    async with asyncio.timeout(30), httpx.AsyncClient(timeout=30) as client:
        async with client.stream("POST", bg_url, json=body, headers=headers) as response:
            assert (await anext(sse_messages(response)))["method"] == "notifications/progress"
        # Leaving the block closed the connection: the 2026 way to cancel.

        async def cancelled() -> bool:
            call = await _latest_call("countdown")
            return call.status == BackgroundCall.Status.CANCELLED

        await _wait_for(cancelled)


async def test_a_legacy_client_that_leaves_resumes_and_gets_the_result(bg_url):
    async with asyncio.timeout(30), httpx.AsyncClient(timeout=30) as client:
        headers = await _legacy_headers(client, bg_url)
        body = _call(5, "sleepy", {"seconds": 1.5, "steps": 3})
        async with client.stream("POST", bg_url, json=body, headers=headers) as response:
            events = sse_events(response)
            priming = await anext(events)
            assert priming["data"] == ""
        # Gone before the first progress; the work goes on.
        call = await _wait_for(lambda: _latest_call("sleepy"))

        async def finished() -> bool:
            await call.arefresh_from_db()
            return call.status == BackgroundCall.Status.COMPLETED

        await _wait_for(finished)
        get_headers = {
            "accept": "text/event-stream",
            "mcp-session-id": headers["mcp-session-id"],
            "last-event-id": priming["id"],
        }
        async with client.stream("GET", bg_url, headers=get_headers) as response:
            replayed = [json.loads(e["data"]) async for e in sse_events(response)]
    assert [m["params"]["progress"] for m in replayed[:-1]] == [1, 2, 3]
    assert replayed[-1]["id"] == 5
    assert replayed[-1]["result"]["content"][0]["text"] == "Slept 1.5 seconds in 3 steps."


async def test_a_worker_killed_mid_call_gives_a_clear_error(bg_url, mode):
    async def killed() -> None:
        call = await _wait_for(_working_countdown)
        os.kill(call.worker_pid, signal.SIGKILL)

    async with asyncio.timeout(40), Client(bg_url, mode=mode) as client:
        killer = asyncio.create_task(killed())
        result = await client.call_tool("countdown", {"seconds": 30})
        await killer
    assert result.is_error
    assert "worker running this call stopped" in result.content[0].text
    call = await _latest_call("countdown")
    assert (call.status, call.outcome) == ("failed", "lost")


async def _working_countdown() -> BackgroundCall | None:
    return await BackgroundCall.objects.filter(
        tool_name="countdown", status=BackgroundCall.Status.WORKING, worker_pid__isnull=False
    ).afirst()


@pytest.fixture(scope="module")
def no_worker_url(bg_url: str) -> Iterator[str]:
    # A broker queue nobody consumes: Redis database 15 of the same server.
    broker = os.environ["REDIS_URL"].rsplit("/", 1)[0] + "/15"
    env = {**ENV, "CELERY_BROKER_URL": broker, "MCP_BACKGROUND_START_TIMEOUT_SECONDS": "1"}
    with asgi_server("daphne", env) as server:
        yield f"{server}/mcp/{SLUG}"


async def test_a_call_no_worker_starts_ends_with_a_clear_error(no_worker_url, mode):
    async with asyncio.timeout(30), Client(no_worker_url, mode=mode) as client:
        result = await client.call_tool("countdown", {"seconds": 1})
    assert result.is_error
    assert result.content[0].text.startswith("No worker started this call within 1 s")
    call = await _latest_call("countdown")
    assert (call.status, call.outcome) == ("failed", "not_started")
