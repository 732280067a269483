"""The same application under uvicorn: the SDK client in both eras, streaming included.

The code must run unchanged under Daphne (the default) and uvicorn (the faster server here);
which one production uses is a deployment choice measured by bench/run.py.
"""

from __future__ import annotations

import asyncio

import pytest
from mcp import Client

pytestmark = pytest.mark.django_db


async def test_uvicorn_serves_calls_and_progress_in_both_eras(e2e_url, uvicorn_server_url, mode):
    url = e2e_url.replace(e2e_url.split("/mcp/")[0], uvicorn_server_url)
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with asyncio.timeout(20), Client(url, mode=mode) as client:
        added = await client.call_tool("add", {"a": 1, "b": 2})
        slept = await client.call_tool(
            "sleep_with_progress", {"seconds": 0.1, "steps": 2}, progress_callback=on_progress
        )
    assert added.structured_content == {"sum": 3}
    assert not slept.is_error
    assert progress == [1, 2]
