"""An upstream's question, asked of a 2026-07-28 client, is answered within one upstream run.

The upstream is the official SDK's server (``tests/support/mcp_upstream_server.py``), whose
``ask_fresh`` tool puts a fresh id in every question (as the everything server's
``trigger-url-elicitation`` does) and counts its runs. Our endpoint answers each question
with ``input_required`` while the upstream request stays open in the web process that
received the call (services/continuations.py); the retry, in any process, brings the answer
back to it. Legacy sessions ask on the call's stream, as before. Called as an MCP task, the
worker running it holds the upstream request open while the task shows the question, and
``tasks/update`` brings the answer back to it (services/background/worker.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp.types as types
import pytest
from django.contrib.auth.models import User
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_app.models import BackgroundCall, Endpoint, Tool, Upstream
from mcp_app.protocol.errors import INVALID_PARAMS
from tests.support.balancer import round_robin
from tests.support.catalog import make_endpoint
from tests.support.live import asgi_server, flush_database, wait_until_idle
from tests.support.mcp_upstream_server import RunningUpstream, run_mcp_upstream
from tests.support.oauth import issue_token
from tests.support.raw_mcp import JSON_HEADERS, sse_messages
from tests.support.waiting import await_until
from tests.support.worker import BACKGROUND_ENV, celery_worker

pytestmark = pytest.mark.django_db
MODERN = "2026-07-28"
# How long a held upstream call waits for the retry on the site's own server.
CONTINUATION_SECONDS = 3


@dataclass
class Site:
    url: str
    tokens: dict[str, str]
    markers: Path


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: Any) -> Iterator[RunningUpstream]:
    with run_mcp_upstream(tmp_path_factory.mktemp("e2e-upstream-questions")) as running:
        yield running


@pytest.fixture(scope="module")
def catalog(
    upstream: RunningUpstream, django_db_setup: None, django_db_blocker: Any
) -> Iterator[None]:
    with django_db_blocker.unblock():
        Upstream.objects.create(name="asker", url=upstream.url, allow_networks="127.0.0.1/32")
        public = make_endpoint("e2e-ask-up")
        secured = make_endpoint("e2e-ask-up-oauth", auth_mode=Endpoint.AuthMode.OAUTH)
        tool = Tool(
            name="ask_fresh",
            description="The upstream's ask_fresh.",
            kind=Tool.Kind.MCP_UPSTREAM,
            config={"upstream": "asker", "tool": "ask_fresh"},
            input_schema={
                "type": "object",
                "properties": {"tag": {"type": "string"}, "rounds": {"type": "integer"}},
                "required": ["tag", "rounds"],
            },
        )
        tool.full_clean()
        tool.save()
        public.tools.add(tool)
        secured.tools.add(tool)
    yield
    flush_database(django_db_blocker)


@pytest.fixture(scope="module")
def site(catalog: None, upstream: RunningUpstream, django_db_blocker: Any) -> Iterator[Site]:
    # One call at a time may wait for its client here (test_a_process_holds_...).
    env = {"MCP_CONTINUATION_SECONDS": str(CONTINUATION_SECONDS), "MCP_CONTINUATIONS_MAX": "1"}
    with asgi_server("daphne", env) as url:
        with django_db_blocker.unblock():
            resource = [f"{url}/mcp/e2e-ask-up-oauth"]
            tokens = {
                name: issue_token(User.objects.create_user(name), resource=resource)
                for name in ("ann", "ben")
            }
        yield Site(url=url, tokens=tokens, markers=upstream.markers)
        wait_until_idle(url)


@pytest.fixture(scope="module")
def background(catalog: None, upstream: RunningUpstream, django_db_blocker: Any) -> Iterator[Site]:
    """A web process and a Celery worker; the endpoints' upstream tool runs on the worker
    (also as an MCP task: ``ask_fresh_bg`` may run as one)."""
    with django_db_blocker.unblock():
        public = make_endpoint("e2e-ask-up-bg")
        secured = make_endpoint("e2e-ask-up-bg-oauth", auth_mode=Endpoint.AuthMode.OAUTH)
        tool = Tool(
            name="ask_fresh_bg",
            description="The upstream's ask_fresh, on a worker.",
            kind=Tool.Kind.MCP_UPSTREAM,
            config={"upstream": "asker", "tool": "ask_fresh"},
            input_schema={"type": "object"},
            execution_mode=Tool.Execution.BACKGROUND,
        )
        tool.full_clean()
        tool.save()
        public.tools.add(tool)
        secured.tools.add(tool)
    # The worker holds a task's upstream question (and expires it), the web process a call's.
    held = {"MCP_CONTINUATION_SECONDS": str(CONTINUATION_SECONDS)}
    with celery_worker(extra_env=held), asgi_server("daphne", {**BACKGROUND_ENV, **held}) as web:
        with django_db_blocker.unblock():
            resource = [f"{web}/mcp/e2e-ask-up-bg-oauth"]
            tokens = {
                name: issue_token(User.objects.create_user(name), resource=resource)
                for name in ("cat", "dan")
            }
        yield Site(url=web, tokens=tokens, markers=upstream.markers)
        wait_until_idle(web)


@pytest.fixture(scope="module")
def background_url(background: Site) -> str:
    return f"{background.url}/mcp/e2e-ask-up-bg"


@asynccontextmanager
async def connect(
    url: str, mode: str = MODERN, token: str | None = None, **options: Any
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    # Declares elicitation; the tests that answer rounds themselves never have it called.
    options.setdefault("elicitation_callback", _unexpected)
    # A connection per request: behind the balancer, each request goes to the next process.
    limits = httpx2.Limits(max_keepalive_connections=0)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=20, limits=limits) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, **options) as client,
    ):
        yield client


async def _unexpected(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    raise AssertionError("this test answers the rounds itself")


def runs(markers: Path, tag: str) -> int:
    path = markers / f"runs-{tag}"
    return len(path.read_text().splitlines()) if path.exists() else 0


def name(answer: str) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": answer})


async def first_round(client: Client, tag: str, rounds: int = 1) -> types.InputRequiredResult:
    asked = await client.session.call_tool(
        "ask_fresh", {"tag": tag, "rounds": rounds}, allow_input_required=True
    )
    assert isinstance(asked, types.InputRequiredResult), asked
    return asked


async def answer_round(
    client: Client, asked: types.InputRequiredResult, tag: str, answer: str, rounds: int = 1
) -> Any:
    assert asked.input_requests is not None
    return await client.session.call_tool(
        "ask_fresh",
        {"tag": tag, "rounds": rounds},
        input_responses={key: name(answer) for key in asked.input_requests},
        request_state=asked.request_state,
        allow_input_required=True,
    )


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_questions_that_change_every_run_are_answered_in_one_upstream_run(site, mode):
    asked: list[str] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return name(f"Ada{len(asked)}")

    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    tag = f"once-{mode}"
    async with (
        asyncio.timeout(30),
        connect(f"{site.url}/mcp/e2e-ask-up", mode, elicitation_callback=answer) as client,
    ):
        result = await client.call_tool(
            "ask_fresh", {"tag": tag, "rounds": 2}, progress_callback=on_progress
        )
    assert not result.is_error, result.content
    assert result.content[0].text == "answers: Ada1, Ada2"
    # Each question once (each with its own fresh id), and the upstream tool ran once.
    assert len(asked) == 2 and len(set(asked)) == 2
    assert runs(site.markers, tag) == 1
    # The upstream's progress after each answer reached the round that was waiting for it.
    assert seen == [1, 2]


async def test_the_rounds_of_a_held_call_may_land_on_different_processes(
    catalog, upstream, live_server_url, uvicorn_server_url
):
    # The backend of each connection; one connection per request (no keep-alive), so a
    # round's request is the first connection opened while it runs (the SDK may list the
    # tools after a result, on a connection of its own).
    log: list[str] = []
    with round_robin([live_server_url, uvicorn_server_url], log) as base:
        async with asyncio.timeout(30), connect(f"{base}/mcp/e2e-ask-up") as client:
            asked = await first_round(client, "balanced", rounds=2)
            again = await answer_round(client, asked, "balanced", "Ada", rounds=2)
            assert isinstance(again, types.InputRequiredResult), again
            result = await answer_round(client, again, "balanced", "Bea", rounds=2)
        wait_until_idle(live_server_url)
        wait_until_idle(uvicorn_server_url)
    assert isinstance(result, types.CallToolResult), result
    assert result.content[0].text == "answers: Ada, Bea"
    # Round robin: each round reached the other process.
    assert log[0] != log[1] != log[2]
    assert runs(upstream.markers, "balanced") == 1


async def test_an_unanswered_question_expires_and_the_upstream_run_is_cancelled(site):
    async with asyncio.timeout(30), connect(f"{site.url}/mcp/e2e-ask-up") as client:
        first = await first_round(client, "expired", rounds=2)
        asked = await answer_round(client, first, "expired", "Ada", rounds=2)
        assert isinstance(asked, types.InputRequiredResult), asked
        # The second question is left unanswered for longer than the server waits.
        cancelled = site.markers / "cancelled-expired"
        await await_until(
            cancelled.exists, "the upstream run cancelled", timeout=CONTINUATION_SECONDS + 10
        )
        with pytest.raises(MCPError) as refused:
            await answer_round(client, asked, "expired", "Late", rounds=2)
    assert refused.value.error.code == INVALID_PARAMS
    assert "call the tool again without it" in refused.value.error.message
    assert runs(site.markers, "expired") == 1


async def test_another_user_cannot_answer_a_held_question(site):
    url = f"{site.url}/mcp/e2e-ask-up-oauth"
    async with (
        asyncio.timeout(30),
        connect(url, token=site.tokens["ann"]) as ann,
        connect(url, token=site.tokens["ben"]) as ben,
    ):
        asked = await first_round(ann, "owned")
        with pytest.raises(MCPError) as refused:
            await answer_round(ben, asked, "owned", "Mallory")
        assert refused.value.error.code == INVALID_PARAMS
        # The question still waits for its own user, whose answer the upstream receives.
        result = await answer_round(ann, asked, "owned", "Ann")
    assert isinstance(result, types.CallToolResult), result
    assert result.content[0].text == "answers: Ann"
    assert runs(site.markers, "owned") == 1


async def test_a_forged_continuation_runs_nothing(site):
    async with asyncio.timeout(30), connect(f"{site.url}/mcp/e2e-ask-up") as client:
        asked = await first_round(client, "forged")
        assert asked.request_state is not None
        version, body, mac = asked.request_state.split(".")
        forged = types.InputRequiredResult(
            input_requests=asked.input_requests,
            request_state=f"{version}.{body}.{'A' * len(mac)}",
        )
        with pytest.raises(MCPError) as refused:
            await answer_round(client, forged, "forged", "Eve")
        result = await answer_round(client, asked, "forged", "Ann")
    assert refused.value.error.code == INVALID_PARAMS
    assert isinstance(result, types.CallToolResult), result
    assert result.content[0].text == "answers: Ann"
    assert runs(site.markers, "forged") == 1


async def test_a_process_holds_at_most_its_cap_of_waiting_calls(site):
    async with asyncio.timeout(30), connect(f"{site.url}/mcp/e2e-ask-up") as client:
        asked = await first_round(client, "capped")
        refused = await client.session.call_tool(
            "ask_fresh", {"tag": "past-cap", "rounds": 1}, allow_input_required=True
        )
        # The call past the cap ends with an error result; its upstream run is cancelled.
        assert isinstance(refused, types.CallToolResult), refused
        assert refused.is_error
        assert "too many calls waiting" in refused.content[0].text
        cancelled = site.markers / "cancelled-past-cap"
        await await_until(cancelled.exists, "the upstream run past the cap cancelled", timeout=10)
        result = await answer_round(client, asked, "capped", "Ann")
    assert isinstance(result, types.CallToolResult), result
    assert result.content[0].text == "answers: Ann"
    assert (runs(site.markers, "capped"), runs(site.markers, "past-cap")) == (1, 1)


async def test_a_background_call_is_held_open_by_its_worker(background_url, upstream):
    asked: list[str] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return name(f"Ada{len(asked)}")

    async with (
        asyncio.timeout(60),
        connect(background_url, elicitation_callback=answer) as client,
    ):
        result = await client.call_tool("ask_fresh_bg", {"tag": "worker", "rounds": 2})
    assert not result.is_error, result.content
    assert result.content[0].text == "answers: Ada1, Ada2"
    assert len(asked) == 2
    # The worker that took the call kept the upstream request open for both answers.
    assert runs(upstream.markers, "worker") == 1


# -- as an MCP task (2026-07-28 extension; the SDK has no tasks API: raw JSON-RPC) -------------

TASKS = "io.modelcontextprotocol/tasks"


async def task_request(
    http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any], token: str = ""
) -> dict[str, Any]:
    """Send one 2026-07-28 request declaring the tasks extension; return its JSON-RPC body."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {},
            "extensions": {TASKS: {}},
        },
    }
    headers = {**JSON_HEADERS, "mcp-protocol-version": MODERN, "mcp-method": method}
    headers["mcp-name"] = params.get("taskId", params.get("name", ""))
    if token:
        headers["authorization"] = f"Bearer {token}"
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    async with http.stream("POST", url, headers=headers, json=message) as response:
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            async for frame in sse_messages(response):
                if frame.get("id") == 1:
                    return frame
            raise AssertionError("the stream ended without the response")
        return dict(json.loads(await response.aread()))


async def task_state(
    http: httpx.AsyncClient, url: str, task_id: str, token: str = ""
) -> dict[str, Any]:
    body = await task_request(http, url, "tasks/get", {"taskId": task_id}, token)
    assert "result" in body, body
    return dict(body["result"])


async def task_question(
    http: httpx.AsyncClient, url: str, task_id: str, number: int, token: str = ""
) -> dict[str, Any]:
    """Poll until the task asks question ``number`` of ask_fresh; return its inputRequests."""
    while True:
        task = await task_state(http, url, task_id, token)
        assert task["status"] in ("working", "input_required"), task
        asked = task.get("inputRequests") or {}
        messages = [request["params"]["message"] for request in asked.values()]
        if task["status"] == "input_required" and messages[0].startswith(f"Name {number},"):
            return dict(asked)
        await asyncio.sleep(0.05)


async def task_end(
    http: httpx.AsyncClient, url: str, task_id: str, token: str = ""
) -> dict[str, Any]:
    """Poll until the task has ended; return it."""
    while True:
        task = await task_state(http, url, task_id, token)
        if task["status"] in ("completed", "failed", "cancelled"):
            return task
        await asyncio.sleep(0.05)


async def start_task(
    http: httpx.AsyncClient, url: str, tag: str, rounds: int, token: str = ""
) -> str:
    params = {"name": "ask_fresh_bg", "arguments": {"tag": tag, "rounds": rounds}}
    body = await task_request(http, url, "tools/call", params, token)
    assert body["result"]["resultType"] == "task", body
    return str(body["result"]["taskId"])


async def answer_task(
    http: httpx.AsyncClient,
    url: str,
    task_id: str,
    asked: dict[str, Any],
    answer: str,
    token: str = "",
) -> dict[str, Any]:
    answers = {key: name(answer).model_dump(exclude_none=True) for key in asked}
    return await task_request(
        http, url, "tasks/update", {"taskId": task_id, "inputResponses": answers}, token
    )


@pytest.mark.parametrize("rounds", [1, 2])
async def test_a_task_s_changing_questions_are_answered_in_one_upstream_run(
    background, background_url, rounds
):
    tag = f"task-{rounds}"
    answers = ["Ada", "Bea"][:rounds]
    async with asyncio.timeout(60), httpx.AsyncClient(timeout=20) as http:
        task_id = await start_task(http, background_url, tag, rounds)
        for number, answer in enumerate(answers, start=1):
            asked = await task_question(http, background_url, task_id, number)
            acked = await answer_task(http, background_url, task_id, asked, answer)
            assert acked["result"]["resultType"] == "complete", acked
        done = await task_end(http, background_url, task_id)
    assert done["status"] == "completed", done
    assert done["result"]["content"][0]["text"] == "answers: " + ", ".join(answers)
    # The worker held the upstream request open for every answer: one upstream run.
    assert runs(background.markers, tag) == 1


async def test_an_unanswered_task_question_fails_the_task_and_cancels_the_upstream_run(
    background, background_url
):
    async with asyncio.timeout(60), httpx.AsyncClient(timeout=20) as http:
        task_id = await start_task(http, background_url, "task-expired", 1)
        asked = await task_question(http, background_url, task_id, 1)
        failed = await task_end(http, background_url, task_id)
        late = await answer_task(http, background_url, task_id, asked, "Late")
    assert failed["status"] == "failed", failed
    assert "not answered" in failed["statusMessage"]
    assert "not answered" in failed["error"]["message"]
    assert (background.markers / "cancelled-task-expired").exists()
    # An answer after the end changes nothing (tasks/update acknowledges, as for any task).
    assert late["result"]["resultType"] == "complete", late
    assert (await task_state_row(task_id)) == "failed"
    assert runs(background.markers, "task-expired") == 1


async def task_state_row(task_id: str) -> str:
    return str((await BackgroundCall.objects.aget(id=task_id)).status)


async def test_another_user_cannot_answer_a_task_s_held_question(background):
    url = f"{background.url}/mcp/e2e-ask-up-bg-oauth"
    cat, dan = background.tokens["cat"], background.tokens["dan"]
    async with asyncio.timeout(60), httpx.AsyncClient(timeout=20) as http:
        task_id = await start_task(http, url, "task-owned", 1, cat)
        asked = await task_question(http, url, task_id, 1, cat)
        refused = await answer_task(http, url, task_id, asked, "Mallory", dan)
        assert refused["error"]["code"] == INVALID_PARAMS, refused
        # The question still waits for its own user, whose answer the upstream receives.
        assert await task_question(http, url, task_id, 1, cat) == asked
        await answer_task(http, url, task_id, asked, "Cat", cat)
        done = await task_end(http, url, task_id, cat)
    assert done["status"] == "completed", done
    assert done["result"]["content"][0]["text"] == "answers: Cat"
    assert runs(background.markers, "task-owned") == 1


async def test_a_task_cancelled_while_its_question_waits_cancels_the_upstream_run(
    background, background_url
):
    async with asyncio.timeout(60), httpx.AsyncClient(timeout=20) as http:
        task_id = await start_task(http, background_url, "task-cancelled", 1)
        await task_question(http, background_url, task_id, 1)
        acked = await task_request(http, background_url, "tasks/cancel", {"taskId": task_id})
        assert acked["result"]["resultType"] == "complete", acked
        cancelled = await task_end(http, background_url, task_id)
        # The upstream request the worker held open is cancelled too.
        marker = background.markers / "cancelled-task-cancelled"
        while not marker.exists():
            await asyncio.sleep(0.05)
    assert cancelled["status"] == "cancelled", cancelled
    assert runs(background.markers, "task-cancelled") == 1
