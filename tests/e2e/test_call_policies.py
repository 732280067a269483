"""Policies around calls, end to end: the official SDK client against a live Daphne process.

A tool that leaks an API key, an email, a card and a phone number has them masked in what the
client gets and in what the call log keeps; a deny pattern refuses a call with its reason; a
size cap refuses a result too large; a permissive policy records what it would have done and
changes nothing. Resource reads and prompt gets go through the same pipeline, and a tool run
on a Celery worker is masked there, its decisions on the web request's call-log row. Both eras.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import mcp.types as types
import pytest
from channels.db import database_sync_to_async
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_app.models import (
    BackgroundCall,
    CallLog,
    Endpoint,
    Policy,
    Prompt,
    PromptArgument,
    PromptMessage,
    Resource,
    Tool,
)
from mcp_app.protocol.errors import INVALID_PARAMS
from mcp_app.services.policies.writes import policy_delete, policy_save
from tests.support.catalog import echo_schema, make_endpoint, make_python_tool
from tests.support.live import asgi_server, flush_database
from tests.support.raw_mcp import JSON_HEADERS, open_session, sse_messages
from tests.support.worker import BACKGROUND_ENV, celery_worker

pytestmark = pytest.mark.django_db

MODES = ["legacy", "2026-07-28"]
SLUG = "policies-e2e"
BACKGROUND_SLUG = "policies-bg"
PERMISSIVE_SLUG = "policies-permissive"
KEY = "sk-live0123456789abcdefXYZ"
CARD = "4111 1111 1111 1111"  # passes the Luhn check
LEAK = f"key {KEY}, mail {{{{ who }}}}@example.com, card {CARD}, phone +1 415-555-0100"


def _leaky_tool() -> Tool:
    tool = Tool(
        name="leak",
        description="Answers with secrets it should not.",
        kind=Tool.Kind.TEMPLATE,
        config={"template": LEAK, "output": "text"},
        input_schema={"type": "object", "properties": {"who": {"type": "string"}}},
        capture_mode=Tool.Capture.FULL,
    )
    tool.full_clean()
    tool.save()
    return tool


def _policy(endpoint: Any, name: str, kind: str, position: int, **fields: Any) -> None:
    policy = Policy(endpoint=endpoint, name=name, kind=kind, position=position, **fields)
    policy_save(policy, actor=None, source="test")


@pytest.fixture(scope="module")
def urls(live_server_url: str, django_db_blocker: Any) -> Iterator[dict[str, str]]:
    with django_db_blocker.unblock():
        endpoint = make_endpoint(SLUG)
        leak = _leaky_tool()
        echo = make_python_tool("echo", "echo", input_schema=echo_schema())
        Tool.objects.filter(pk=echo.pk).update(capture_mode=Tool.Capture.FULL)
        contact = Resource.objects.create(
            uri="policies://contact", name="contact", text="Write to ops@example.org."
        )
        prompt = Prompt.objects.create(name="letter", description="A letter.")
        PromptArgument.objects.create(prompt=prompt, position=0, name="to", required=True)
        PromptMessage.objects.create(
            prompt=prompt, position=0, role="user", kind="text", text="Write to {to}."
        )
        wipe = make_python_tool("wipe", "echo", input_schema=echo_schema(), destructive_hint=True)
        endpoint.tools.add(leak, echo, wipe)
        endpoint.resources.add(contact)
        endpoint.prompts.add(prompt)
        _policy(endpoint, "mask-secrets", "mask", 10)
        _policy(
            endpoint,
            "no-sql",
            "deny",
            20,
            config={"patterns": [r"(?i)drop\s+table"], "reason": "SQL is not allowed here"},
        )
        _policy(endpoint, "small-echo", "max_result_size", 30, target="echo",
                config={"max_bytes": 2000})  # fmt: skip
        _policy(endpoint, "confirm-wipe", "confirm_destructive", 40,
                config={"message": "Really run {tool}?"})  # fmt: skip
        permissive = make_endpoint(PERMISSIVE_SLUG)
        permissive.tools.add(leak)
        _policy(permissive, "mask-watch", "mask", 0, mode=Policy.Mode.PERMISSIVE)
    yield {
        "enforce": f"{live_server_url}/mcp/{SLUG}",
        "permissive": f"{live_server_url}/mcp/{PERMISSIVE_SLUG}",
    }
    flush_database(django_db_blocker)


async def _log_row(slug: str, target: str, after: int, *, decided: bool = False) -> CallLog:
    """The call log row of the newest call of ``target`` after row ``after`` (written by the
    server's writer thread, so waited for, within a bound); ``decided``: with decisions."""
    rows = CallLog.objects.filter(endpoint_slug=slug, target=target, pk__gt=after)
    if decided:
        rows = rows.filter(policy_decisions__isnull=False)
    async with asyncio.timeout(15):
        while True:
            row = await rows.order_by("-id").afirst()
            if row is not None:
                return row
            await asyncio.sleep(0.05)


async def _last_id() -> int:
    row = await CallLog.objects.order_by("-id").afirst()
    return row.pk if row is not None else 0


@pytest.mark.parametrize("mode", MODES)
async def test_a_leaking_tool_is_masked_for_the_client_and_in_the_call_log(
    urls: dict[str, str], mode: str
) -> None:
    after = await _last_id()
    async with asyncio.timeout(20), Client(urls["enforce"], mode=mode) as client:
        result = await client.call_tool("leak", {"who": "alice"})
    assert not result.is_error
    assert result.content[0].text == (
        "key [masked:api_key], mail [masked:email], card [masked:card], phone [masked:phone]"
    )
    row = await _log_row(SLUG, "leak", after)
    assert row.status == CallLog.Status.OK
    assert KEY not in str(row.result) and "alice@example.com" not in str(row.result)
    assert "[masked:api_key]" in str(row.result)
    assert row.policy_decisions == [
        {
            "policy": "mask-secrets",
            "kind": "mask",
            "mode": "enforce",
            "phase": "after",
            "action": "masked",
            "detail": "1 api_key, 1 card, 1 email, 1 phone",
            "applied": True,
        }
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_masked_arguments_are_what_the_call_log_keeps(urls: dict[str, str], mode: str):
    after = await _last_id()
    async with asyncio.timeout(20), Client(urls["enforce"], mode=mode) as client:
        result = await client.call_tool("echo", {"message": "mail bob@example.com"})
    assert result.content[0].text == "mail [masked:email]"
    row = await _log_row(SLUG, "echo", after)
    assert row.arguments == {"message": "mail [masked:email]"}
    assert "bob@example.com" not in str(row.result)


@pytest.mark.parametrize("mode", MODES)
async def test_a_deny_pattern_refuses_the_call_with_its_reason(urls: dict[str, str], mode: str):
    after = await _last_id()
    async with asyncio.timeout(20), Client(urls["enforce"], mode=mode) as client:
        result = await client.call_tool("echo", {"message": "please DROP  TABLE users"})
    assert result.is_error
    assert result.content[0].text == "Refused by policy no-sql: SQL is not allowed here"
    row = await _log_row(SLUG, "echo", after)
    assert row.status == CallLog.Status.REJECTED
    assert [(d["policy"], d["phase"], d["action"]) for d in row.policy_decisions] == [
        ("no-sql", "before", "refused")
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_a_result_over_the_size_cap_is_refused(urls: dict[str, str], mode: str) -> None:
    async with asyncio.timeout(20), Client(urls["enforce"], mode=mode) as client:
        small = await client.call_tool("echo", {"message": "x" * 100})
        large = await client.call_tool("echo", {"message": "x" * 3000})
    assert not small.is_error
    assert large.is_error
    assert large.content[0].text.startswith("Refused by policy small-echo: the result (")
    assert large.content[0].text.endswith("bytes) exceeds the 2000-byte limit")


@pytest.mark.parametrize("mode", MODES)
async def test_resource_reads_and_prompt_gets_pass_the_policies(urls: dict[str, str], mode: str):
    async with asyncio.timeout(20), Client(urls["enforce"], mode=mode) as client:
        read = await client.read_resource("policies://contact")
        got = await client.get_prompt("letter", {"to": "carol@example.net"})
        with pytest.raises(MCPError) as refused:
            await client.get_prompt("letter", {"to": "x; DROP TABLE letters"})
    assert read.contents[0].text == "Write to [masked:email]."
    assert got.messages[0].content.text == "Write to [masked:email]."
    assert refused.value.error.code == INVALID_PARAMS
    assert refused.value.error.message == "Refused by policy no-sql: SQL is not allowed here"
    assert refused.value.error.data == {"policy": "no-sql", "reason": "SQL is not allowed here"}


@pytest.mark.parametrize("mode", MODES)
async def test_a_permissive_policy_records_but_changes_nothing(urls: dict[str, str], mode: str):
    after = await _last_id()
    async with asyncio.timeout(20), Client(urls["permissive"], mode=mode) as client:
        result = await client.call_tool("leak", {"who": "dave"})
    assert KEY in result.content[0].text and "dave@example.com" in result.content[0].text
    row = await _log_row(PERMISSIVE_SLUG, "leak", after)
    assert KEY in str(row.result)
    assert [(d["policy"], d["action"], d["applied"]) for d in row.policy_decisions] == [
        ("mask-watch", "masked", False)
    ]


@pytest.fixture(scope="module")
def background_url(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    with django_db_blocker.unblock():
        endpoint = make_endpoint(BACKGROUND_SLUG)
        echo = make_python_tool(
            "bg_echo",
            "echo",
            input_schema=echo_schema(),
            capture_mode=Tool.Capture.FULL,
            execution_mode=Tool.Execution.BACKGROUND,
        )
        wipe = make_python_tool(
            "bg_wipe",
            "echo",
            input_schema=echo_schema(),
            destructive_hint=True,
            execution_mode=Tool.Execution.BACKGROUND,
        )
        endpoint.tools.add(echo, wipe)
        _policy(endpoint, "mask-secrets", "mask", 0)
        _policy(endpoint, "confirm-wipe", "confirm_destructive", 1)
    with celery_worker() as _worker, asgi_server("daphne", BACKGROUND_ENV) as server:
        yield f"{server}/mcp/{BACKGROUND_SLUG}"
    flush_database(django_db_blocker)


@pytest.mark.parametrize("mode", MODES)
async def test_a_result_from_a_worker_is_masked_there_and_its_decision_logged(
    background_url: str, mode: str
) -> None:
    after = await _last_id()
    async with asyncio.timeout(30), Client(background_url, mode=mode) as client:
        result = await client.call_tool("bg_echo", {"message": f"key {KEY} for eve@example.com"})
    assert result.content[0].text == "key [masked:api_key] for [masked:email]"
    row = await _log_row(BACKGROUND_SLUG, "bg_echo", after)
    assert row.task_id and row.worker
    assert row.arguments == {"message": "key [masked:api_key] for [masked:email]"}
    assert KEY not in str(row.result)
    assert [(d["policy"], d["phase"], d["detail"]) for d in row.policy_decisions] == [
        ("mask-secrets", "after", "1 api_key, 1 email")
    ]
    call = await BackgroundCall.objects.aget(id=row.task_id)
    assert KEY not in str(call.result) and call.policy_decisions == row.policy_decisions


def _answering(confirm: bool, asked: list[str]) -> Any:
    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        assert params.requested_schema["properties"]["confirm"]["type"] == "boolean"
        return types.ElicitResult(action="accept", content={"confirm": confirm})

    return answer


@pytest.mark.parametrize("mode", MODES)
async def test_a_destructive_tool_runs_once_the_user_confirms(urls: dict[str, str], mode: str):
    after = await _last_id()
    asked: list[str] = []
    callback = _answering(True, asked)
    async with (
        asyncio.timeout(20),
        Client(urls["enforce"], mode=mode, elicitation_callback=callback) as client,
    ):
        result = await client.call_tool("wipe", {"message": "gone"})
        echoed = await client.call_tool("echo", {"message": "not destructive"})
    assert (result.is_error, result.content[0].text) == (False, "gone")
    assert not echoed.is_error
    assert asked == ["Really run wipe?"]  # asked once, and only for the destructive tool
    row = await _log_row(SLUG, "wipe", after, decided=True)
    assert row.status == CallLog.Status.OK
    assert [(d["policy"], d["phase"], d["action"]) for d in row.policy_decisions] == [
        ("confirm-wipe", "confirm", "confirmed")
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_a_destructive_tool_the_user_declines_is_refused(urls: dict[str, str], mode: str):
    after = await _last_id()
    callback = _answering(False, [])
    async with (
        asyncio.timeout(20),
        Client(urls["enforce"], mode=mode, elicitation_callback=callback) as client,
    ):
        result = await client.call_tool("wipe", {"message": "gone"})
    assert result.is_error
    assert result.content[0].text == (
        "Refused by policy confirm-wipe: the user did not confirm the call"
    )
    row = await _log_row(SLUG, "wipe", after, decided=True)
    assert row.status == CallLog.Status.REJECTED
    assert [d["action"] for d in row.policy_decisions] == ["declined"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_destructive_background_tool_asks_from_its_worker(
    background_url: str, mode: str
) -> None:
    after = await _last_id()
    asked: list[str] = []
    callback = _answering(True, asked)
    async with (
        asyncio.timeout(30),
        Client(background_url, mode=mode, elicitation_callback=callback) as client,
    ):
        result = await client.call_tool("bg_wipe", {"message": "gone"})
    assert (result.is_error, result.content[0].text) == (False, "gone")
    assert asked == ["Run bg_wipe? It may change or delete data."]
    # 2026-07-28: the round that asked has its own row; the decision is on the one that ran.
    row = await _log_row(BACKGROUND_SLUG, "bg_wipe", after, decided=True)
    assert row.task_id
    assert [(d["policy"], d["action"]) for d in row.policy_decisions] == [
        ("confirm-wipe", "confirmed")
    ]


async def _rpc(http: httpx.AsyncClient, url: str, session: str, rpc_id: int, method: str,
               params: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    headers = {**JSON_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    message = {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}
    async with http.stream("POST", url, headers=headers, json=message) as response:
        assert response.status_code == 200
        if response.headers["content-type"].startswith("application/json"):
            return dict(json.loads(await response.aread())["result"])
        async for reply in sse_messages(response):
            if reply.get("id") == rpc_id:
                return dict(reply["result"])
    raise AssertionError("no reply")


async def test_a_task_keeps_masked_arguments_and_answers_a_masked_result(
    background_url: str,
) -> None:
    """A 2025-11-25 task never passes run_tool in the web process: its call log row still
    keeps the arguments masked, and its result is masked on the worker before its row
    keeps it."""
    after = await _last_id()
    async with asyncio.timeout(30), httpx.AsyncClient(timeout=20) as http:
        session = await open_session(http, background_url)
        arguments = {"message": "for zoe@example.com"}
        params = {"name": "bg_echo", "arguments": arguments, "task": {"ttl": 60000}}
        created = await _rpc(http, background_url, session, 7, "tools/call", params)
        task_id = created["task"]["taskId"]
        result = await _rpc(http, background_url, session, 8, "tasks/result", {"taskId": task_id})
    assert result["content"] == [{"type": "text", "text": "for [masked:email]"}]
    row = await _log_row(BACKGROUND_SLUG, "bg_echo", after)
    assert row.arguments == {"message": "for [masked:email]"}
    call = await BackgroundCall.objects.aget(id=task_id)
    assert "zoe@example.com" not in str(call.result)


async def _committed(django_db_blocker: Any, change: Any) -> Any:
    """Run an edit committed in this process (its own connection), as the admin would."""

    def run() -> Any:
        with django_db_blocker.unblock():
            return change()

    return await database_sync_to_async(run, thread_sensitive=False)()


async def _echoed_until(url: str, expected: str) -> None:
    """Call echo until the live server answers ``expected`` (its snapshot rebuilt after an
    edit, told through Redis), within a bound."""
    async with asyncio.timeout(15), Client(url, mode="2026-07-28") as client:
        while True:
            result = await client.call_tool("echo", {"message": "to ann@example.com"})
            if result.content[0].text == expected:
                return
            await asyncio.sleep(0.05)


async def test_a_policy_edit_reaches_the_running_server(
    urls: dict[str, str], django_db_blocker: Any
) -> None:
    def create() -> Endpoint:
        endpoint = make_endpoint("policies-live")
        endpoint.tools.add(make_python_tool("echo", "echo", input_schema=echo_schema()))
        return endpoint

    endpoint = await _committed(django_db_blocker, create)
    url = urls["enforce"].replace(SLUG, "policies-live")
    await _echoed_until(url, "to ann@example.com")  # cached without policies

    def add() -> Policy:
        policy = Policy(endpoint=endpoint, name="mask", kind="mask")
        policy_save(policy, actor=None, source="test")
        return policy

    policy = await _committed(django_db_blocker, add)
    await _echoed_until(url, "to [masked:email]")

    def relax() -> None:
        policy.mode = Policy.Mode.PERMISSIVE
        policy_save(policy, actor=None, source="test")

    await _committed(django_db_blocker, relax)
    await _echoed_until(url, "to ann@example.com")

    def enforce() -> None:
        policy.mode = Policy.Mode.ENFORCE
        policy_save(policy, actor=None, source="test")

    await _committed(django_db_blocker, enforce)
    await _echoed_until(url, "to [masked:email]")
    await _committed(django_db_blocker, lambda: policy_delete(policy, actor=None, source="test"))
    await _echoed_until(url, "to ann@example.com")
