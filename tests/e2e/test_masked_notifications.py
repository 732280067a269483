"""A mask policy covers what a tool call tells the client while it runs, not only its result:
its progress messages and log lines (both eras, the official SDK client against a live Daphne
process). The mask's patterns here are the operator's own (``extra``), aimed at the words the
built-in ``sleep_with_progress`` tool sends, so the test needs no tool of its own.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning

from mcp_app.models import CallLog, Policy
from mcp_app.services.policies.writes import policy_save
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.live import flush_database
from tests.support.waiting import await_until

pytestmark = pytest.mark.django_db

SLUG = "masked-notifications"
MASK = {"patterns": ["email"], "extra": {"step": r"Step \d+", "sleeping": r"Sleeping"}}


@pytest.fixture(scope="module")
def url(live_server_url: str, django_db_blocker: Any) -> Iterator[str]:
    with django_db_blocker.unblock():
        endpoint = make_endpoint(SLUG)
        endpoint.tools.add(make_python_tool("sleep_with_progress", "sleep_with_progress"))
        policy = Policy(endpoint=endpoint, name="mask-chatter", kind="mask", config=MASK)
        policy_save(policy, actor=None, source="test")
    yield f"{live_server_url}/mcp/{SLUG}"
    flush_database(django_db_blocker)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_progress_messages_and_log_lines_are_masked(url: str, mode: str) -> None:
    progress: list[str | None] = []
    logged: list[Any] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async def on_log(params: Any) -> None:
        logged.append(params.data)

    last = await CallLog.objects.order_by("-id").afirst()
    before = last.pk if last is not None else 0
    options: dict[str, Any] = {"log_level": "info"} if mode != "legacy" else {}
    async with (
        asyncio.timeout(30),
        Client(url, mode=mode, logging_callback=on_log, **options) as client,
    ):
        if mode == "legacy":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.set_logging_level("info")
        result = await client.call_tool(
            "sleep_with_progress", {"seconds": 0, "steps": 2}, progress_callback=on_progress
        )
    assert not result.is_error
    assert progress == ["[masked:step] of 2", "[masked:step] of 2"]
    assert logged == ["[masked:sleeping] 0 s in 2 steps", "Done sleeping"]

    # Written by the server's writer thread: waited for, within a bound.
    row = await await_until(
        lambda: CallLog.objects.filter(
            endpoint_slug=SLUG, rpc_method="tools/call", pk__gt=before
        ).afirst(),
        "the call's call-log row",
    )
    # Recorded once for the call, not once per notification.
    decisions = [d for d in row.policy_decisions if d["phase"] == "notification"]
    assert [(d["policy"], d["action"], d["applied"]) for d in decisions] == [
        ("mask-chatter", "masked", True)
    ]
