"""The filter a 2026-07-28 ``subscriptions/listen`` stream acknowledges."""

from __future__ import annotations

from typing import Any

import mcp_types._v2026_07_28 as v2026
import pytest

from mcp_app.protocol.errors import InvalidParams
from mcp_app.protocol.handlers.subscriptions import acknowledgement, listen_filter


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
