"""mcp_first: /mcp/<slug> goes to the MCP consumer, everything else to the app behind it."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_app.transport import routing


class Behind:
    """The ASGI app mounted behind the MCP route (Django, in mcpsite/asgi.py)."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.paths.append(scope["path"])


async def call(app: Any, path: str, root_path: str = "") -> list[dict[str, Any]]:
    """Send one POST from a Host the consumer refuses before any lookup; return what came back."""
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": b"{}", "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop() if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "root_path": root_path,
        "query_string": b"",
        "headers": [(b"host", b"elsewhere.example"), (b"content-type", b"application/json")],
    }
    await app(scope, receive, send)
    return sent


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("path", "root_path"),
    [("/mcp/demo", ""), ("/mcp/a-b_9", ""), ("/prefix/mcp/demo", "/prefix")],
)
async def test_endpoint_paths_reach_the_consumer(path: str, root_path: str) -> None:
    behind = Behind()
    sent = await call(routing.mcp_first(behind), path, root_path)
    assert behind.paths == []
    assert sent[0]["status"] == 403
    assert b"Host not allowed" in sent[1]["body"]


@pytest.mark.parametrize(
    "path", ["/mcp/demo/", "/mcp/", "/mcp/de mo", "/mcp/a/b", "/audit/", "/healthz", "/xmcp/demo"]
)
async def test_other_paths_go_behind(path: str) -> None:
    behind = Behind()
    assert await call(routing.mcp_first(behind), path) == []
    assert behind.paths == [path]


async def test_non_http_scopes_go_behind() -> None:
    behind = Behind()
    await routing.mcp_first(behind)({"type": "lifespan", "path": "/mcp/demo"}, None, None)
    assert behind.paths == ["/mcp/demo"]
