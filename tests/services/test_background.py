"""The background-call row's life outside a worker: settling, cancelling, answers, housekeeping.

The worker itself runs in tests/e2e/test_background_calls.py; here rows are put in each state
directly (as a dead or slow worker would leave them) and the web-side services are driven
with ``async_to_sync`` on the test's own connection.
"""

from __future__ import annotations

import socket
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from django.utils import timezone

from mcp_app.models import BackgroundCall, Endpoint, Tool
from mcp_app.protocol.errors import McpError
from mcp_app.protocol.results import NO_STRUCTURED, CallCancelled, Outcome, ToolResult
from mcp_app.services.background import calls, web, worker
from mcp_app.services.catalog_writes import tool_create

pytestmark = pytest.mark.django_db

Status = BackgroundCall.Status
LOST_AFTER = 10.0  # MCP_BACKGROUND_LOST_AFTER_SECONDS default
START_TIMEOUT = 60.0  # MCP_BACKGROUND_START_TIMEOUT_SECONDS default


@pytest.fixture
def endpoint() -> Endpoint:
    return Endpoint.objects.create(slug="bg", auth_mode="public")


def make_call(endpoint: Endpoint, *, ago: float = 0.0, **fields: Any) -> BackgroundCall:
    """A call created ``ago`` seconds back; started/heartbeat fields are given as ages too."""
    now = timezone.now()
    started = fields.pop("started_ago", None)
    beat = fields.pop("heartbeat_ago", None)
    fields.setdefault("protocol_version", "2025-11-25")
    fields.setdefault("soft_time_limit", 5.0)
    fields.setdefault("hard_time_limit", 20.0)
    call = BackgroundCall.objects.create(endpoint=endpoint, tool_name="countdown", **fields)
    BackgroundCall.objects.filter(id=call.id).update(
        created_at=now - timedelta(seconds=ago),
        started_at=None if started is None else now - timedelta(seconds=started),
        heartbeat_at=None if beat is None else now - timedelta(seconds=beat),
    )
    call.refresh_from_db()
    return call


settle = async_to_sync(calls.asettle)


def test_a_call_no_worker_took_fails_after_the_start_timeout(endpoint):
    waiting = make_call(endpoint, ago=START_TIMEOUT - 5)
    stranded = make_call(endpoint, ago=START_TIMEOUT + 1)
    assert settle(waiting.id).status == Status.QUEUED
    settled = settle(stranded.id)
    assert (settled.status, settled.outcome) == (Status.FAILED, Outcome.NOT_STARTED)
    assert settled.status_message.startswith("No worker started this call within 60 s")
    # Both shapes a reader may need: a tool error result and a JSON-RPC error.
    assert settled.result["isError"] is True
    assert settled.error == {"code": -32603, "message": settled.status_message}


def test_a_silent_worker_is_lost_and_one_past_its_hard_limit_timed_out(endpoint):
    beating = make_call(endpoint, status=Status.WORKING, started_ago=25, heartbeat_ago=1)
    lost = make_call(endpoint, status=Status.WORKING, started_ago=5, heartbeat_ago=LOST_AFTER + 1)
    killed = make_call(
        endpoint, status=Status.WORKING, started_ago=25, heartbeat_ago=LOST_AFTER + 1
    )
    overrun = make_call(
        endpoint, status=Status.WORKING, started_ago=20 + LOST_AFTER + 1, heartbeat_ago=0
    )
    assert settle(beating.id).status == Status.WORKING
    assert (settle(lost.id).status, settle(lost.id).outcome) == (Status.FAILED, Outcome.LOST)
    assert settle(killed.id).outcome == Outcome.TIMED_OUT
    assert settle(overrun.id).status_message == "Tool timed out after 20 s (hard limit)"


def test_a_task_waiting_for_input_is_only_lost_when_its_worker_is(endpoint):
    waiting = make_call(
        endpoint, status=Status.INPUT_REQUIRED, started_ago=600, heartbeat_ago=1, is_task=True
    )
    assert settle(waiting.id).status == Status.INPUT_REQUIRED


def test_final_calls_are_never_changed_by_settling(endpoint):
    done = make_call(
        endpoint, ago=3600, status=Status.COMPLETED, outcome=Outcome.OK, heartbeat_ago=3600
    )
    assert settle(done.id).status == Status.COMPLETED
    assert settle("tsk_unknown") is None


def test_cancelling_is_once_and_only_for_active_calls(endpoint):
    call = make_call(endpoint, status=Status.WORKING, started_ago=1, heartbeat_ago=0)
    done = make_call(endpoint, status=Status.COMPLETED)
    cancel = async_to_sync(calls.acancel_call)
    assert cancel(call.id) is True
    assert cancel(call.id) is False
    assert cancel(done.id) is False
    call.refresh_from_db()
    done.refresh_from_db()
    assert (call.status, call.outcome) == (Status.CANCELLED, Outcome.CANCELLED)
    assert done.status == Status.COMPLETED


def test_a_cancel_notification_reaches_only_its_sessions_call(endpoint):
    mine = make_call(endpoint, session_id="s1", request_id=7)
    theirs = make_call(endpoint, session_id="s2", request_id=7)
    cancel = async_to_sync(web.acancel_request)
    assert cancel(session_id="s1", request_id=7) is True
    assert cancel(session_id="s1", request_id=8) is False
    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert (mine.status, theirs.status) == (Status.CANCELLED, Status.QUEUED)


def test_a_call_is_only_visible_to_its_owner(endpoint):
    other = Endpoint.objects.create(slug="other", auth_mode="public")
    call = make_call(endpoint, principal="user:1/client:a", session_id="s1")
    get = async_to_sync(calls.aget_call)
    owner = {"endpoint_id": endpoint.id, "principal": "user:1/client:a", "session_id": "s1"}
    assert get(call.id, **owner).id == call.id
    assert get(call.id, **{**owner, "principal": "user:2/client:a"}) is None
    assert get(call.id, **{**owner, "session_id": "s2"}) is None
    assert get(call.id, **{**owner, "endpoint_id": other.id}) is None


def test_answers_are_kept_only_for_open_questions(endpoint):
    asked = {"confirm": {"method": "elicitation/create", "params": {}}}
    call = make_call(endpoint, status=Status.INPUT_REQUIRED, input_requests=asked, heartbeat_ago=0)
    submit = async_to_sync(calls.asubmit_answers)
    assert submit(call.id, {"unasked": {"action": "accept"}}) is False
    assert submit(call.id, {"confirm": {"action": "accept"}, "unasked": {}}) is True
    # Answered once: a second answer to the same question is ignored.
    assert submit(call.id, {"confirm": {"action": "decline"}}) is False
    call.refresh_from_db()
    assert call.input_responses == {"confirm": {"action": "accept"}}
    working = make_call(endpoint, status=Status.WORKING, input_requests=asked)
    assert submit(working.id, {"confirm": {"action": "accept"}}) is False


def test_reaping_settles_stranded_calls_and_deletes_expired_ones(endpoint):
    stranded = make_call(endpoint, ago=START_TIMEOUT + 1)
    expired = make_call(endpoint, status=Status.COMPLETED)
    BackgroundCall.objects.filter(id=expired.id).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    expired_but_running = make_call(endpoint, status=Status.WORKING, heartbeat_ago=0)
    BackgroundCall.objects.filter(id=expired_but_running.id).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert async_to_sync(calls.areap)() == (1, 1)
    assert BackgroundCall.objects.get(id=stranded.id).outcome == Outcome.NOT_STARTED
    assert not BackgroundCall.objects.filter(id=expired.id).exists()
    assert BackgroundCall.objects.filter(id=expired_but_running.id).exists()


def test_results_keep_their_fields_through_the_row():
    result = ToolResult(
        content=[{"type": "text", "text": "x"}], structured={"n": 1}, meta={"k": "v"}
    )
    again = calls.result_from_json(calls.result_to_json(result))
    assert (again.content, again.structured, again.meta) == (result.content, {"n": 1}, {"k": "v"})
    error = calls.result_from_json(calls.result_to_json(ToolResult.error("no")))
    assert error.is_error and error.structured is NO_STRUCTURED


def test_a_final_row_answers_with_the_result_the_worker_finished(endpoint):
    stored = {"content": [{"type": "text", "text": "{}"}], "structuredContent": {}}
    done = make_call(
        endpoint, status=Status.COMPLETED, outcome=Outcome.OK, result=stored, worker="w@host"
    )
    result = calls.call_result(done)
    assert calls.result_to_json(result) == stored
    assert (result.ended, result.detail) == (Outcome.OK, {"task_id": done.id, "worker": "w@host"})
    soft = make_call(
        endpoint, status=Status.COMPLETED, outcome=Outcome.TIMED_OUT,
        result=calls.result_to_json(ToolResult.error("Tool timed out after 5 s")),
    )  # fmt: skip
    assert calls.call_result(soft).ended == Outcome.TIMED_OUT
    # A worker lost is an error result for the call log, not an outcome of its own.
    lost = settle(
        make_call(endpoint, status=Status.WORKING, started_ago=5, heartbeat_ago=LOST_AFTER + 1).id
    )
    assert calls.call_result(lost).ended == Outcome.TOOL_ERROR
    cancelled = make_call(endpoint, status=Status.CANCELLED, outcome=Outcome.CANCELLED)
    with pytest.raises(CallCancelled):
        calls.call_result(cancelled)
    failed = make_call(
        endpoint, status=Status.FAILED, outcome=Outcome.PROTOCOL_ERROR,
        error={"code": -32602, "message": "bad"},
    )  # fmt: skip
    with pytest.raises(McpError) as error:
        calls.call_result(failed)
    assert (error.value.code, error.value.message) == (-32602, "bad")


def test_tool_execution_settings_are_checked():
    with pytest.raises(ValidationError) as required_inline:
        tool_create(
            name="t1", kind="python", config={"function": "countdown"},
            task_support=Tool.TaskSupport.REQUIRED,
        )  # fmt: skip
    assert "task_support" in required_inline.value.message_dict
    with pytest.raises(ValidationError) as limits:
        tool_create(
            name="t2", kind="python", config={"function": "countdown"},
            execution_mode=Tool.Execution.BACKGROUND, soft_time_limit=10, hard_time_limit=5,
        )  # fmt: skip
    assert "hard_time_limit" in limits.value.message_dict
    assert not Tool.objects.exists()


def test_a_notification_redis_cannot_take_does_not_fail_the_worker_s_call(settings):
    """Our choice (docs/architecture.md, "Failures"): with Redis down a call's progress is
    lost, not the call. The worker publishes through a real channel layer whose Redis is a
    port nobody listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": f"redis://127.0.0.1:{dead_port}/0"}]},
        }
    }
    run = worker._WorkerRun(BackgroundCall(id="dead-redis"))
    frame = {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": 1, "progress": 2, "message": "half way"},
    }

    async_to_sync(run._publish)(frame)

    # The latest progress is still kept for the row's next heartbeat.
    assert run.progress == {"progress": 2, "message": "half way"}
