"""MCP tasks in both eras: when a call becomes a task, the tasks/* methods, their shapes and errors.

The store is an in-memory fake of the ``TaskStore`` port that keeps tasks per owner exactly as
the port promises; the real one (``services/mcp_tasks.py``) is driven end to end in
``tests/e2e/test_mcp_tasks.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mcp_app.protocol import errors
from mcp_app.protocol.catalog import CatalogSnapshot, EndpointInfo, ToolDef
from mcp_app.protocol.context import RequestContext, ToolCallContext
from mcp_app.protocol.dispatch import handle_request
from mcp_app.protocol.errors import (
    HeaderMismatch,
    InvalidParams,
    McpError,
    MethodNotFound,
    MissingClientCapability,
)
from mcp_app.protocol.handlers.subscriptions import listen_filter
from mcp_app.protocol.inbound import check_modern_request
from mcp_app.protocol.jsonrpc import Request
from mcp_app.protocol.mcp_tasks import TASKS_EXTENSION, TaskInfo, TaskOwner, has_extension
from mcp_app.protocol.results import ToolResult
from tests.protocol.conftest import InMemoryToolRunner, MakeContext

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
EXTENSION = "io.modelcontextprotocol/tasks"
WITH_EXTENSION = {"extensions": {EXTENSION: {}}, "elicitation": {}}
START = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


async def _compute(arguments: Mapping[str, Any], ctx: ToolCallContext) -> ToolResult:
    return ToolResult.text("computed inline")


async def _ask_then_task(arguments: Mapping[str, Any], ctx: ToolCallContext) -> ToolResult:
    answer = await ctx.elicit("Name?", NAME_FORM, key="user_name")
    ctx.continue_as_task()
    return ToolResult.text(f"Hello, {answer['content']['name']}! (inline)")


def _tool(name: str, execution: str, task_support: str, binding: Any = _compute) -> ToolDef:
    return ToolDef(
        name=name,
        description=name,
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
        execution=execution,
        task_support=task_support,
        binding=binding,
    )


CATALOG = CatalogSnapshot(
    endpoint=EndpointInfo(slug="tasks"),
    tools=(
        _tool("job", "background", "optional"),
        _tool("must_task", "background", "required"),
        _tool("plain", "inline", "forbidden"),
        _tool("auto_job", "auto", "optional"),
        _tool("ask_then_task", "auto", "required", binding=_ask_then_task),
        _tool("ask_maybe_task", "auto", "optional", binding=_ask_then_task),
    ),
)


class InMemoryTaskStore:
    """The ``TaskStore`` port in memory: tasks keyed by id, each with its owner."""

    def __init__(self) -> None:
        self.tasks: dict[str, tuple[TaskOwner, TaskInfo]] = {}
        self.created: list[dict[str, Any]] = []
        self.answers: list[tuple[str, dict[str, Any]]] = []

    async def create(
        self,
        tool: ToolDef,
        arguments: Mapping[str, Any],
        ctx: RequestContext,
        *,
        answers: Mapping[str, Any],
        ttl_ms: int | None,
    ) -> TaskInfo:
        number = len(self.tasks) + 1
        moment = START + timedelta(seconds=number)
        info = TaskInfo(
            task_id=f"tsk_{number}",
            status="working",
            created_at=moment,
            last_updated_at=moment,
            ttl_ms=60_000 if ttl_ms is None else ttl_ms,
            poll_interval_ms=500,
        )
        owner = TaskOwner(ctx.principal, ctx.session.id if ctx.session else "")
        self.tasks[info.task_id] = (owner, info)
        self.created.append(
            {
                "tool": tool.name,
                "arguments": dict(arguments),
                "answers": dict(answers),
                "ttl_ms": ttl_ms,
            }
        )
        return info

    def settle(self, task_id: str, **changes: Any) -> None:
        owner, info = self.tasks[task_id]
        self.tasks[task_id] = (owner, dataclasses.replace(info, **changes))

    async def get(self, task_id: str, owner: TaskOwner) -> TaskInfo | None:
        found = self.tasks.get(task_id)
        return found[1] if found is not None and found[0] == owner else None

    async def list(
        self, owner: TaskOwner, *, after: tuple[datetime, str] | None, limit: int
    ) -> Sequence[TaskInfo]:
        mine = sorted(
            (info for who, info in self.tasks.values() if who == owner),
            key=lambda info: (info.created_at, info.task_id),
            reverse=True,
        )
        if after is not None:
            mine = [info for info in mine if (info.created_at, info.task_id) < after]
        return mine[:limit]

    async def wait(self, task_id: str, owner: TaskOwner) -> TaskInfo | None:
        return await self.get(task_id, owner)

    async def cancel(self, task_id: str, owner: TaskOwner) -> TaskInfo | None:
        info = await self.get(task_id, owner)
        if info is not None and not info.is_terminal:
            self.settle(task_id, status="cancelled")
        return await self.get(task_id, owner)

    async def answer(
        self, task_id: str, owner: TaskOwner, responses: Mapping[str, Any]
    ) -> TaskInfo | None:
        info = await self.get(task_id, owner)
        if info is not None:
            self.answers.append((task_id, dict(responses)))
        return info


@pytest.fixture
def store() -> InMemoryTaskStore:
    return InMemoryTaskStore()


@pytest.fixture
def ctx_for(make_ctx: MakeContext, store: InMemoryTaskStore) -> MakeContext:
    def make(version: str = LEGACY, **overrides: Any) -> RequestContext:
        fields: dict[str, Any] = {"catalog": CATALOG, "tasks": store, "principal": "alice"}
        if version == MODERN:
            fields["client_capabilities"] = WITH_EXTENSION
        return make_ctx(version, **{**fields, **overrides})

    return make


def task_of(number: int, status: str = "working", ttl: int = 60_000) -> dict[str, Any]:
    """A 2025-11-25 ``Task`` as the fake store creates it."""
    moment = f"2026-11-22T10:00:0{number}.000Z"
    return {
        "taskId": f"tsk_{number}",
        "status": status,
        "createdAt": moment,
        "lastUpdatedAt": moment,
        "ttl": ttl,
        "pollInterval": 500,
    }


# -- 2025-11-25 core -------------------------------------------------------------------------------


@pytest.mark.spec(
    "2025-11-25", "basic/utilities/tasks", "task-augmented request -> CreateTaskResult"
)
async def test_a_task_augmented_call_answers_with_the_task_at_once(
    ctx_for: MakeContext, store: InMemoryTaskStore, tool_runner: InMemoryToolRunner
) -> None:
    params = {"name": "job", "arguments": {"n": 1}, "task": {"ttl": 30_000}}
    result = await handle_request(ctx_for(), "tools/call", params)
    assert result == {"task": task_of(1, ttl=30_000)}
    assert store.created == [
        {"tool": "job", "arguments": {"n": 1}, "answers": {}, "ttl_ms": 30_000}
    ]
    assert tool_runner.calls == []


async def test_a_task_without_ttl_gets_the_store_default(
    ctx_for: MakeContext, store: InMemoryTaskStore
) -> None:
    result = await handle_request(ctx_for(), "tools/call", {"name": "auto_job", "task": {}})
    assert result["task"]["ttl"] == 60_000
    assert store.created[0]["ttl_ms"] is None


@pytest.mark.spec("2025-11-25", "basic/utilities/tasks", "forbidden taskSupport + task -> -32601")
async def test_a_task_for_a_tool_that_forbids_tasks_is_method_not_found(
    ctx_for: MakeContext, store: InMemoryTaskStore
) -> None:
    with pytest.raises(MethodNotFound):
        await handle_request(ctx_for(), "tools/call", {"name": "plain", "task": {}})
    assert store.created == []


@pytest.mark.spec("2025-11-25", "basic/utilities/tasks", "required taskSupport, no task -> -32601")
async def test_a_plain_call_of_a_task_only_tool_is_method_not_found(
    ctx_for: MakeContext, tool_runner: InMemoryToolRunner
) -> None:
    with pytest.raises(MethodNotFound):
        await handle_request(ctx_for(), "tools/call", {"name": "must_task"})
    assert tool_runner.calls == []


@pytest.mark.parametrize("task", ["soon", [], {"ttl": -1}, {"ttl": 1.5}, {"ttl": True}])
async def test_a_malformed_task_param_is_invalid_params(
    ctx_for: MakeContext, store: InMemoryTaskStore, task: Any
) -> None:
    with pytest.raises(InvalidParams):
        await handle_request(ctx_for(), "tools/call", {"name": "job", "task": task})
    assert store.created == []


async def test_earlier_revisions_ignore_the_task_param_and_refuse_task_only_tools(
    ctx_for: MakeContext, store: InMemoryTaskStore
) -> None:
    result = await handle_request(ctx_for("2025-06-18"), "tools/call", {"name": "job", "task": {}})
    assert result["content"] == [{"type": "text", "text": "computed inline"}]
    with pytest.raises(MethodNotFound):
        await handle_request(ctx_for("2025-06-18"), "tools/call", {"name": "must_task"})
    assert store.created == []


@pytest.mark.parametrize("method", ["tasks/get", "tasks/result", "tasks/list", "tasks/cancel"])
async def test_tasks_methods_do_not_exist_before_2025_11_25(
    ctx_for: MakeContext, method: str
) -> None:
    with pytest.raises(MethodNotFound):
        await handle_request(ctx_for("2025-06-18"), method, {"taskId": "tsk_1"})


async def test_get_returns_the_task_and_a_tool_error_counts_as_failed(
    ctx_for: MakeContext, store: InMemoryTaskStore
) -> None:
    await handle_request(ctx_for(), "tools/call", {"name": "job", "task": {}})
    assert await handle_request(ctx_for(), "tasks/get", {"taskId": "tsk_1"}) == task_of(1)
    failing = {"content": [{"type": "text", "text": "no"}], "isError": True}
    store.settle("tsk_1", status="completed", result=failing, status_message="no")
    # 2025-11-25 "Task Status": a tool result with isError is `failed`.
    assert await handle_request(ctx_for(), "tasks/get", {"taskId": "tsk_1"}) == {
        **task_of(1, "failed"),
        "statusMessage": "no",
    }


@pytest.mark.spec("2025-11-25", "basic/utilities/tasks", "tasks/result returns exactly the result")
async def test_result_is_the_call_result_tagged_with_the_task(
    ctx_for: MakeContext, store: InMemoryTaskStore
) -> None:
    await handle_request(ctx_for(), "tools/call", {"name": "job", "task": {}})
    done = {"content": [{"type": "text", "text": "42"}], "structuredContent": {"n": 42}}
    store.settle("tsk_1", status="completed", result=done)
    assert await handle_request(ctx_for(), "tasks/result", {"taskId": "tsk_1"}) == {
        "content": [{"type": "text", "text": "42"}],
        "structuredContent": {"n": 42},
        "isError": False,
        "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "tsk_1"}},
    }


async def test_result_of_a_call_that_failed_is_its_json_rpc_error(
    ctx_for: MakeContext, store: InMemoryTaskStore
) -> None:
    await handle_request(ctx_for(), "tools/call", {"name": "job", "task": {}})
    store.settle("tsk_1", status="failed", error={"code": -32603, "message": "crashed", "data": 7})
    with pytest.raises(McpError) as caught:
        await handle_request(ctx_for(), "tasks/result", {"taskId": "tsk_1"})
    assert caught.value.to_error_object() == {"code": -32603, "message": "crashed", "data": 7}


async def test_result_of_a_cancelled_task_is_invalid_params(
    ctx_for: MakeContext, store: InMemoryTaskStore
) -> None:
    await handle_request(ctx_for(), "tools/call", {"name": "job", "task": {}})
    store.settle("tsk_1", status="cancelled")
    with pytest.raises(InvalidParams):
        await handle_request(ctx_for(), "tasks/result", {"taskId": "tsk_1"})


@pytest.mark.spec("2025-11-25", "basic/utilities/tasks", "tasks/list is paginated")
async def test_list_pages_through_the_callers_tasks_newest_first(ctx_for: MakeContext) -> None:
    for _ in range(3):
        await handle_request(ctx_for(), "tools/call", {"name": "job", "task": {}})
    await handle_request(ctx_for(principal="bob"), "tools/call", {"name": "job", "task": {}})
    first = await handle_request(ctx_for(page_size=2), "tasks/list", {})
    assert [task["taskId"] for task in first["tasks"]] == ["tsk_3", "tsk_2"]
    second = await handle_request(
        ctx_for(page_size=2), "tasks/list", {"cursor": first["nextCursor"]}
    )
    assert second == {"tasks": [task_of(1)]}


@pytest.mark.parametrize("cursor", ["garbage", "eyJsIjoidG9vbHMiLCJrIjoieCJ9.AAAA"])
async def test_list_with_a_forged_cursor_is_invalid_params(
    ctx_for: MakeContext, cursor: str
) -> None:
    with pytest.raises(InvalidParams):
        await handle_request(ctx_for(), "tasks/list", {"cursor": cursor})


@pytest.mark.spec("2025-11-25", "basic/utilities/tasks", "cancel -> cancelled before responding")
async def test_cancel_answers_the_cancelled_task_and_refuses_a_finished_one(
    ctx_for: MakeContext, store: InMemoryTaskStore
) -> None:
    await handle_request(ctx_for(), "tools/call", {"name": "job", "task": {}})
    cancelled = await handle_request(ctx_for(), "tasks/cancel", {"taskId": "tsk_1"})
    assert cancelled == task_of(1, "cancelled")
    with pytest.raises(InvalidParams):
        await handle_request(ctx_for(), "tasks/cancel", {"taskId": "tsk_1"})


@pytest.mark.spec("2025-11-25", "basic/utilities/tasks", "tasks are bound to their creator")
@pytest.mark.parametrize("method", ["tasks/get", "tasks/result", "tasks/cancel"])
@pytest.mark.parametrize(
    "other", [{"principal": "bob"}, {"session": None}, {"principal": "", "session": None}]
)
async def test_another_callers_task_is_not_found(
    ctx_for: MakeContext, store: InMemoryTaskStore, method: str, other: dict[str, Any]
) -> None:
    await handle_request(ctx_for(), "tools/call", {"name": "job", "task": {}})
    with pytest.raises(InvalidParams):
        await handle_request(ctx_for(**other), method, {"taskId": "tsk_1"})
    assert store.tasks["tsk_1"][1].status == "working"


@pytest.mark.parametrize("params", [None, {}, {"taskId": 7}])
async def test_a_missing_or_non_string_task_id_is_invalid_params(
    ctx_for: MakeContext, params: dict[str, Any] | None
) -> None:
    with pytest.raises(InvalidParams):
        await handle_request(ctx_for(), "tasks/get", params)


async def test_tools_list_shows_task_support_to_2025_11_25_only(ctx_for: MakeContext) -> None:
    listed = await handle_request(ctx_for(), "tools/list", {})
    support = {tool["name"]: tool.get("execution") for tool in listed["tools"]}
    assert support == {
        "ask_maybe_task": {"taskSupport": "optional"},
        "ask_then_task": {"taskSupport": "required"},
        "auto_job": {"taskSupport": "optional"},
        "job": {"taskSupport": "optional"},
        "must_task": {"taskSupport": "required"},
        "plain": None,  # absent means forbidden
    }
    for version in ("2025-06-18", MODERN):
        listed = await handle_request(ctx_for(version), "tools/list", {})
        assert all("execution" not in tool for tool in listed["tools"])


# -- 2026-07-28 extension --------------------------------------------------------------------------


@pytest.mark.spec("2026-07-28", "ext-tasks", "CreateTaskResult = Result & Task, resultType task")
async def test_a_background_tool_answers_a_declaring_request_with_a_flat_task(
    ctx_for: MakeContext, store: InMemoryTaskStore
) -> None:
    # A v1 `task` hint is tolerated and changes nothing (the server decides).
    params = {"name": "job", "arguments": {"n": 2}, "task": "ignored"}
    result = await handle_request(ctx_for(MODERN), "tools/call", params)
    meta = result.pop("_meta")
    assert result == {
        "resultType": "task",
        "taskId": "tsk_1",
        "status": "working",
        "createdAt": "2026-11-22T10:00:01.000Z",
        "lastUpdatedAt": "2026-11-22T10:00:01.000Z",
        "ttlMs": 60_000,
        "pollIntervalMs": 500,
    }
    assert "io.modelcontextprotocol/serverInfo" in meta
    assert store.created[0]["ttl_ms"] is None


@pytest.mark.spec("2026-07-28", "ext-tasks", "MUST NOT return a task to a non-declaring request")
async def test_a_request_without_the_extension_gets_a_plain_result(
    ctx_for: MakeContext, store: InMemoryTaskStore, tool_runner: InMemoryToolRunner
) -> None:
    result = await handle_request(
        ctx_for(MODERN, client_capabilities={}), "tools/call", {"name": "job"}
    )
    assert result["resultType"] == "complete"
    assert result["content"] == [{"type": "text", "text": "computed inline"}]
    assert store.created == [] and tool_runner.calls == [("job", {})]


async def test_inline_and_auto_tools_stay_plain_for_a_declaring_request(
    ctx_for: MakeContext, store: InMemoryTaskStore
) -> None:
    for name in ("plain", "auto_job"):
        result = await handle_request(ctx_for(MODERN), "tools/call", {"name": name})
        assert result["resultType"] == "complete"
    assert store.created == []


@pytest.mark.spec("2026-07-28", "ext-tasks", "task-only tool without the extension -> -32021")
async def test_a_task_only_tool_needs_the_extension(
    ctx_for: MakeContext, tool_runner: InMemoryToolRunner
) -> None:
    with pytest.raises(MissingClientCapability) as caught:
        await handle_request(
            ctx_for(MODERN, client_capabilities={}), "tools/call", {"name": "must_task"}
        )
    assert caught.value.data == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
    assert tool_runner.calls == []


@pytest.mark.spec("2026-07-28", "ext-tasks", "MRTR is resolved before the task is created")
async def test_a_tool_asks_first_and_then_continues_as_a_task(
    ctx_for: MakeContext, store: InMemoryTaskStore
) -> None:
    first = await handle_request(ctx_for(MODERN), "tools/call", {"name": "ask_then_task"})
    assert first["resultType"] == "input_required" and "taskId" not in first
    answer = {"action": "accept", "content": {"name": "Alice"}}
    retry = {
        "name": "ask_then_task",
        "inputResponses": {"user_name": answer},
        "requestState": first["requestState"],
    }
    second = await handle_request(ctx_for(MODERN), "tools/call", retry)
    assert second["resultType"] == "task" and "requestState" not in second
    assert "inputRequests" not in second
    # The task runs the tool again on a worker, where the answer is already there.
    assert store.created == [
        {"tool": "ask_then_task", "arguments": {}, "answers": {"user_name": answer}, "ttl_ms": None}
    ]


async def test_continue_as_task_is_a_no_op_where_no_task_can_follow(
    ctx_for: MakeContext, store: InMemoryTaskStore
) -> None:
    # A 2025-11-25 call without `task` cannot turn into one: the tool finishes inline.
    ctx = ctx_for(LEGACY, client_requests=_Answering(), client_capabilities={"elicitation": {}})
    result = await handle_request(ctx, "tools/call", {"name": "ask_maybe_task"})
    assert result["content"] == [{"type": "text", "text": "Hello, Bea! (inline)"}]
    assert store.created == []


class _Answering:
    async def request(self, method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        return {"action": "accept", "content": {"name": "Bea"}}


@pytest.mark.spec("2026-07-28", "ext-tasks", "tasks/get returns a DetailedTask")
async def test_get_inlines_what_each_status_carries(
    ctx_for: MakeContext, store: InMemoryTaskStore
) -> None:
    await handle_request(ctx_for(MODERN), "tools/call", {"name": "job"})

    async def get() -> dict[str, Any]:
        result = await handle_request(ctx_for(MODERN), "tasks/get", {"taskId": "tsk_1"})
        result.pop("_meta")
        assert result.pop("resultType") == "complete"
        assert "requestState" not in result
        return result

    base = {
        "taskId": "tsk_1",
        "createdAt": "2026-11-22T10:00:01.000Z",
        "lastUpdatedAt": "2026-11-22T10:00:01.000Z",
        "ttlMs": 60_000,
        "pollIntervalMs": 500,
    }
    assert await get() == {**base, "status": "working"}
    ask = {"confirm": {"method": "elicitation/create", "params": {"message": "Sure?"}}}
    store.settle("tsk_1", status="input_required", input_requests=ask)
    assert await get() == {**base, "status": "input_required", "inputRequests": ask}
    tool_error = {"content": [{"type": "text", "text": "no"}], "isError": True}
    store.settle("tsk_1", status="completed", result=tool_error)
    # The extension keeps tool errors `completed` (the 2025-11-25 core called them `failed`).
    assert await get() == {**base, "status": "completed", "result": tool_error}
    store.settle("tsk_1", status="failed", result=None, error={"code": -32603, "message": "x"})
    assert await get() == {**base, "status": "failed", "error": {"code": -32603, "message": "x"}}


@pytest.mark.spec("2026-07-28", "ext-tasks", "tasks/cancel -> empty ack, idempotent")
async def test_cancel_acknowledges_with_an_empty_result_even_when_finished(
    ctx_for: MakeContext, store: InMemoryTaskStore
) -> None:
    await handle_request(ctx_for(MODERN), "tools/call", {"name": "job"})
    for _ in range(2):
        ack = await handle_request(ctx_for(MODERN), "tasks/cancel", {"taskId": "tsk_1"})
        assert set(ack) == {"resultType", "_meta"} and ack["resultType"] == "complete"
    assert store.tasks["tsk_1"][1].status == "cancelled"


ASKED = {
    "confirm": {"method": "elicitation/create", "params": {"message": "Sure?"}},
    "roots": {"method": "roots/list", "params": {}},
}


async def test_update_delivers_usable_answers_to_open_questions_and_acknowledges(
    ctx_for: MakeContext, store: InMemoryTaskStore
) -> None:
    await handle_request(ctx_for(MODERN), "tools/call", {"name": "job"})
    store.settle("tsk_1", status="input_required", input_requests=ASKED)
    answers = {
        "confirm": {"action": "accept", "content": {"ok": True}},
        "roots": 12345,  # not a ListRootsResult: the question stays open
        "never_asked": {"action": "accept"},
    }
    ack = await handle_request(
        ctx_for(MODERN), "tasks/update", {"taskId": "tsk_1", "inputResponses": answers}
    )
    assert ack["resultType"] == "complete" and set(ack) == {"resultType", "_meta"}
    assert store.answers == [("tsk_1", {"confirm": answers["confirm"]})]


async def test_update_of_a_task_that_asks_nothing_is_acknowledged_and_ignored(
    ctx_for: MakeContext, store: InMemoryTaskStore
) -> None:
    await handle_request(ctx_for(MODERN), "tools/call", {"name": "job"})
    answers = {"confirm": {"action": "accept"}}
    ack = await handle_request(
        ctx_for(MODERN), "tasks/update", {"taskId": "tsk_1", "inputResponses": answers}
    )
    assert ack["resultType"] == "complete"
    assert store.answers == []


@pytest.mark.parametrize(
    "params",
    [{"taskId": "tsk_1"}, {"taskId": "tsk_1", "inputResponses": []}, {"inputResponses": {}}],
)
async def test_update_without_an_answers_object_is_invalid_params(
    ctx_for: MakeContext, store: InMemoryTaskStore, params: dict[str, Any]
) -> None:
    await handle_request(ctx_for(MODERN), "tools/call", {"name": "job"})
    with pytest.raises(InvalidParams):
        await handle_request(ctx_for(MODERN), "tasks/update", params)
    assert store.answers == []


@pytest.mark.spec("2026-07-28", "ext-tasks", "unknown taskId -> -32602")
@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tasks/get", {"taskId": "tsk_404"}),
        ("tasks/cancel", {"taskId": "tsk_404"}),
        ("tasks/update", {"taskId": "tsk_404", "inputResponses": {}}),
    ],
)
async def test_unknown_tasks_are_invalid_params(
    ctx_for: MakeContext, method: str, params: dict[str, Any]
) -> None:
    with pytest.raises(InvalidParams):
        await handle_request(ctx_for(MODERN), method, params)


@pytest.mark.spec("2026-07-28", "ext-tasks", "no tasks/result, no tasks/list")
@pytest.mark.parametrize("method", ["tasks/result", "tasks/list"])
async def test_removed_v1_methods_are_method_not_found(ctx_for: MakeContext, method: str) -> None:
    with pytest.raises(MethodNotFound):
        await handle_request(ctx_for(MODERN), method, {"taskId": "tsk_1"})


# -- the 2026-07-28 request ladder ---------------------------------------------------------------


def _request(method: str, params: dict[str, Any], capabilities: dict[str, Any]) -> Request:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    return Request(id=1, method=method, params={**params, "_meta": meta})


def _headers(method: str, name: str) -> dict[str, list[str]]:
    return {"mcp-protocol-version": [MODERN], "mcp-method": [method], "mcp-name": [name]}


@pytest.mark.spec("2026-07-28", "ext-tasks", "non-declaring tasks/* -> -32021")
@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_tasks_methods_need_the_extension(method: str) -> None:
    request = _request(method, {"taskId": "t1", "inputResponses": {}}, {})
    with pytest.raises(MissingClientCapability) as caught:
        check_modern_request(request, _headers(method, "t1"), CATALOG)
    assert errors.modern_http_status(caught.value.code) == 400
    declaring = _request(method, {"taskId": "t1", "inputResponses": {}}, WITH_EXTENSION)
    assert check_modern_request(declaring, _headers(method, "t1"), CATALOG).version == MODERN


@pytest.mark.spec("2026-07-28", "ext-tasks", "Mcp-Name carries params.taskId")
def test_mcp_name_must_match_the_task_id() -> None:
    request = _request("tasks/get", {"taskId": "t1"}, WITH_EXTENSION)
    with pytest.raises(HeaderMismatch):
        check_modern_request(request, _headers("tasks/get", "t2"), CATALOG)
    headers = _headers("tasks/get", "t1")
    del headers["mcp-name"]
    with pytest.raises(HeaderMismatch):
        check_modern_request(request, headers, CATALOG)


def test_the_ladder_refuses_a_task_only_tool_without_the_extension() -> None:
    request = _request("tools/call", {"name": "must_task"}, {})
    with pytest.raises(MissingClientCapability) as caught:
        check_modern_request(request, _headers("tools/call", "must_task"), CATALOG)
    assert caught.value.data == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
    optional = _request("tools/call", {"name": "job"}, {})
    assert check_modern_request(optional, _headers("tools/call", "job"), CATALOG).version == MODERN


@pytest.mark.spec("2026-07-28", "ext-tasks", "taskIds on listen without the extension -> -32021")
def test_listening_for_task_status_needs_the_extension() -> None:
    params = {"notifications": {"taskIds": ["t1"], "toolsListChanged": True}}
    headers = {"mcp-protocol-version": [MODERN], "mcp-method": ["subscriptions/listen"]}
    with pytest.raises(MissingClientCapability):
        check_modern_request(_request("subscriptions/listen", params, {}), headers, CATALOG)
    declaring = _request("subscriptions/listen", params, WITH_EXTENSION)
    assert check_modern_request(declaring, headers, CATALOG).version == MODERN
    # Task status notifications are optional: the acknowledgement honours none.
    assert listen_filter(params) == {"toolsListChanged": True}


@pytest.mark.parametrize(
    ("capabilities", "declared"),
    [
        ({}, False),
        ({"extensions": None}, False),
        ({"extensions": []}, False),
        ({"extensions": {}}, False),
        ({"extensions": {TASKS_EXTENSION: True}}, False),
        ({"extensions": {TASKS_EXTENSION: {}}}, True),
    ],
)
def test_the_tasks_extension_is_declared_only_as_an_object(
    capabilities: dict[str, Any], declared: bool
) -> None:
    assert has_extension(capabilities) is declared
