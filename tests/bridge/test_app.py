"""The bridge's ASGI app driven in process (httpx's ASGI transport), with real child processes:
what it answers when a program does not start."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx

from mcp_app.bridge.app import Bridge, LaunchRefused
from mcp_app.bridge.servers import SECRET_HEADER, Launch

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "test", "version": "1"}},
}  # fmt: skip
# Reads its stdin to the end and never answers.
SILENT = (sys.executable, "-c", "import sys; sys.stdin.read()")


def bridge(argv: tuple[str, ...], tmp_path: Path, children: int = 100, **kwargs: float) -> Bridge:
    async def launcher(name: str) -> Launch:
        if name != "up":
            raise LaunchRefused(f"There is no stdio upstream named {name!r}.")
        return Launch(upstream=name, argv=argv, env={}, cwd=str(tmp_path), max_children=children)

    return Bridge(secret="s", launcher=launcher, **kwargs)


async def post(app: Bridge, path: str = "/up/mcp") -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bridge") as http:
        return await http.post(path, json=INITIALIZE, headers={SECRET_HEADER: "s"})


async def test_a_program_that_never_answers_initialize_is_stopped_and_backed_off(
    tmp_path: Path,
) -> None:
    app = bridge(SILENT, tmp_path, start_seconds=0.5)
    async with asyncio.timeout(30):
        first = await post(app)
        second = await post(app)
    assert first.json()["error"]["message"] == (
        "The stdio server of upstream 'up' did not answer initialize within 0.5 s."
    )
    assert "failed to start 1 time(s) in a row" in second.json()["error"]["message"]
    assert app.sessions == {}


async def test_a_program_that_cannot_be_found_is_a_failed_start(tmp_path: Path) -> None:
    app = bridge(("/nonexistent/program",), tmp_path)
    async with asyncio.timeout(30):
        response = await post(app)
    assert (
        "exited before it answered initialize (exit status 127)"
        in (response.json()["error"]["message"])
    )


async def test_an_unknown_upstream_is_refused_with_the_launchers_reason(tmp_path: Path) -> None:
    app = bridge(SILENT, tmp_path)
    async with asyncio.timeout(30):
        response = await post(app, "/other/mcp")
    assert response.json()["error"]["message"] == "There is no stdio upstream named 'other'."
    assert "mcp-session-id" not in response.headers


async def test_concurrent_starts_never_pass_the_child_limit(tmp_path: Path) -> None:
    app = bridge(SILENT, tmp_path, children=1, start_seconds=1.0)
    async with asyncio.timeout(30):
        answers = await asyncio.gather(*(post(app) for _ in range(3)))
    messages = sorted(answer.json()["error"]["message"] for answer in answers)
    assert messages[0] == "The stdio server of upstream 'up' did not answer initialize within 1 s."
    assert messages[1:] == ["The upstream 'up' has 1 sessions open, its limit; try again once "
                            "one ends."] * 2  # fmt: skip
