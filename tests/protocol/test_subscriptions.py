"""The filter a 2026-07-28 ``subscriptions/listen`` stream acknowledges."""

from __future__ import annotations

from typing import Any

import mcp_types._v2026_07_28 as v2026
import pytest

from mcp_app.protocol.errors import InvalidParams
from mcp_app.protocol.handlers.subscriptions import (
    SUBSCRIPTION_ID_KEY,
    acknowledgement,
    list_changed_notifications,
    listen_filter,
    resource_updated_notifications,
)


@pytest.mark.spec("2026-07-28", "basic/patterns/subscriptions", "acknowledge the honoured subset")
def test_only_requested_kinds_are_honoured() -> None:
    params = {
        "notifications": {
            "toolsListChanged": True,
            "promptsListChanged": False,
            "resourceSubscriptions": ["file:///a", "file:///a", "file:///b"],
            "taskIds": ["t1"],
        }
    }
    assert listen_filter(params) == {
        "toolsListChanged": True,
        "resourceSubscriptions": ["file:///a", "file:///b"],
    }


@pytest.mark.parametrize(
    "params",
    [None, {}, {"notifications": []}, {"notifications": {"toolsListChanged": "yes"}},
     {"notifications": {"resourceSubscriptions": "file:///a"}}],
)  # fmt: skip
def test_malformed_filter_is_invalid_params(params: dict[str, Any] | None) -> None:
    with pytest.raises(InvalidParams):
        listen_filter(params)


def test_acknowledgement_carries_the_subscription_id() -> None:
    frame = acknowledgement(9, {"toolsListChanged": True})
    v2026.SubscriptionsAcknowledgedNotification.model_validate(frame)
    assert frame["params"] == {
        "notifications": {"toolsListChanged": True},
        "_meta": {"io.modelcontextprotocol/subscriptionId": 9},
    }


def test_a_legacy_stream_gets_every_changed_list() -> None:
    frames = list_changed_notifications(["tools", "prompts"])
    assert frames == [
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}},
        {"jsonrpc": "2.0", "method": "notifications/prompts/list_changed", "params": {}},
    ]


@pytest.mark.spec("2026-07-28", "basic/patterns/subscriptions", "MUST NOT send unrequested kinds")
def test_a_listen_stream_gets_only_opted_in_lists_tagged_with_its_id() -> None:
    honoured = listen_filter({"notifications": {"promptsListChanged": True}})
    frames = list_changed_notifications(
        ["tools", "prompts", "resources"], honoured=honoured, subscription_id="listen-1"
    )
    assert frames == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/prompts/list_changed",
            "params": {"_meta": {SUBSCRIPTION_ID_KEY: "listen-1"}},
        }
    ]


def test_resource_updates_go_only_to_streams_that_subscribed() -> None:
    assert resource_updated_notifications("a://x", ["a://y"]) == []
    assert resource_updated_notifications("a://x", ["a://x"], subscription_id=3) == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": "a://x", "_meta": {SUBSCRIPTION_ID_KEY: 3}},
        }
    ]


def test_unknown_kinds_produce_no_frames() -> None:
    assert list_changed_notifications(["tasks"]) == []
