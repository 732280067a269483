"""Progress and log notifications a running tool sends on its own request's stream."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mcp_app.protocol.context import RequestContext, ToolCallContext
from mcp_app.protocol.dispatch import handle_request

from .conftest import RecordingSend

MakeContext = Callable[..., RequestContext]


def progress(token: str | int, value: int, message: str | None = None) -> dict[str, object]:
    params: dict[str, object] = {"progressToken": token, "progress": value, "total": 3}
    if message is not None:
        params["message"] = message
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}


def log(step: int) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "info", "data": {"step": step}, "logger": "steps"},
    }


@pytest.mark.spec("2025-11-25", "basic/utilities/progress", "progress for the request's token")
async def test_progress_and_logs_reach_the_request_stream_in_order(
    make_ctx: MakeContext,
) -> None:
    send = RecordingSend()
    ctx = make_ctx("2026-07-28", send=send, progress_token="p1", log_level="info")
    result = await handle_request(ctx, "tools/call", {"name": "steps"})
    assert result["content"] == [{"type": "text", "text": "finished"}]
    assert send.messages == [
        progress("p1", 1, "step 1"), log(1),
        progress("p1", 2, "step 2"), log(2),
        progress("p1", 3, "step 3"), log(3),
    ]  # fmt: skip


@pytest.mark.spec("2024-11-05", "basic/utilities/progress", "no message field in 2024-11-05")
async def test_progress_has_no_message_for_2024_11_05(make_ctx: MakeContext) -> None:
    send = RecordingSend()
    ctx = make_ctx("2024-11-05", send=send, progress_token=7)
    await handle_request(ctx, "tools/call", {"name": "steps", "arguments": {"steps": 1}})
    assert send.messages == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": 7, "progress": 1, "total": 1},
        }
    ]


@pytest.mark.spec("2026-07-28", "server/utilities/logging", "no logLevel, no notifications/message")
async def test_nothing_is_sent_without_a_token_or_a_log_level(make_ctx: MakeContext) -> None:
    send = RecordingSend()
    await handle_request(make_ctx("2026-07-28", send=send), "tools/call", {"name": "steps"})
    assert send.messages == []


async def test_logs_below_the_minimum_level_are_dropped(make_ctx: MakeContext) -> None:
    send = RecordingSend()
    ctx = make_ctx("2025-11-25", send=send, log_level="debug")
    await handle_request(ctx, "tools/call", {"name": "steps", "arguments": {"steps": 1}})
    assert [m["params"]["level"] for m in send.messages] == ["info", "debug"]  # type: ignore[index]
    send.messages.clear()
    ctx = make_ctx("2025-11-25", send=send, log_level="error")
    await handle_request(ctx, "tools/call", {"name": "steps", "arguments": {"steps": 1}})
    assert send.messages == []


async def test_progress_that_does_not_increase_is_dropped(make_ctx: MakeContext) -> None:
    send = RecordingSend()
    tool_ctx = ToolCallContext(make_ctx(send=send, progress_token="t"), "x")
    assert await tool_ctx.progress(1) is True
    assert await tool_ctx.progress(1) is False
    assert await tool_ctx.progress(0.5) is False
    assert await tool_ctx.progress(2) is True
    assert [m["params"]["progress"] for m in send.messages] == [1, 2]  # type: ignore[index]


async def test_without_send_nothing_streams(make_ctx: MakeContext) -> None:
    tool_ctx = ToolCallContext(make_ctx(progress_token="t", log_level="debug"), "x")
    assert tool_ctx.can_stream is False
    assert await tool_ctx.progress(1) is False
    assert await tool_ctx.log("error", "x") is False
