"""Dispatch: which methods exist in which era, the modern envelope, notifications, setLevel."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.dispatch import handle_notification, handle_request, known_methods
from mcp_app.protocol.errors import InvalidParams, InvalidRequest, MethodNotFound
from mcp_app.protocol.versions import Era

from .conftest import InMemorySessionStore

MakeContext = Callable[..., RequestContext]
LEGACY_ONLY = ("ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe")


def test_known_methods_per_era() -> None:
    common = {
        "tools/list", "tools/call", "resources/list", "resources/templates/list",
        "resources/read", "prompts/list", "prompts/get", "completion/complete",
    }  # fmt: skip
    legacy_tasks = {"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"}
    modern_tasks = {"tasks/get", "tasks/update", "tasks/cancel"}
    assert known_methods(Era.LEGACY) == common | {"initialize", *LEGACY_ONLY} | legacy_tasks
    assert (
        known_methods(Era.MODERN)
        == common
        | {
            "server/discover",
            "subscriptions/listen",
        }
        | modern_tasks
    )


@pytest.mark.spec("2026-07-28", "basic/lifecycle", "removed methods are unknown")
@pytest.mark.parametrize("method", LEGACY_ONLY)
async def test_legacy_only_methods_are_not_found_for_modern_requests(
    make_ctx: MakeContext, method: str
) -> None:
    with pytest.raises(MethodNotFound):
        await handle_request(make_ctx("2026-07-28"), method, {"level": "info", "uri": "x"})


async def test_discover_is_not_found_for_legacy_sessions(make_ctx: MakeContext) -> None:
    with pytest.raises(MethodNotFound):
        await handle_request(make_ctx("2025-11-25"), "server/discover", None)


@pytest.mark.parametrize("method", ["tasks/update", "sampling/createMessage", "nope", ""])
async def test_unknown_methods_are_not_found(make_ctx: MakeContext, method: str) -> None:
    with pytest.raises(MethodNotFound):
        await handle_request(make_ctx(), method, None)


async def test_modern_initialize_is_method_not_found(make_ctx: MakeContext) -> None:
    with pytest.raises(MethodNotFound):
        await handle_request(make_ctx("2026-07-28"), "initialize", {})


@pytest.mark.parametrize(
    ("version", "method"),
    [("2025-11-25", "initialize"), ("2026-07-28", "subscriptions/listen")],
)
async def test_transport_served_methods_are_refused_by_dispatch(
    make_ctx: MakeContext, version: str, method: str
) -> None:
    with pytest.raises(InvalidRequest):
        await handle_request(make_ctx(version), method, {})


async def test_params_are_validated_before_the_handler_runs(make_ctx: MakeContext) -> None:
    with pytest.raises(InvalidParams):
        await handle_request(make_ctx(), "tools/list", {"cursor": ["x"]})


@pytest.mark.spec("2025-11-25", "server/utilities/logging", "logging/setLevel stores a level")
async def test_set_level_is_stored_on_the_session(
    make_ctx: MakeContext, session_store: InMemorySessionStore
) -> None:
    ctx = make_ctx("2025-03-26")
    assert await handle_request(ctx, "logging/setLevel", {"level": "warning"}) == {}
    assert session_store.log_levels == {"s-1": "warning"}
    # The level is the session's (its next requests are built with it), not this request's.
    assert ctx.session is not None and ctx.session.log_level == "warning"
    assert ctx.log_level is None


@pytest.mark.spec("2025-11-25", "server/utilities/logging", "invalid log level: -32602")
@pytest.mark.parametrize("params", [{"level": "verbose"}, {"level": 3}, {}])
async def test_invalid_level_is_invalid_params(
    make_ctx: MakeContext, session_store: InMemorySessionStore, params: dict[str, object]
) -> None:
    with pytest.raises(InvalidParams):
        await handle_request(make_ctx(), "logging/setLevel", params)
    assert session_store.log_levels == {}


async def test_set_level_without_a_session_is_an_invalid_request(make_ctx: MakeContext) -> None:
    with pytest.raises(InvalidRequest):
        await handle_request(
            make_ctx(session=None, sessions=None), "logging/setLevel", {"level": "info"}
        )


@pytest.mark.parametrize(
    "method",
    [
        "notifications/initialized",
        "notifications/cancelled",
        "notifications/roots/list_changed",
        "notifications/unknown",
    ],
)
async def test_notifications_are_accepted_or_ignored_without_error(
    make_ctx: MakeContext, method: str
) -> None:
    assert await handle_notification(make_ctx(), method, {"requestId": 1}) is None
