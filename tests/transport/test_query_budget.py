"""The hot path's database cost: a fixed, small number of queries, whatever the catalog size.

The consumer runs in-process under ``async_to_sync``, so its thread-sensitive ORM calls run on
this thread and ``django_assert_max_num_queries`` sees every one of them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import HttpCommunicator

from mcp_app.models import Tool
from mcpsite.asgi import application
from tests.support.catalog import make_endpoint

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def post(slug: str, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    all_headers = {
        "host": "127.0.0.1",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        **headers,
    }
    communicator = HttpCommunicator(
        application,
        "POST",
        f"/mcp/{slug}",
        body=json.dumps(body).encode(),
        headers=[(k.encode(), v.encode()) for k, v in all_headers.items()],
    )
    return async_to_sync(communicator.get_response)(timeout=10)


def modern(
    slug: str, method: str, params: dict[str, Any], name: str | None = None
) -> dict[str, Any]:
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": method}
    if name:
        headers["mcp-name"] = name
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": MODERN_META}}
    return post(slug, body, headers)


def catalog_of(slug: str, size: int) -> None:
    endpoint = make_endpoint(slug)
    tools = Tool.objects.bulk_create(
        Tool(name=f"t{i:03d}", description="Echo.", kind="python", config={"function": "echo"})
        for i in range(size)
    )
    endpoint.tools.add(*tools)


@pytest.mark.parametrize("size", [5, 50])
@pytest.mark.django_db(transaction=True)
def test_modern_list_and_call_need_one_query_once_the_snapshot_is_built(
    size, django_assert_max_num_queries
):
    slug = f"budget-{size}"
    catalog_of(slug, size)
    assert modern(slug, "tools/list", {})["status"] == 200  # builds and caches the snapshot
    with django_assert_max_num_queries(1):
        assert modern(slug, "tools/list", {})["status"] == 200
    with django_assert_max_num_queries(1):
        response = modern(
            slug, "tools/call", {"name": "t001", "arguments": {"message": "x"}}, name="t001"
        )
    assert json.loads(response["body"])["result"]["content"][0]["text"] == "x"


@pytest.mark.parametrize("size", [5, 50])
@pytest.mark.django_db(transaction=True)
def test_legacy_call_needs_two_queries(size, django_assert_max_num_queries):
    slug = f"budget-legacy-{size}"
    catalog_of(slug, size)
    init = post(
        slug,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "q", "version": "1"},
            },
        },
        {},
    )
    session_id = dict(init["headers"])[b"mcp-session-id"].decode()
    headers = {"mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "t002", "arguments": {"message": "y"}},
    }
    with django_assert_max_num_queries(2):  # the endpoint row and the session row
        response = post(slug, call, headers)
    assert json.loads(response["body"])["result"]["content"][0]["text"] == "y"
