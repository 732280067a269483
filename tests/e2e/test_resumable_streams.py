"""2025-11-25 streams survive: priming, closing for polling, and GET + Last-Event-ID.

A dedicated server closes a call's stream after 0.3 s (MCP_SSE_POLL_AFTER_SECONDS); the
client resumes on the same or another process and gets exactly the events it missed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mcp_app.services.catalog_writes import endpoint_create, tool_create
from tests.support.live import asgi_server, flush_database
from tests.support.raw_mcp import JSON_HEADERS, open_session, sse_events

pytestmark = pytest.mark.django_db

SLUG = "resume"
POLLING = {"MCP_SSE_POLL_AFTER_SECONDS": "0.3", "MCP_SSE_RETRY_MS": "50"}


@pytest.fixture(scope="module")
def servers(django_db_setup: None, django_db_blocker: Any) -> Iterator[tuple[str, str]]:
    with django_db_blocker.unblock():
        endpoint = endpoint_create(slug=SLUG, auth_mode="public")
        tool_create(
            name="sleep_with_progress",
            kind="python",
            config={"function": "sleep_with_progress"},
            endpoints=[endpoint],
        )
    with asgi_server("daphne", POLLING) as first, asgi_server("uvicorn", POLLING) as second:
        yield f"{first}/mcp/{SLUG}", f"{second}/mcp/{SLUG}"
    flush_database(django_db_blocker)


async def session_headers(client: httpx.AsyncClient, url: str, version: str) -> dict[str, str]:
    session_id = await open_session(client, url, version=version)
    return {**JSON_HEADERS, "mcp-session-id": session_id, "mcp-protocol-version": version}


def slow_call(request_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {
            "name": "sleep_with_progress",
            "arguments": {"seconds": 1.2, "steps": 4},
            "_meta": {"progressToken": "p"},
        },
    }


async def first_connection(
    client: httpx.AsyncClient, url: str, headers: dict[str, str]
) -> list[dict[str, Any]]:
    async with client.stream("POST", url, json=slow_call(), headers=headers) as response:
        assert response.headers["content-type"] == "text/event-stream"
        return [event async for event in sse_events(response)]


async def resume(
    client: httpx.AsyncClient, url: str, headers: dict[str, str], last_id: str
) -> list[dict[str, Any]]:
    get_headers = {
        "accept": "text/event-stream",
        "mcp-session-id": headers["mcp-session-id"],
        "last-event-id": last_id,
    }
    async with client.stream("GET", url, headers=get_headers) as response:
        assert response.status_code == 200
        return [event async for event in sse_events(response)]


@pytest.mark.spec(
    "2025-11-25", "basic/transports", "priming event, retry, resume with Last-Event-ID"
)
@pytest.mark.parametrize("resume_on", ["same", "other"])
async def test_a_closed_stream_resumes_with_exactly_the_missed_events(servers, resume_on):
    first_url, second_url = servers
    async with asyncio.timeout(20), httpx.AsyncClient(timeout=30) as client:
        headers = await session_headers(client, first_url, "2025-11-25")
        before = await first_connection(client, first_url, headers)
        after = await resume(
            client, first_url if resume_on == "same" else second_url, headers, before[-1]["id"]
        )
    priming = before[0]
    assert priming["data"] == "" and priming["retry"] == "50" and priming["id"].endswith(".0")
    delivered = before[1:] + after
    messages = [json.loads(event["data"]) for event in delivered]
    assert [m.get("params", {}).get("progress") for m in messages[:-1]] == [1, 2, 3, 4]
    assert messages[-1]["id"] == 1 and "result" in messages[-1]
    ids = [event["id"] for event in delivered]
    assert len(ids) == len(set(ids)), "an event was delivered twice"
    assert after, "the stream ended before the result, so the resume must carry it"


async def test_a_2025_06_18_session_gets_no_priming_event(servers):
    first_url, _ = servers
    async with asyncio.timeout(20), httpx.AsyncClient(timeout=30) as client:
        headers = await session_headers(client, first_url, "2025-06-18")
        received = await first_connection(client, first_url, headers)
    # Older clients cannot parse an event with empty data: no priming, no early close.
    assert all(event.get("data") for event in received)
    assert json.loads(received[-1]["data"])["id"] == 1


async def test_another_sessions_stream_is_not_replayed(servers):
    first_url, _ = servers
    async with asyncio.timeout(20), httpx.AsyncClient(timeout=30) as client:
        owner = await session_headers(client, first_url, "2025-11-25")
        stranger = await session_headers(client, first_url, "2025-11-25")
        before = await first_connection(client, first_url, owner)
        response = await client.get(
            first_url,
            headers={
                "accept": "text/event-stream",
                "mcp-session-id": stranger["mcp-session-id"],
                "last-event-id": before[-1]["id"],
            },
        )
    assert response.status_code == 404


async def test_a_malformed_last_event_id_is_400(servers):
    first_url, _ = servers
    async with httpx.AsyncClient(timeout=30) as client:
        headers = await session_headers(client, first_url, "2025-11-25")
        response = await client.get(
            first_url,
            headers={
                "accept": "text/event-stream",
                "mcp-session-id": headers["mcp-session-id"],
                "last-event-id": "not an id",
            },
        )
    assert response.status_code == 400
