"""URL routing for MCP endpoints, mounted by mcpsite/asgi.py ahead of everything else.

``/mcp/<slug>`` is matched here with one regular expression rather than by Channels'
``URLRouter`` (a Django URL resolver walk per request): the MCP path is the hot one, and
everything else still goes through the router it is given.
"""

from __future__ import annotations

import re
from typing import Any

from mcp_app.transport.consumer import StreamableHttpConsumer

# No trailing slash: the endpoint URL is exactly /mcp/<slug> (Django's "slug" converter).
_MCP_PATH = re.compile(r"/mcp/([-a-zA-Z0-9_]+)")

AsgiApp = Any


def mcp_first(fallback: AsgiApp) -> AsgiApp:
    """An ASGI app serving ``/mcp/<slug>`` itself and handing every other request on."""
    consumer = StreamableHttpConsumer.as_asgi()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            root = scope.get("root_path", "")
            if root and path.startswith(root):
                path = path[len(root) :]
            match = _MCP_PATH.fullmatch(path)
            if match is not None:
                scope["url_route"] = {"args": (), "kwargs": {"slug": match[1]}}
                await consumer(scope, receive, send)
                return
        await fallback(scope, receive, send)

    return app
