"""Policies cost a call no query: the catalog snapshot carries them, prepared.

As tests/transport/test_query_budget.py measures the hot path, here for an endpoint with a
mask, a deny and a size-cap policy: once the snapshot is cached, a tools/call whose result is
masked and logged runs no query in any thread.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from mcp_app.models import Policy
from mcp_app.services import invalidation
from mcp_app.services.policies.writes import policy_save
from tests.support.catalog import echo_schema, make_endpoint, make_python_tool
from tests.support.inprocess import acall, encode_headers
from tests.support.queries import all_threads_queries, own_pushes_settled

SUBSCRIBE_SECONDS = 10.0
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _call(slug: str, message: str) -> dict[str, Any]:
    headers = {
        "host": "127.0.0.1",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "echo",
    }
    params = {"name": "echo", "arguments": {"message": message}, "_meta": META}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    answer = async_to_sync(acall)(
        f"/mcp/{slug}", json.dumps(body).encode(), encode_headers(headers)
    )
    assert answer.status == 200, answer.body
    result: dict[str, Any] = answer.json()["result"]
    return result


@pytest.mark.django_db(transaction=True)
def test_a_call_through_three_policies_needs_no_query_once_cached() -> None:
    assert invalidation.wait_subscribed(SUBSCRIBE_SECONDS)
    with own_pushes_settled():
        endpoint = make_endpoint("budget-policies")
        endpoint.tools.add(make_python_tool("echo", "echo", input_schema=echo_schema()))
        for position, (kind, config) in enumerate(
            [("mask", {}), ("deny", {"patterns": ["forbidden"]}), ("max_result_size",
                                                                   {"max_bytes": 4096})]
        ):  # fmt: skip
            policy = Policy(
                endpoint=endpoint, name=kind, kind=kind, position=position, config=config
            )
            policy_save(policy, actor=None, source="test")
    _call("budget-policies", "warm up")  # builds and caches the snapshot
    with all_threads_queries() as calling:
        result = _call("budget-policies", "mail ann@example.com")
    assert result["content"][0]["text"] == "mail [masked:email]"
    assert len(calling) == 0, calling.statements
