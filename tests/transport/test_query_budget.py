"""The hot path's database cost: no query at all in steady state, whatever the catalog size.

The consumer runs in-process; its ORM calls run on asgiref's thread pool, so queries are
counted in every thread (tests/support/queries.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from mcp_app.models import Tool
from mcp_app.services import invalidation
from mcp_app.services.sessions import clear_session_cache
from tests.support.catalog import make_endpoint
from tests.support.inprocess import Answer, acall, encode_headers
from tests.support.queries import all_threads_queries, own_pushes_settled

# The invalidation subscription drops every cached entry when it (re)subscribes, as pushes may
# have been missed before: it must be live before a cache is filled and counted.
SUBSCRIBE_SECONDS = 10.0

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture(autouse=True)
def _subscribed() -> None:
    assert invalidation.wait_subscribed(SUBSCRIBE_SECONDS)


def post(slug: str, body: dict[str, Any] | list[dict[str, Any]], headers: dict[str, str]) -> Answer:
    all_headers = {
        "host": "127.0.0.1",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        **headers,
    }
    return async_to_sync(acall)(
        f"/mcp/{slug}", json.dumps(body).encode(), encode_headers(all_headers)
    )


def initialize(slug: str, version: str, headers: dict[str, str] | None = None) -> str:
    """Open a legacy session (sending ``headers`` too); return its id."""
    params = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "q", "version": "1"},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    answer = post(slug, body, headers or {})
    session_id = answer.header("mcp-session-id")
    assert session_id, answer.body
    return session_id


def modern(
    slug: str, method: str, params: dict[str, Any], name: str | None = None
) -> dict[str, Any]:
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": method}
    if name:
        headers["mcp-name"] = name
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": MODERN_META}}
    return post(slug, body, headers)


def catalog_of(slug: str, size: int) -> None:
    with own_pushes_settled():
        endpoint = make_endpoint(slug)
        tools = Tool.objects.bulk_create(
            Tool(name=f"t{i:03d}", description="Echo.", kind="python", config={"function": "echo"})
            for i in range(size)
        )
        endpoint.tools.add(*tools)


@pytest.mark.parametrize("size", [5, 50])
@pytest.mark.django_db(transaction=True)
def test_modern_list_and_call_need_no_query_once_the_endpoint_is_cached(size):
    slug = f"budget-{size}"
    catalog_of(slug, size)
    assert modern(slug, "tools/list", {}).status == 200  # builds and caches the snapshot
    with all_threads_queries() as listing:
        assert modern(slug, "tools/list", {}).status == 200
    with all_threads_queries() as calling:
        response = modern(
            slug, "tools/call", {"name": "t001", "arguments": {"message": "x"}}, name="t001"
        )
    assert response.json()["result"]["content"][0]["text"] == "x"
    assert (len(listing), len(calling)) == (0, 0), (listing.statements, calling.statements)


@pytest.mark.parametrize("size", [5, 50])
@pytest.mark.django_db(transaction=True)
def test_legacy_call_needs_no_query_once_the_session_is_cached(size):
    slug = f"budget-legacy-{size}"
    catalog_of(slug, size)
    session_id = initialize(slug, "2025-11-25")
    headers = {"mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "t002", "arguments": {"message": "y"}},
    }
    with all_threads_queries() as queries:
        response = post(slug, call, headers)
    assert response.json()["result"]["content"][0]["text"] == "y"
    # The session opened in this process is held in memory; last_seen_at is not rewritten
    # within a minute.
    assert len(queries) == 0, queries.statements


@pytest.mark.django_db(transaction=True)
def test_a_session_opened_elsewhere_costs_one_query_then_none():
    slug = "budget-elsewhere"
    catalog_of(slug, 5)
    session_id = initialize(slug, "2025-06-18")
    # As if another process had opened it: this one has never seen the session.
    clear_session_cache()
    headers = {"mcp-session-id": session_id, "mcp-protocol-version": "2025-06-18"}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}

    with all_threads_queries() as first:
        assert post(slug, call, headers).status == 200
    with all_threads_queries() as second:
        assert post(slug, call, headers).status == 200

    assert (len(first), len(second)) == (1, 0), (first.statements, second.statements)
