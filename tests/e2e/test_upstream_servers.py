"""An upstream MCP server behind a live endpoint: the SDK client calls us, we call the upstream.

The upstream is the official SDK's server in a subprocess on 127.0.0.1; our endpoint runs in a
live Daphne process. The credential is encrypted here and decrypted there (both derive the key
from the live server's SECRET_KEY). The OAuth endpoint shows that our client's bearer token
never reaches the upstream and the upstream's credential never reaches our client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import mcp.types as types
import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from mcp import Client

from mcp_app.models import CallLog, Endpoint, Tool, Upstream
from mcp_app.services.credentials import credential_create
from tests.support.catalog import make_endpoint
from tests.support.live import SECRET_KEY, asgi_server, flush_database, free_port
from tests.support.mcp_upstream_server import RunningUpstream, run_mcp_upstream
from tests.support.oauth import issue_token
from tests.support.raw_mcp import JSON_HEADERS, open_session, sse_messages
from tests.support.worker import BACKGROUND_ENV, celery_worker

pytestmark = pytest.mark.django_db
UPSTREAM_SECRET = "upstream-secret-value"
REMOTE_TOOLS = ("echo", "mixed", "progress", "headers", "fails", "ask_name", "ask_model")


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: Any) -> Iterator[RunningUpstream]:
    with run_mcp_upstream(tmp_path_factory.mktemp("e2e-upstream")) as running:
        yield running


@pytest.fixture(scope="module")
def server(
    live_server_url: str, upstream: RunningUpstream, django_db_blocker: Any
) -> Iterator[str]:
    with django_db_blocker.unblock(), override_settings(SECRET_KEY=SECRET_KEY, MCP_SECRET_KEYS=""):
        credential = credential_create(name="up-cred", kind="bearer", secret=UPSTREAM_SECRET)
        Upstream.objects.create(
            name="up", url=upstream.url, credential=credential, allow_networks="127.0.0.1/32"
        )
        public = make_endpoint("e2e-up")
        secured = make_endpoint("e2e-up-oauth", auth_mode=Endpoint.AuthMode.OAUTH)
        for remote in REMOTE_TOOLS:
            tool = Tool(
                name=f"up_{remote}",
                description=f"The upstream's {remote}.",
                kind=Tool.Kind.MCP_UPSTREAM,
                config={"upstream": "up", "tool": remote},
                input_schema={"type": "object"},
            )
            tool.full_clean()
            tool.save()
            public.tools.add(tool)
            secured.tools.add(tool)
        # This host as an upstream of itself: e2e-up-chained forwards to e2e-up, which
        # forwards to the SDK server.
        Upstream.objects.create(
            name="self", url=f"{live_server_url}/mcp/e2e-up", allow_networks="127.0.0.1/32"
        )
        chained = make_endpoint("e2e-up-chained")
        for name in ("up_mixed", "up_progress"):
            tool = Tool(
                name=f"chained_{name}",
                description=f"Our own {name}.",
                kind=Tool.Kind.MCP_UPSTREAM,
                config={"upstream": "self", "tool": name},
                input_schema={"type": "object"},
            )
            tool.full_clean()
            tool.save()
            chained.tools.add(tool)
    yield live_server_url
    flush_database(django_db_blocker)


@pytest.fixture(scope="module")
def background_url(server: str, django_db_blocker: Any) -> Iterator[str]:
    """A web process and a Celery worker; the endpoint's upstream tool runs on the worker."""
    with django_db_blocker.unblock():
        endpoint = make_endpoint("e2e-up-bg")
        tool = Tool(
            name="bg_progress",
            description="The upstream's progress, on a worker.",
            kind=Tool.Kind.MCP_UPSTREAM,
            config={"upstream": "up", "tool": "progress"},
            input_schema={"type": "object"},
            execution_mode=Tool.Execution.BACKGROUND,
        )
        tool.full_clean()
        tool.save()
        endpoint.tools.add(tool)
        # Nothing listens there: each call fails to connect, on the worker.
        Upstream.objects.create(
            name="bg-dead", url=f"http://127.0.0.1:{free_port()}/mcp", allow_networks="127.0.0.1/32"
        )
        dead = Tool(
            name="bg_dead",
            description="A tool of an upstream that is down, on a worker.",
            kind=Tool.Kind.MCP_UPSTREAM,
            config={"upstream": "bg-dead", "tool": "echo"},
            input_schema={"type": "object"},
            execution_mode=Tool.Execution.BACKGROUND,
        )
        dead.full_clean()
        dead.save()
        endpoint.tools.add(dead)
    with celery_worker(), asgi_server("daphne", BACKGROUND_ENV) as web:
        yield f"{web}/mcp/e2e-up-bg"


@pytest.fixture(params=["legacy", "2026-07-28"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


async def test_the_sdk_client_gets_the_upstream_result_unchanged(server, mode):
    async with asyncio.timeout(20), Client(f"{server}/mcp/e2e-up", mode=mode) as client:
        echoed = await client.call_tool("up_echo", {"text": "through two servers"})
        mixed = await client.call_tool("up_mixed", {})
        failed = await client.call_tool("up_fails", {})
    assert echoed.content[0].text == "through two servers"
    assert [block.type for block in mixed.content] == ["text", "image", "resource"]
    assert mixed.content[1].mime_type == "image/png"
    assert mixed.content[2].resource.text == "doc"
    assert mixed.structured_content == {"ok": True}
    assert failed.is_error and failed.content[0].text == "it broke"


async def test_upstream_progress_reaches_the_sdk_client(server, mode):
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with asyncio.timeout(20), Client(f"{server}/mcp/e2e-up", mode=mode) as client:
        result = await client.call_tool("up_progress", {"steps": 3}, progress_callback=on_progress)
    assert result.content[0].text == "done"
    assert [progress for progress, _, _ in seen] == [1, 2, 3]


async def test_an_upstream_question_is_relayed_to_our_client_and_answered(server, mode):
    asked: list[str] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async with (
        asyncio.timeout(20),
        Client(f"{server}/mcp/e2e-up", mode=mode, elicitation_callback=answer) as client,
    ):
        result = await client.call_tool("up_ask_name", {})
    assert not result.is_error, result.content
    assert result.content[0].text == "Hello Ada!"
    assert asked and set(asked) == {"What is your name?"}


async def test_an_upstream_sampling_request_is_relayed_to_our_clients_model(server, mode):
    async def sample(context: Any, params: types.CreateMessageRequestParams) -> Any:
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"echo {params.messages[0].content.text}"),
            model="test-model",
            stop_reason="endTurn",
        )

    async with (
        asyncio.timeout(20),
        Client(f"{server}/mcp/e2e-up", mode=mode, sampling_callback=sample) as client,
    ):
        result = await client.call_tool("up_ask_model", {"prompt": "hi"})
    assert not result.is_error, result.content
    assert result.content[0].text == "model said: echo hi"


async def test_an_upstream_tool_runs_on_a_celery_worker_with_progress(background_url):
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with asyncio.timeout(30), Client(background_url, mode="legacy") as client:
        for _ in range(2):  # the second call runs in a fresh loop on the worker
            result = await client.call_tool(
                "bg_progress", {"steps": 2}, progress_callback=on_progress
            )
            assert result.content[0].text == "done"
    assert seen == [1, 2, 1, 2]


async def test_an_unreachable_upstream_on_a_worker_is_recorded_as_such(background_url):
    async with asyncio.timeout(30), Client(background_url, mode="legacy") as client:
        result = await client.call_tool("bg_dead", {"text": "x"})
    assert result.is_error
    assert "Could not reach the upstream 'bg-dead'" in result.content[0].text

    async with asyncio.timeout(15):
        while (row := await CallLog.objects.filter(target="bg_dead").afirst()) is None:
            await asyncio.sleep(0.05)
    # The worker's outcome reaches the web process's row: the upstream failed, not its tool.
    assert (row.status, row.upstream) == (CallLog.Status.UPSTREAM_ERROR, "bg-dead")
    assert row.task_id


async def test_our_own_endpoint_serves_as_an_upstream(server, mode):
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with asyncio.timeout(20), Client(f"{server}/mcp/e2e-up-chained", mode=mode) as client:
        mixed = await client.call_tool("chained_up_mixed", {})
        done = await client.call_tool(
            "chained_up_progress", {"steps": 2}, progress_callback=on_progress
        )
    assert [block.type for block in mixed.content] == ["text", "image", "resource"]
    assert mixed.structured_content == {"ok": True}
    assert done.content[0].text == "done"
    assert seen == [1, 2]


@pytest.fixture(scope="module")
def client_token(server: str, django_db_blocker: Any) -> str:
    with django_db_blocker.unblock():
        user = User.objects.create_user("carol")
        return issue_token(user, resource=[f"{server}/mcp/e2e-up-oauth"])


async def test_tokens_never_cross_between_client_and_upstream(server, upstream, client_token):
    url = f"{server}/mcp/e2e-up-oauth"
    headers = {"Authorization": f"Bearer {client_token}"}
    async with asyncio.timeout(20), httpx.AsyncClient(headers=headers, timeout=20) as http:
        session = await open_session(http, url)
        response = await http.post(
            url,
            headers={**JSON_HEADERS, "mcp-session-id": session},
            json={
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {"name": "up_headers", "arguments": {}},
            },
        )
        assert response.status_code == 200
        if response.headers["content-type"].startswith("text/event-stream"):
            message = [m async for m in sse_messages(response) if m.get("id") == 7][0]
        else:
            message = response.json()
    seen_upstream = (upstream.markers / "headers").read_text()
    assert f"Bearer {UPSTREAM_SECRET}" in seen_upstream
    assert client_token not in seen_upstream
    assert UPSTREAM_SECRET not in response.text
    assert message["result"]["structuredContent"]["authorization"] == "Bearer [redacted]"
