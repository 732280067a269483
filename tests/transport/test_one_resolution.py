"""A request is resolved once: its target and its tool are found by inbound classification.

Inbound classification returns one value (``inbound.Resolved``: era, envelope, target, the
tool's definition) that the scope check, the limits, dispatch, the tools/call handler and
the call log take, instead of each finding the target and looking the tool up again. These
tests count the lookups of one warm ``tools/call`` in each era, by wrapping the two functions
that do them (each call still goes through).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from mcp_app.protocol import methods
from mcp_app.protocol.catalog import CatalogSnapshot
from tests.support.catalog import echo_schema, make_endpoint, make_python_tool
from tests.transport.test_query_budget import initialize, modern, post


@dataclass
class Lookups:
    targets: list[str | None] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> Iterator[Lookups]:
    seen = Lookups()
    target_of = methods.target_of
    tool = CatalogSnapshot.tool

    def counted_target_of(method: str, params: Any) -> str | None:
        found = target_of(method, params)
        seen.targets.append(found)
        return found

    def counted_tool(self: CatalogSnapshot, name: str) -> Any:
        seen.tools.append(name)
        return tool(self, name)

    # Every module that imported the function by name gets the counting one.
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("mcp_app") and (
            getattr(module, "target_of", None) is target_of
        ):
            monkeypatch.setattr(module, "target_of", counted_target_of)
    monkeypatch.setattr(CatalogSnapshot, "tool", counted_tool)
    yield seen


def _endpoint(slug: str) -> None:
    endpoint = make_endpoint(slug)
    endpoint.tools.add(make_python_tool("echo", "echo", input_schema=echo_schema()))


@pytest.mark.django_db(transaction=True)
def test_a_modern_call_finds_its_target_and_tool_once(lookups: Lookups) -> None:
    _endpoint("resolved-modern")
    assert modern("resolved-modern", "tools/list", {}).status == 200  # caches the snapshot
    lookups.targets.clear()
    lookups.tools.clear()
    answer = modern(
        "resolved-modern", "tools/call", {"name": "echo", "arguments": {"message": "x"}}, "echo"
    )
    assert answer.json()["result"]["content"][0]["text"] == "x"
    assert (lookups.targets, lookups.tools) == (["echo"], ["echo"])


@pytest.mark.django_db(transaction=True)
def test_a_legacy_call_finds_its_target_and_tool_once(lookups: Lookups) -> None:
    _endpoint("resolved-legacy")
    session_id = initialize("resolved-legacy", "2025-11-25")
    headers = {"mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": "y"}},
    }
    lookups.targets.clear()
    lookups.tools.clear()
    answer = post("resolved-legacy", call, headers)
    assert answer.json()["result"]["content"][0]["text"] == "y"
    assert (lookups.targets, lookups.tools) == (["echo"], ["echo"])
