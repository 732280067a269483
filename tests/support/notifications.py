"""What a client hears of catalog changes, for the tests of change notifications.

Two ways to listen to one session: ``get_stream`` holds a legacy session's GET stream open
with plain httpx and queues the JSON-RPC messages it carries; ``Notifications`` records the
methods an official ``mcp`` SDK client in the legacy era hands its message handler (the SDK
opens that GET stream on its own). ``events_until`` reads a 2026-07-28 ``listen()``
subscription up to a marker event. Every wait is bounded by the caller's ``asyncio.timeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
from mcp.client.subscriptions import PromptsListChanged

PROMPTS_CHANGED = "notifications/prompts/list_changed"


@asynccontextmanager
async def get_stream(
    client: httpx.AsyncClient, url: str, session_id: str
) -> AsyncIterator[asyncio.Queue[dict[str, Any]]]:
    """Open a session's GET stream; yield a queue of the JSON-RPC messages it carries."""
    headers = {"accept": "text/event-stream", "mcp-session-id": session_id}
    messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    async with client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200

        async def read() -> None:
            async for line in response.aiter_lines():
                if line.startswith("data:") and line[5:].strip():
                    messages.put_nowait(json.loads(line[5:]))

        reader = asyncio.create_task(read())
        try:
            yield messages
        finally:
            reader.cancel()


async def next_methods(messages: asyncio.Queue[dict[str, Any]], count: int) -> list[str]:
    """The methods of the next ``count`` messages of a ``get_stream`` queue (10 s at most)."""
    async with asyncio.timeout(10):
        return [(await messages.get())["method"] for _ in range(count)]


class Notifications:
    """The methods of the notifications a legacy-era SDK client received, in order: pass
    ``handler`` as the client's ``message_handler``."""

    def __init__(self) -> None:
        self.methods: list[str] = []
        self._arrived = asyncio.Event()

    async def handler(self, message: Any) -> None:
        if (method := getattr(message, "method", None)) is not None:
            self.methods.append(method)
            self._arrived.set()

    async def next(self, method: str) -> None:
        """Return once ``method`` is among the methods received (since the last ``clear``)."""
        while method not in self.methods:
            self._arrived.clear()
            await self._arrived.wait()

    def clear(self) -> None:
        self.methods.clear()

    async def wait_stream_open(
        self, touch: Callable[[], Awaitable[Any]], method: str = PROMPTS_CHANGED
    ) -> int:
        """Make a change with ``touch`` (one that sends ``method``) until ``method`` arrives:
        the SDK opens its GET stream on its own, so it is open once a change reaches it.
        Returns how many changes were made."""
        touches = 0
        while method not in self.methods:
            await touch()
            touches += 1
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1):
                    await self.next(method)
        return touches


async def events_until(
    subscription: AsyncIterator[Any], marker: type = PromptsListChanged
) -> list[type]:
    """The types of a ``listen()`` subscription's next events, up to and with a ``marker``."""
    events: list[type] = []
    while not events or events[-1] is not marker:
        events.append(type(await anext(subscription)))
    return events
