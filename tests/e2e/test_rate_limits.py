"""Rate limits, concurrency caps and quotas against real servers (issue #27).

Everything is real: Daphne processes on the test PostgreSQL, counting in the test Redis, a
Celery worker for the background call, the official SDK as client in both eras (raw HTTP
where the wire itself is checked). Covered: a runaway client is contained and told when to
retry (and counted in the metrics); a per-caller limit on a public endpoint survives a new
session and a spoofed X-Forwarded-For, and gives each OAuth user a budget of their own; a
refused read is a 429 with Retry-After; a background call and an MCP task hold their
concurrency slot until they end; a quota's use is visible; two processes share one count
exactly; limits hold under uvicorn (uvloop); Redis unreachable fails open or closed as each
limit says.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_app.models import (
    BackgroundCall,
    CallLog,
    Endpoint,
    Prompt,
    PromptMessage,
    RateLimit,
    Resource,
    Tool,
)
from mcp_app.protocol import errors
from mcp_app.services.api_tokens import api_token_create
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from tests.api.conftest import make_user
from tests.support.catalog import make_python_tool
from tests.support.live import asgi_server, flush_database
from tests.support.oauth import issue_token
from tests.support.raw_mcp import JSON_HEADERS, open_session
from tests.support.worker import BACKGROUND_ENV, celery_worker

pytestmark = pytest.mark.django_db

MODES = ["legacy", "2026-07-28"]
META_KEY = "mcphost/rateLimit"
MODERN_HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
}
TOOL_MODULES = {"MCP_PYTHON_TOOL_MODULES": "mcp_app.builtin_tools,tests.support.long_tools"}


def _limit(endpoint: Endpoint, **fields: Any) -> RateLimit:
    row = RateLimit(endpoint=endpoint, **fields)
    row.full_clean()
    row.save()
    return row


def _endpoint(slug: str) -> Endpoint:
    endpoint = endpoint_create(slug=slug, auth_mode="public")
    endpoint.tools.add(Tool.objects.get(name="echo"), Tool.objects.get(name="add"))
    return endpoint


@pytest.fixture(scope="module")
def limited(live_server_url: str, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    """The session's server, with one endpoint (and its limits) per scenario."""
    with django_db_blocker.unblock():
        make_python_tool("echo", "echo")
        make_python_tool("add", "add")
        ids: dict[str, int] = {}
        for mode in MODES:
            endpoint = _endpoint(f"rl-runaway-{mode}")
            ids[f"runaway-{mode}"] = _limit(
                endpoint, scope="caller", target_kind="tool", target_name="echo", rate=3,
                window="hour",
            ).pk  # fmt: skip
        endpoint = _endpoint("rl-session")
        _limit(endpoint, scope="caller", rate=2, window="hour")
        endpoint = _endpoint("rl-read")
        readme = Resource.objects.create(uri="rl://readme", name="readme", text="# Hi\n")
        prompt = Prompt.objects.create(name="hello", description="Says hello.")
        PromptMessage.objects.create(prompt=prompt, position=0, role="user", text="Hello.")
        endpoint.resources.add(readme)
        endpoint.prompts.add(prompt)
        for kind, name in (("resource", "rl://readme"), ("prompt", "hello")):
            ids[kind] = _limit(
                endpoint, scope="caller", target_kind=kind, target_name=name, rate=1,
                window="day",
            ).pk  # fmt: skip
        endpoint = _endpoint("rl-quota")
        ids["quota"] = _limit(endpoint, scope="caller", quota=2, quota_period="month").pk
        _endpoint("rl-unlimited")
        endpoint = _endpoint("rl-batch")
        endpoint.prompts.add(prompt)
        ids["batch"] = _limit(
            endpoint, scope="caller", target_kind="prompt", target_name="hello", rate=1,
            window="day",
        ).pk  # fmt: skip
        endpoint = _endpoint("rl-spoof")
        _limit(endpoint, scope="caller", rate=1, window="hour")
        secured = endpoint_create(slug="rl-oauth", auth_mode="oauth")
        secured.tools.add(Tool.objects.get(name="echo"))
        _limit(secured, scope="caller", rate=1, window="hour")
        tokens = {
            name: issue_token(
                User.objects.create_user(name),
                resource=[f"{live_server_url}/mcp/rl-oauth"],
                scope=secured.base_scope,
            )
            for name in ("alice", "bob")
        }
        endpoint = _endpoint("rl-uvicorn")
        _limit(endpoint, scope="caller", rate=2, window="hour", max_concurrent=5)
        user = make_user("limits-operator", ["mcp_app.view_ratelimit"])
        _token, key = api_token_create(user=user, name="e2e")
    yield {"base": live_server_url, "ids": ids, "api_key": key, "tokens": tokens}
    flush_database(django_db_blocker)


def _url(limited: dict[str, Any], slug: str) -> str:
    return f"{limited['base']}/mcp/{slug}"


async def _rows(slug: str) -> list[CallLog]:
    return [
        row
        async for row in CallLog.objects.filter(endpoint_slug=slug, rpc_method="tools/call")
        .exclude(status="")
        .order_by("id")
    ]


async def _wait_rows(slug: str, count: int) -> list[CallLog]:
    # The call log is written behind the answer (services/calllog/writer.py).
    async with asyncio.timeout(15):
        while len(rows := await _rows(slug)) < count:
            await asyncio.sleep(0.05)
    return rows


@pytest.mark.parametrize("mode", MODES)
async def test_a_runaway_client_is_contained_and_told_when_to_retry(limited, mode):
    slug = f"rl-runaway-{mode}"
    async with asyncio.timeout(30), Client(_url(limited, slug), mode=mode) as client:
        answers = [await client.call_tool("echo", {"message": str(i)}) for i in range(6)]
        other = await client.call_tool("add", {"a": 1, "b": 2})
    assert [answer.is_error for answer in answers] == [False] * 3 + [True] * 3
    refused = answers[3]
    assert "Rate limit reached" in refused.content[0].text
    assert "retry after" in refused.content[0].text
    data = refused.meta[META_KEY]
    assert data["retryAfterSeconds"] >= 1
    assert data["limit"]["id"] == limited["ids"][f"runaway-{mode}"]
    assert data["limit"]["reason"] == "rate"
    assert data["limit"]["target"] == {"kind": "tool", "name": "echo"}
    # The limit names one tool: the others are not held back.
    assert not other.is_error
    rows = await _wait_rows(slug, 7)
    assert [row.status for row in rows] == ["ok"] * 3 + ["rate_limited"] * 3 + ["ok"]
    assert {row.rate_limit_id for row in rows[3:6]} == {limited["ids"][f"runaway-{mode}"]}
    assert rows[0].rate_limit_id is None
    async with httpx.AsyncClient(timeout=20) as http:
        metrics = (await http.get(f"{limited['base']}/metrics")).text
    limit_id = limited["ids"][f"runaway-{mode}"]
    assert f'mcphost_rate_limit_rejections_total{{limit="{limit_id}",reason="rate"}} 3.0' in metrics


async def test_a_new_session_does_not_reset_a_per_caller_limit(limited):
    url = _url(limited, "rl-session")
    async with asyncio.timeout(30):
        async with Client(url, mode="legacy") as client:
            first = [await client.call_tool("echo", {"message": "x"}) for _ in range(2)]
        async with Client(url, mode="legacy") as client:
            again = await client.call_tool("add", {"a": 1, "b": 1})
        async with Client(url, mode="2026-07-28") as client:
            modern = await client.call_tool("echo", {"message": "y"})
    assert not any(answer.is_error for answer in first)
    assert again.is_error and again.meta[META_KEY]["limit"]["scope"] == "caller"
    assert modern.is_error


def _modern_echo(token: str | None = None, **headers: str) -> tuple[dict[str, Any], dict[str, str]]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "echo",
            "arguments": {"message": "x"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    sent = {**MODERN_HEADERS, "mcp-method": "tools/call", "mcp-name": "echo", **headers}
    if token is not None:
        sent["authorization"] = f"Bearer {token}"
    return body, sent


async def test_each_oauth_user_has_a_budget_of_their_own(limited):
    url = _url(limited, "rl-oauth")
    alice, bob = limited["tokens"]["alice"], limited["tokens"]["bob"]
    async with httpx.AsyncClient(timeout=20) as http:
        answers = [
            (await http.post(url, json=body, headers=headers)).json()["result"]["isError"]
            for body, headers in (_modern_echo(alice), _modern_echo(alice), _modern_echo(bob))
        ]
    assert answers == [False, True, False]


async def test_a_spoofed_forwarded_for_buys_no_fresh_budget(limited):
    # No proxy is trusted (TRUSTED_PROXIES empty): the header is the client's own word.
    url = _url(limited, "rl-spoof")
    async with httpx.AsyncClient(timeout=20) as http:
        answers = [
            (await http.post(url, json=body, headers=headers)).json()["result"]["isError"]
            for body, headers in (
                _modern_echo(**{"x-forwarded-for": "203.0.113.1"}),
                _modern_echo(**{"x-forwarded-for": "203.0.113.2"}),
            )
        ]
    assert answers == [False, True]


async def test_a_refused_read_is_429_with_retry_after(limited):
    url = _url(limited, "rl-read")
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "resources/read",
        "params": {
            "uri": "rl://readme",
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {**MODERN_HEADERS, "mcp-method": "resources/read", "mcp-name": "rl://readme"}
    async with httpx.AsyncClient(timeout=20) as http:
        first = await http.post(url, json=body, headers=headers)
        second = await http.post(url, json=body, headers=headers)
    assert first.status_code == 200, first.text
    assert second.status_code == 429
    retry_after = int(second.headers["retry-after"])
    assert 1 <= retry_after <= 86400
    error = second.json()["error"]
    assert second.json()["id"] == 7
    assert error["code"] == errors.RATE_LIMITED == 429
    assert error["data"]["retryAfterSeconds"] == retry_after
    assert error["data"]["limit"]["id"] == limited["ids"]["resource"]


async def test_in_a_batch_a_refusal_is_the_reply_of_its_message(limited):
    url = _url(limited, "rl-batch")
    async with httpx.AsyncClient(timeout=20) as http:
        session = await open_session(http, url, version="2025-03-26")
        headers = {
            **JSON_HEADERS,
            "mcp-session-id": session,
            "mcp-protocol-version": "2025-03-26",
        }
        batch = [
            {"jsonrpc": "2.0", "id": i, "method": "prompts/get", "params": {"name": "hello"}}
            for i in (1, 2)
        ]
        response = await http.post(url, json=batch, headers=headers)
    # One answer for the whole batch: the refused message's reply says it, the other ran.
    assert response.status_code == 200
    first, second = sorted(response.json(), key=lambda reply: reply["id"])
    assert "messages" in first["result"]
    assert second["error"]["code"] == errors.RATE_LIMITED
    assert second["error"]["data"]["limit"]["id"] == limited["ids"]["batch"]


async def test_a_refused_prompt_is_a_json_rpc_error_the_sdk_raises(limited):
    async with asyncio.timeout(30), Client(_url(limited, "rl-read"), mode="legacy") as client:
        await client.get_prompt("hello")
        with pytest.raises(MCPError) as excinfo:
            await client.get_prompt("hello")
    assert excinfo.value.error.code == errors.RATE_LIMITED
    assert excinfo.value.error.data["limit"]["id"] == limited["ids"]["prompt"]
    assert excinfo.value.error.data["retryAfterSeconds"] >= 1


async def test_quota_use_is_counted_refused_past_it_and_shown_to_the_operator(limited):
    async with asyncio.timeout(30), Client(_url(limited, "rl-quota"), mode="legacy") as client:
        answers = [await client.call_tool("add", {"a": i, "b": 0}) for i in range(3)]
    assert [answer.is_error for answer in answers] == [False, False, True]
    assert answers[2].meta[META_KEY]["limit"]["reason"] == "quota"
    limit_id = limited["ids"]["quota"]
    async with httpx.AsyncClient(timeout=20) as http:
        response = await http.get(
            f"{limited['base']}/api/v1/rate-limits/{limit_id}/usage/",
            headers={"authorization": f"Bearer {limited['api_key']}"},
        )
    assert response.status_code == 200, response.text
    # Refused calls are not counted: the caller used its 2 calls.
    assert response.json()["usage"] == [{"caller": "addr:127.0.0.1", "used": 2}]


async def test_a_call_no_limit_matches_goes_through(limited):
    async with asyncio.timeout(30), Client(_url(limited, "rl-unlimited"), mode="legacy") as client:
        answers = [await client.call_tool("echo", {"message": "x"}) for _ in range(10)]
    assert not any(answer.is_error for answer in answers)


async def test_limits_hold_under_uvicorn_and_uvloop(limited, uvicorn_server_url):
    # Production's server: uvloop's transports and its order of callbacks differ from
    # asyncio's, under which Daphne runs.
    url = f"{uvicorn_server_url}/mcp/rl-uvicorn"
    async with asyncio.timeout(30), Client(url, mode="2026-07-28") as client:
        answers = [await client.call_tool("echo", {"message": "x"}) for _ in range(3)]
    assert [answer.is_error for answer in answers] == [False, False, True]
    assert answers[2].meta[META_KEY]["limit"]["reason"] == "rate"


# -- two processes, one count -----------------------------------------------------------------


@pytest.fixture(scope="module")
def shared(limited: dict[str, Any], django_db_blocker: Any) -> Iterator[tuple[str, str, int]]:
    """A second server process on the same database and Redis; an endpoint-wide limit."""
    with django_db_blocker.unblock():
        endpoint = _endpoint("rl-shared")
        limit = _limit(endpoint, scope="endpoint", rate=5, window="hour")
    with asgi_server("daphne") as second:
        yield _url(limited, "rl-shared"), f"{second}/mcp/rl-shared", limit.pk


async def test_two_processes_share_one_exact_count(shared):
    first, second, limit_id = shared

    async def call(url: str, i: int) -> bool:
        async with Client(url, mode="2026-07-28") as client:
            return (await client.call_tool("echo", {"message": str(i)})).is_error

    async with asyncio.timeout(60):
        refused = await asyncio.gather(*(call(first if i % 2 else second, i) for i in range(12)))
    # Twelve concurrent calls through two processes: exactly the limit's five went through.
    assert refused.count(False) == 5
    rows = await _wait_rows("rl-shared", 12)
    assert sum(row.status == "rate_limited" for row in rows) == 7
    assert {row.rate_limit_id for row in rows if row.status == "rate_limited"} == {limit_id}


# -- Redis unreachable ------------------------------------------------------------------------


def _closed_port() -> int:
    # Bound and closed again: nothing listens there.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def no_redis(limited: dict[str, Any], django_db_blocker: Any) -> Iterator[str]:
    """A server whose limiter points at a closed port; echo's limit fails open, add's closed."""
    with django_db_blocker.unblock():
        endpoint = _endpoint("rl-no-redis")
        _limit(endpoint, target_kind="tool", target_name="echo", rate=1, on_redis_down="open")
        _limit(endpoint, target_kind="tool", target_name="add", rate=100, on_redis_down="closed")
    env = {"MCP_RATE_LIMIT_REDIS_URL": f"redis://127.0.0.1:{_closed_port()}/0"}
    with asgi_server("daphne", env) as server:
        yield server


async def test_redis_unreachable_fails_open_or_closed_as_each_limit_says(no_redis):
    url = f"{no_redis}/mcp/rl-no-redis"
    async with asyncio.timeout(30), Client(url, mode="2026-07-28") as client:
        opened = [await client.call_tool("echo", {"message": "x"}) for _ in range(3)]
        closed = await client.call_tool("add", {"a": 1, "b": 2})
    # Fail open: past the limit's one call per minute, since nothing could count them.
    assert not any(answer.is_error for answer in opened)
    assert closed.is_error
    assert closed.meta[META_KEY]["limit"]["reason"] == "unavailable"
    assert "unavailable" in closed.content[0].text
    async with httpx.AsyncClient(timeout=20) as http:
        metrics = (await http.get(f"{no_redis}/metrics")).text
    assert 'mcphost_rate_limit_redis_errors_total{result="open"} 3.0' in metrics
    assert 'mcphost_rate_limit_redis_errors_total{result="closed"} 1.0' in metrics


# -- background calls -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def background(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    with django_db_blocker.unblock():
        endpoint = endpoint_create(slug="rl-background", auth_mode="public")
        tasks = endpoint_create(slug="rl-tasks", auth_mode="public")
        tool_create(
            name="sleepy",
            kind="python",
            config={"function": "sleep_with_progress"},
            execution_mode=Tool.Execution.BACKGROUND,
            task_support="optional",
            endpoints=[endpoint, tasks],
        )
        _limit(endpoint, scope="endpoint", max_concurrent=1)
        _limit(tasks, scope="endpoint", max_concurrent=1)
    env = {**BACKGROUND_ENV, **TOOL_MODULES}
    with celery_worker(extra_env=TOOL_MODULES), asgi_server("daphne", env) as server:
        yield server
    flush_database(django_db_blocker)


async def test_a_background_call_holds_its_concurrency_slot_until_it_ends(background):
    url = f"{background}/mcp/rl-background"
    async with asyncio.timeout(60), Client(url, mode="legacy") as first:
        running = asyncio.create_task(first.call_tool("sleepy", {"seconds": 2, "steps": 2}))
        while not await BackgroundCall.objects.filter(
            tool_name="sleepy", status="working"
        ).aexists():
            await asyncio.sleep(0.05)
        async with Client(url, mode="2026-07-28") as second:
            refused = await second.call_tool("sleepy", {"seconds": 0, "steps": 1})
            done = await running
            after = await second.call_tool("sleepy", {"seconds": 0, "steps": 1})
    assert refused.is_error
    assert refused.meta[META_KEY]["limit"]["reason"] == "concurrency"
    assert not done.is_error, done.content
    assert not after.is_error, after.content


async def _modern_call(
    http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any], *, tasks: bool
) -> dict[str, Any]:
    capabilities: dict[str, Any] = {}
    if tasks:
        capabilities["extensions"] = {"io.modelcontextprotocol/tasks": {}}
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    name = params.get("taskId", params.get("name"))
    headers = {**MODERN_HEADERS, "mcp-method": method, "mcp-name": name}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    response = await http.post(url, json=body, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["result"]


async def test_an_mcp_task_holds_its_concurrency_slot_until_the_task_ends(background):
    url = f"{background}/mcp/rl-tasks"
    call = {"name": "sleepy", "arguments": {"seconds": 1, "steps": 1}}
    quick = {"name": "sleepy", "arguments": {"seconds": 0, "steps": 1}}
    async with asyncio.timeout(60), httpx.AsyncClient(timeout=20) as http:
        task = await _modern_call(http, url, "tools/call", call, tasks=True)
        assert task["resultType"] == "task"
        # The call has answered (a task handle), but its task still holds the only slot.
        refused = await _modern_call(http, url, "tools/call", quick, tasks=False)
        assert refused["isError"]
        assert refused["_meta"][META_KEY]["limit"]["reason"] == "concurrency"
        while (await _modern_call(http, url, "tasks/get", {"taskId": task["taskId"]}, tasks=True))[
            "status"
        ] != "completed":
            await asyncio.sleep(0.05)
        # The worker frees the slot just after it writes the outcome.
        while (after := await _modern_call(http, url, "tools/call", quick, tasks=False))["isError"]:
            assert after["_meta"][META_KEY]["limit"]["reason"] == "concurrency"
            await asyncio.sleep(0.05)
    assert after["content"][0]["text"].startswith("Slept 0")
