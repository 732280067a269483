"""MCP tasks end to end: a real Daphne process, a real Celery worker, raw JSON-RPC over HTTP.

The official SDK has no tasks API (neither the 2025-11-25 core nor the 2026-07-28 extension),
so the conversation is spoken on the wire. Both eras: a task is created, followed to its end,
cancelled while it runs, refused when the tool's task support says so, hidden from other
sessions and other principals (OAuth), dropped after its lifetime; 2025-11-25 lists tasks page
by page; 2026-07-28 answers a task's questions with tasks/update (also one at a time) and
settles a tool's questions before the task exists.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from mcp_app.models import BackgroundCall, Tool
from mcp_app.protocol import errors
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from tests.support.live import asgi_server, flush_database
from tests.support.oauth import issue_token
from tests.support.raw_mcp import JSON_HEADERS, open_session, sse_messages
from tests.support.worker import BACKGROUND_ENV, celery_worker

pytestmark = pytest.mark.django_db

SLUG = "tasks"
OAUTH_SLUG = "tasks-oauth"
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
EXTENSION = "io.modelcontextprotocol/tasks"
TOOL_MODULES = {"MCP_PYTHON_TOOL_MODULES": "mcp_app.builtin_tools,conformance.tools"}
# Small pages, so three tasks make two pages of tasks/list.
ENV = {**BACKGROUND_ENV, **TOOL_MODULES, "MCP_PAGE_SIZE": "2", "MCP_TASK_MAX_TTL_MS": "600000"}
WAIT_SECONDS = 15.0


@pytest.fixture(scope="module")
def server(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    modules = TOOL_MODULES["MCP_PYTHON_TOOL_MODULES"]
    with django_db_blocker.unblock(), override_settings(MCP_PYTHON_TOOL_MODULES=modules):
        endpoint = endpoint_create(slug=SLUG, auth_mode="public")
        secured = endpoint_create(slug=OAUTH_SLUG, auth_mode="oauth")
        for name, function, execution, support in [
            ("compute", "conformance_slow_compute", "background", "optional"),
            ("must_task", "conformance_failing_job", "background", "required"),
            ("crash", "conformance_protocol_error_job", "background", "optional"),
            ("confirm", "conformance_confirm_delete", "background", "optional"),
            ("ask_then_task", "conformance_greet_then_task", "auto", "required"),
            ("two_questions", "conformance_multi_input", "background", "optional"),
            ("inline_compute", "conformance_slow_compute", "inline", "optional"),
        ]:
            tool_create(
                name=name,
                kind=Tool.Kind.PYTHON,
                config={"function": function},
                execution_mode=execution,
                task_support=support,
                endpoints=[endpoint, secured],
            )
    with celery_worker(extra_env=TOOL_MODULES), asgi_server("daphne", ENV) as base:
        yield base
    flush_database(django_db_blocker)


@pytest.fixture(scope="module")
def url(server: str) -> str:
    return f"{server}/mcp/{SLUG}"


@pytest.fixture(scope="module")
def tokens(server: str, django_db_blocker: Any) -> dict[str, str]:
    """Bearer tokens of two users for the OAuth endpoint (issued straight into the database)."""
    with django_db_blocker.unblock():
        return {
            name: issue_token(
                User.objects.create_user(name), resource=[f"{server}/mcp/{OAUTH_SLUG}"]
            )
            for name in ("alice", "bob")
        }


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=WAIT_SECONDS) as client:
        yield client


async def _body(response: httpx.Response, request_id: Any) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        async for message in sse_messages(response):
            if message.get("id") == request_id:
                return message
        raise AssertionError("the stream ended without the response")
    return json.loads(await response.aread())


class Legacy:
    """A 2025-11-25 session spoken in raw JSON-RPC."""

    def __init__(self, http: httpx.AsyncClient, url: str, session_id: str) -> None:
        self.http, self.url, self.session_id = http, url, session_id
        self.next_id = 1

    @classmethod
    async def open(cls, http: httpx.AsyncClient, url: str) -> Legacy:
        return cls(http, url, await open_session(http, url, version=LEGACY))

    async def send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        headers = {
            **JSON_HEADERS,
            "mcp-session-id": self.session_id,
            "mcp-protocol-version": LEGACY,
        }
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        async with self.http.stream("POST", self.url, headers=headers, json=message) as response:
            assert response.status_code == 200, await response.aread()
            return await _body(response, self.next_id)

    async def result(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = await self.send(method, params)
        assert "result" in body, body
        return body["result"]

    async def error(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = await self.send(method, params)
        assert "error" in body, body
        return body["error"]


async def modern(
    http: httpx.AsyncClient,
    url: str,
    method: str,
    params: dict[str, Any],
    *,
    extension: bool = True,
    name: str | None = None,
    token: str | None = None,
) -> tuple[int, dict[str, Any]]:
    """Send one 2026-07-28 request; return the HTTP status and the JSON-RPC body."""
    capabilities: dict[str, Any] = {"elicitation": {}}
    if extension:
        capabilities["extensions"] = {EXTENSION: {}}
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    headers = {**JSON_HEADERS, "mcp-protocol-version": MODERN, "mcp-method": method}
    routed = name if name is not None else params.get("taskId", params.get("name"))
    if routed is not None:
        headers["mcp-name"] = routed
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    async with http.stream("POST", url, headers=headers, json=message) as response:
        return response.status_code, await _body(response, 1)


async def until(check: Callable[[], Awaitable[Any]]) -> Any:
    """Poll ``check`` until it returns something truthy (bounded)."""
    async with asyncio.timeout(WAIT_SECONDS):
        while not (value := await check()):
            await asyncio.sleep(0.05)
        return value


async def _row(task_id: str) -> BackgroundCall:
    return await BackgroundCall.objects.aget(id=task_id)


# -- 2025-11-25 core ----------------------------------------------------------------------------


@pytest.mark.spec("2025-11-25", "basic/utilities/tasks", "CreateTaskResult, then tasks/result")
async def test_a_legacy_task_runs_on_the_worker_and_its_result_is_fetched(http, url) -> None:
    session = await Legacy.open(http, url)
    created = await session.result(
        "tools/call",
        {"name": "compute", "arguments": {"seconds": 0.2, "label": "sum"}, "task": {"ttl": 60000}},
    )
    task = created["task"]
    assert task["status"] == "working" and task["ttl"] == 60000 and task["pollInterval"] > 0
    task_id = task["taskId"]
    fetched = await session.result("tasks/get", {"taskId": task_id})
    assert fetched["taskId"] == task_id and fetched["createdAt"] == task["createdAt"]
    result = await session.result("tasks/result", {"taskId": task_id})
    assert result == {
        "content": [{"type": "text", "text": "Computed sum in 0.2 s."}],
        "isError": False,
        "_meta": {"io.modelcontextprotocol/related-task": {"taskId": task_id}},
    }
    done = await session.result("tasks/get", {"taskId": task_id})
    assert done["status"] == "completed"
    assert (await _row(task_id)).worker  # it ran on the worker process


async def test_a_legacy_tool_error_fails_the_task_and_its_result_is_the_error(http, url) -> None:
    session = await Legacy.open(http, url)
    task_id = (await session.result("tools/call", {"name": "must_task", "task": {}}))["task"][
        "taskId"
    ]
    result = await session.result("tasks/result", {"taskId": task_id})
    assert result["isError"] is True and "could not be processed" in result["content"][0]["text"]
    # 2025-11-25 "Task Status": a tool result with isError makes the task `failed`.
    assert (await session.result("tasks/get", {"taskId": task_id}))["status"] == "failed"


async def test_a_legacy_protocol_error_is_what_tasks_result_answers(http, url) -> None:
    session = await Legacy.open(http, url)
    task_id = (await session.result("tools/call", {"name": "crash", "task": {}}))["task"]["taskId"]
    error = await session.error("tasks/result", {"taskId": task_id})
    assert error["code"] == errors.INTERNAL_ERROR
    assert (await session.result("tasks/get", {"taskId": task_id}))["status"] == "failed"


@pytest.mark.spec("2025-11-25", "basic/utilities/tasks", "cancel: cancelled before the response")
async def test_a_legacy_task_cancelled_while_running_is_cancelled(http, url) -> None:
    session = await Legacy.open(http, url)
    params = {"name": "compute", "arguments": {"seconds": 30}, "task": {}}
    task_id = (await session.result("tools/call", params))["task"]["taskId"]
    await until(lambda: _started(task_id))
    cancelled = await session.result("tasks/cancel", {"taskId": task_id})
    assert cancelled["status"] == "cancelled" and cancelled["taskId"] == task_id
    assert (await _row(task_id)).status == BackgroundCall.Status.CANCELLED
    error = await session.error("tasks/cancel", {"taskId": task_id})
    assert error["code"] == errors.INVALID_PARAMS
    assert (await session.result("tasks/get", {"taskId": task_id}))["status"] == "cancelled"


async def _started(task_id: str) -> bool:
    return (await _row(task_id)).status == BackgroundCall.Status.WORKING


@pytest.mark.spec("2025-11-25", "basic/utilities/tasks", "taskSupport misuse -> -32601")
async def test_legacy_task_support_is_enforced(http, url) -> None:
    session = await Legacy.open(http, url)
    before = await BackgroundCall.objects.acount()
    refused_plain = await session.error("tools/call", {"name": "must_task"})
    refused_task = await session.error(
        "tools/call", {"name": "inline_compute", "arguments": {"seconds": 0}, "task": {}}
    )
    bad_ttl = await session.error("tools/call", {"name": "compute", "task": {"ttl": "soon"}})
    assert [refused_plain["code"], refused_task["code"], bad_ttl["code"]] == [
        errors.METHOD_NOT_FOUND,
        errors.METHOD_NOT_FOUND,
        errors.INVALID_PARAMS,
    ]
    assert await BackgroundCall.objects.acount() == before


@pytest.mark.spec("2025-11-25", "basic/utilities/tasks", "tasks are bound to their session")
async def test_another_session_cannot_see_or_cancel_a_task(http, url) -> None:
    owner, other = await Legacy.open(http, url), await Legacy.open(http, url)
    params = {"name": "compute", "arguments": {"seconds": 0}, "task": {}}
    task_id = (await owner.result("tools/call", params))["task"]["taskId"]
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        error = await other.error(method, {"taskId": task_id})
        assert error["code"] == errors.INVALID_PARAMS
    assert (await other.result("tasks/list", {}))["tasks"] == []
    assert (await owner.result("tasks/result", {"taskId": task_id}))["isError"] is False


@pytest.mark.spec("2025-11-25", "basic/utilities/tasks", "tasks/list is paginated")
async def test_tasks_list_pages_through_the_sessions_tasks(http, url) -> None:
    session = await Legacy.open(http, url)
    params = {"name": "compute", "arguments": {"seconds": 0}, "task": {}}
    made = [(await session.result("tools/call", params))["task"]["taskId"] for _ in range(3)]
    first = await session.result("tasks/list", {})
    second = await session.result("tasks/list", {"cursor": first["nextCursor"]})
    listed = [task["taskId"] for task in first["tasks"] + second["tasks"]]
    assert listed == made[::-1] and "nextCursor" not in second
    bad = await session.error("tasks/list", {"cursor": first["nextCursor"] + "x"})
    assert bad["code"] == errors.INVALID_PARAMS


@pytest.mark.spec("2025-11-25", "basic/utilities/tasks", "receivers MAY override the ttl")
async def test_a_task_lives_for_its_granted_ttl_only(http, url) -> None:
    session = await Legacy.open(http, url)
    params = {"name": "compute", "arguments": {"seconds": 0}, "task": {"ttl": 1000}}
    task = (await session.result("tools/call", params))["task"]
    assert task["ttl"] == 1000
    greedy = {"name": "compute", "arguments": {"seconds": 0}, "task": {"ttl": 10**12}}
    assert (await session.result("tools/call", greedy))["task"]["ttl"] == 600000

    async def gone() -> bool:
        body = await session.send("tasks/get", {"taskId": task["taskId"]})
        return "error" in body and body["error"]["code"] == errors.INVALID_PARAMS

    await until(gone)


# -- 2026-07-28 extension -----------------------------------------------------------------------


async def _poll(http: httpx.AsyncClient, url: str, task_id: str, *statuses: str) -> dict[str, Any]:
    async def reached() -> dict[str, Any] | None:
        status, body = await modern(http, url, "tasks/get", {"taskId": task_id})
        assert status == 200, body
        return body["result"] if body["result"]["status"] in statuses else None

    return await until(reached)


@pytest.mark.spec("2026-07-28", "ext-tasks", "server-directed task, polled with tasks/get")
async def test_a_modern_task_is_created_and_polled_to_completion(http, url) -> None:
    status, body = await modern(
        http, url, "tools/call", {"name": "compute", "arguments": {"seconds": 0.2}}
    )
    created = body["result"]
    assert status == 200 and created["resultType"] == "task"
    assert isinstance(created["ttlMs"], int) and created["pollIntervalMs"] > 0
    assert not {"ttl", "pollInterval", "requestState", "result"} & set(created)
    done = await _poll(http, url, created["taskId"], "completed")
    assert done["resultType"] == "complete"
    assert done["result"]["content"] == [{"type": "text", "text": "Computed result in 0.2 s."}]


async def test_without_the_extension_the_same_call_is_a_plain_result(http, url) -> None:
    status, body = await modern(
        http, url, "tools/call", {"name": "compute", "arguments": {"seconds": 0}}, extension=False
    )
    assert status == 200 and body["result"]["resultType"] == "complete"
    assert body["result"]["content"] == [{"type": "text", "text": "Computed result in 0 s."}]


@pytest.mark.spec("2026-07-28", "ext-tasks", "-32021 naming the extension")
async def test_modern_requests_without_the_extension_are_refused_where_it_is_needed(
    http, url
) -> None:
    _, task = await modern(
        http, url, "tools/call", {"name": "compute", "arguments": {"seconds": 0}}
    )
    task_id = task["result"]["taskId"]
    needed = {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
    for method, params in [
        ("tools/call", {"name": "must_task"}),
        ("tasks/get", {"taskId": task_id}),
        ("tasks/cancel", {"taskId": task_id}),
    ]:
        status, body = await modern(http, url, method, params, extension=False)
        assert status == 400 and body["error"]["code"] == errors.MISSING_CLIENT_CAPABILITY
        assert body["error"]["data"] == needed
    status, body = await modern(http, url, "tasks/get", {"taskId": task_id}, name="tsk_other")
    assert status == 400 and body["error"]["code"] == errors.HEADER_MISMATCH
    status, body = await modern(http, url, "tasks/result", {"taskId": task_id})
    assert status == 404 and body["error"]["code"] == errors.METHOD_NOT_FOUND


@pytest.mark.spec("2026-07-28", "ext-tasks", "tasks/cancel: empty ack; cooperative")
async def test_a_modern_task_cancelled_while_running_settles_cancelled(http, url) -> None:
    _, body = await modern(
        http, url, "tools/call", {"name": "compute", "arguments": {"seconds": 30}}
    )
    task_id = body["result"]["taskId"]
    await until(lambda: _started(task_id))
    for _ in range(2):  # idempotent
        status, ack = await modern(http, url, "tasks/cancel", {"taskId": task_id})
        assert status == 200 and set(ack["result"]) == {"resultType", "_meta"}
    assert (await _poll(http, url, task_id, "cancelled", "completed"))["status"] == "cancelled"
    status, unknown = await modern(http, url, "tasks/cancel", {"taskId": "tsk_unknown"})
    assert status == 400 and unknown["error"]["code"] == errors.INVALID_PARAMS


@pytest.mark.spec("2026-07-28", "ext-tasks", "input_required answered with tasks/update")
async def test_a_task_asks_and_is_answered_with_tasks_update(http, url) -> None:
    params = {"name": "confirm", "arguments": {"filename": "report.txt"}}
    _, body = await modern(http, url, "tools/call", params)
    task_id = body["result"]["taskId"]
    waiting = await _poll(http, url, task_id, "input_required")
    assert list(waiting["inputRequests"]) == ["confirm_delete"]
    assert waiting["inputRequests"]["confirm_delete"]["method"] == "elicitation/create"
    answers = {
        "confirm_delete": {"action": "accept", "content": {"confirm": True}},
        "never_asked": {"action": "accept", "content": {}},
    }
    status, ack = await modern(
        http, url, "tasks/update", {"taskId": task_id, "inputResponses": answers}
    )
    assert status == 200 and ack["result"]["resultType"] == "complete"
    done = await _poll(http, url, task_id, "completed", "failed")
    assert done["result"]["content"] == [{"type": "text", "text": "Deleted report.txt."}]


@pytest.mark.spec("2026-07-28", "ext-tasks", "MRTR settled before the task is created")
async def test_questions_are_settled_first_then_the_call_continues_as_a_task(http, url) -> None:
    _, first = await modern(http, url, "tools/call", {"name": "ask_then_task"})
    asked = first["result"]
    assert asked["resultType"] == "input_required" and "taskId" not in asked
    retry = {
        "name": "ask_then_task",
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}}},
        "requestState": asked["requestState"],
    }
    _, second = await modern(http, url, "tools/call", retry)
    created = second["result"]
    assert created["resultType"] == "task" and "requestState" not in created
    done = await _poll(http, url, created["taskId"], "completed", "failed")
    assert done["result"]["content"] == [{"type": "text", "text": "Hello, Alice! (from a task)"}]


@pytest.mark.spec("2026-07-28", "ext-tasks", "partial answers keep the task input_required")
async def test_answers_may_arrive_one_at_a_time(http, url) -> None:
    _, body = await modern(http, url, "tools/call", {"name": "two_questions"})
    task_id = body["result"]["taskId"]
    waiting = await _poll(http, url, task_id, "input_required")
    assert sorted(waiting["inputRequests"]) == ["confirm_start", "project_name"]
    first = {"project_name": {"action": "accept", "content": {"name": "Apollo"}}}
    await modern(http, url, "tasks/update", {"taskId": task_id, "inputResponses": first})
    _, still = await modern(http, url, "tasks/get", {"taskId": task_id})
    assert still["result"]["status"] == "input_required"
    assert list(still["result"]["inputRequests"]) == ["confirm_start"]
    second = {"confirm_start": {"action": "accept", "content": {"confirm": True}}}
    await modern(http, url, "tasks/update", {"taskId": task_id, "inputResponses": second})
    done = await _poll(http, url, task_id, "completed", "failed")
    assert done["result"]["content"] == [
        {"type": "text", "text": "Project Apollo: start confirmed=True."}
    ]


@pytest.mark.spec("2026-07-28", "ext-tasks", "authorization check on every task request")
async def test_another_principal_cannot_see_answer_or_cancel_a_task(http, server, tokens) -> None:
    url = f"{server}/mcp/{OAUTH_SLUG}"
    params = {"name": "compute", "arguments": {"seconds": 30}}
    status, body = await modern(http, url, "tools/call", params, token=tokens["alice"])
    assert status == 200, body
    task_id = body["result"]["taskId"]
    for method, extra in [
        ("tasks/get", {}),
        ("tasks/update", {"inputResponses": {}}),
        ("tasks/cancel", {}),
    ]:
        status, refused = await modern(
            http, url, method, {"taskId": task_id, **extra}, token=tokens["bob"]
        )
        assert status == 400 and refused["error"]["code"] == errors.INVALID_PARAMS
    assert (await _row(task_id)).status in BackgroundCall.ACTIVE
    status, mine = await modern(
        http, url, "tasks/cancel", {"taskId": task_id}, token=tokens["alice"]
    )
    assert status == 200 and mine["result"]["resultType"] == "complete"
