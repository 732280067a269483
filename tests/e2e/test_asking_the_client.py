"""Tools that ask the client mid-call: elicitation, sampling, roots, in both eras.

Legacy: the question goes out on the call's SSE stream and the answer comes back as a
separate POST, possibly to another web process. 2026-07-28: the call returns input_required
with a sealed requestState and the client retries with the answers. The same built-in tools
serve both; the official SDK client drives them through its callbacks.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import mcp.types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_app.protocol import errors
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from tests.support.live import asgi_server, flush_database
from tests.support.raw_mcp import JSON_HEADERS, open_session, sse_messages

pytestmark = pytest.mark.django_db

SLUG = "ask"
ELICITING = {"elicitation": {}}
ASKING_TOOLS = ("ask_confirmation", "ask_value", "ask_model", "client_roots")


@pytest.fixture(scope="module")
def ask_url(live_server_url: str, django_db_blocker: Any) -> Any:
    with django_db_blocker.unblock():
        endpoint = endpoint_create(slug=SLUG, title="Asking tools", auth_mode="public")
        for name in ASKING_TOOLS:
            tool_create(name=name, kind="python", config={"function": name}, endpoints=[endpoint])
    yield f"{live_server_url}/mcp/{SLUG}"
    flush_database(django_db_blocker)


async def accept_confirm(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    assert params.requested_schema["properties"]["confirm"]["type"] == "boolean"
    return types.ElicitResult(action="accept", content={"confirm": True})


async def test_a_confirmation_is_asked_and_answered(ask_url, mode):
    async with (
        asyncio.timeout(20),
        Client(ask_url, mode=mode, elicitation_callback=accept_confirm) as client,
    ):
        result = await client.call_tool("ask_confirmation", {"question": "Delete 3 rows?"})
    assert not result.is_error, result.content
    assert result.structured_content == {"confirmed": True, "action": "accept"}


async def test_a_value_is_asked_with_its_choices_and_default(ask_url, mode):
    seen: list[dict[str, Any]] = []

    async def choose(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.requested_schema["properties"]["value"])
        return types.ElicitResult(action="accept", content={"value": "staging"})

    async with (
        asyncio.timeout(20),
        Client(ask_url, mode=mode, elicitation_callback=choose) as client,
    ):
        result = await client.call_tool(
            "ask_value",
            {"question": "Deploy where?", "choices": ["prod", "staging"], "default": "prod"},
        )
    assert result.structured_content == {"action": "accept", "value": "staging"}
    assert seen == [
        {"type": "string", "title": "Value", "enum": ["prod", "staging"], "default": "prod"}
    ]


async def test_a_declined_question_is_reported_not_failed(ask_url, mode):
    async def decline(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with (
        asyncio.timeout(20),
        Client(ask_url, mode=mode, elicitation_callback=decline) as client,
    ):
        result = await client.call_tool("ask_confirmation", {"question": "Sure?"})
    assert result.structured_content == {"confirmed": False, "action": "decline"}


async def test_the_client_model_is_sampled(ask_url, mode):
    async def sample(context: Any, params: types.CreateMessageRequestParams) -> Any:
        prompt = params.messages[0].content.text
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"echo: {prompt}"),
            model="test-model",
            stop_reason="endTurn",
        )

    async with asyncio.timeout(20), Client(ask_url, mode=mode, sampling_callback=sample) as client:
        result = await client.call_tool("ask_model", {"prompt": "hello", "max_tokens": 10})
    assert result.content[0].text == "echo: hello"


async def test_the_client_roots_are_listed(ask_url, mode):
    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/project", name="project")])

    async with asyncio.timeout(20), Client(ask_url, mode=mode, list_roots_callback=roots) as client:
        result = await client.call_tool("client_roots", {})
    assert result.structured_content == {
        "roots": [{"uri": "file:///work/project", "name": "project"}]
    }


async def test_a_legacy_client_without_elicitation_gets_a_tool_error(ask_url):
    async with asyncio.timeout(20), Client(ask_url, mode="legacy") as client:
        result = await client.call_tool("ask_confirmation", {"question": "Sure?"})
    assert result.is_error
    assert "elicitation capability" in result.content[0].text


@pytest.mark.spec("2026-07-28", "basic/patterns/mrtr", "missing capability: -32021")
async def test_a_modern_client_without_elicitation_gets_missing_capability(ask_url):
    async with asyncio.timeout(20), Client(ask_url, mode="2026-07-28") as client:
        with pytest.raises(MCPError) as excinfo:
            await client.call_tool("ask_confirmation", {"question": "Sure?"})
    assert excinfo.value.error.code == errors.MISSING_CLIENT_CAPABILITY


# -- raw wire checks ---------------------------------------------------------------------------


async def test_the_answer_may_reach_another_process(ask_url, uvicorn_server_url):
    other_url = f"{uvicorn_server_url}/mcp/{SLUG}"
    async with httpx.AsyncClient(timeout=30) as client:
        session_id = await open_session(client, ask_url, capabilities=ELICITING)
        headers = {
            **JSON_HEADERS,
            "mcp-session-id": session_id,
            "mcp-protocol-version": "2025-11-25",
        }
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "ask_confirmation", "arguments": {"question": "Go?"}},
        }
        async with (
            asyncio.timeout(20),
            client.stream("POST", ask_url, json=call, headers=headers) as response,
        ):
            messages = sse_messages(response)
            question = await anext(messages)
            assert question["method"] == "elicitation/create"
            answer = {
                "jsonrpc": "2.0",
                "id": question["id"],
                "result": {"action": "accept", "content": {"confirm": True}},
            }
            posted = await client.post(other_url, json=answer, headers=headers)
            assert posted.status_code == 202
            final = await anext(messages)
    assert final["id"] == 2
    assert final["result"]["structuredContent"] == {"confirmed": True, "action": "accept"}


async def test_a_question_left_unanswered_ends_the_call_with_an_error(ask_url):
    with asgi_server("daphne", {"MCP_CLIENT_REQUEST_TIMEOUT_SECONDS": "0.5"}) as base:
        url = f"{base}/mcp/{SLUG}"
        async with httpx.AsyncClient(timeout=30) as client:
            session_id = await open_session(client, url, capabilities=ELICITING)
            headers = {**JSON_HEADERS, "mcp-session-id": session_id}
            call = {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "ask_confirmation", "arguments": {"question": "Anyone?"}},
            }
            async with (
                asyncio.timeout(20),
                client.stream("POST", url, json=call, headers=headers) as response,
            ):
                received = [message async for message in sse_messages(response)]
    assert received[0]["method"] == "elicitation/create"
    assert received[-1]["result"]["isError"] is True
    assert "did not answer" in received[-1]["result"]["content"][0]["text"]


async def test_an_answer_to_another_sessions_question_reaches_nobody(ask_url):
    async with httpx.AsyncClient(timeout=30) as client:
        asker = await open_session(client, ask_url, capabilities=ELICITING)
        intruder = await open_session(client, ask_url, capabilities=ELICITING)
        headers = {**JSON_HEADERS, "mcp-session-id": asker}
        call = {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "ask_confirmation", "arguments": {"question": "Go?"}},
        }
        async with (
            asyncio.timeout(20),
            client.stream("POST", ask_url, json=call, headers=headers) as response,
        ):
            messages = sse_messages(response)
            question = await anext(messages)
            forged = {
                "jsonrpc": "2.0",
                "id": question["id"],
                "result": {"action": "accept", "content": {"confirm": True}},
            }
            await client.post(
                ask_url, json=forged, headers={**JSON_HEADERS, "mcp-session-id": intruder}
            )
            declined = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "decline"}}
            await client.post(ask_url, json=declined, headers=headers)
            final = await anext(messages)
    # Only the asking session's own answer counted.
    assert final["result"]["structuredContent"] == {"confirmed": False, "action": "decline"}
