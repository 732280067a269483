"""Drive the python SDK 1.x OAuth client against a live server; print what happened as JSON.

Run by tests/auth/test_oauth_sdk1.py with the interpreter of a separate virtual environment
holding ``mcp==1.30.*`` (it cannot share the project's, which has mcp 2.x):

    python sdk1_client.py <endpoint url> <username> <password> [<cimd client id>]

The 1.x shape differs from 2.x where it matters here: httpx instead of httpx2, a callback
returning ``(code, state)`` without ``iss``, ``ClientSession`` over the transport's streams,
and a step-up that asks for the challenged scopes only (no union with what was granted).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.support.headless import authorize  # noqa: E402

REDIRECT_URI = "http://127.0.0.1:3030/callback"


class Storage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


async def main(url: str, username: str, password: str, cimd_client_id: str | None) -> None:
    storage = Storage()
    authorize_urls: list[str] = []
    answers: list[dict[str, list[str]]] = []
    trace: list[tuple[str, str, int]] = []

    async def redirect_handler(authorization_url: str) -> None:
        authorize_urls.append(authorization_url)
        async with httpx.AsyncClient(timeout=10, follow_redirects=False) as http:
            answers.append(await authorize(http, authorization_url, username, password))

    async def callback_handler() -> tuple[str, str | None]:
        params = answers[-1]
        return params["code"][0], params.get("state", [None])[0]

    async def record(response: httpx.Response) -> None:
        trace.append((response.request.method, response.request.url.path, response.status_code))

    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            redirect_uris=[REDIRECT_URI],
            client_name="SDK 1.x client",
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
        client_metadata_url=cimd_client_id,
    )
    report: dict[str, Any] = {}
    async with (
        httpx.AsyncClient(auth=provider, event_hooks={"response": [record]}, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write, _session_id),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        report["tools"] = [tool.name for tool in (await session.list_tools()).tools]
        report["echo"] = (await session.call_tool("echo", {"message": "hi"})).content[0].text
        report["saved"] = (await session.call_tool("save_note", {"text": "x"})).content[0].text
        before = storage.tokens
        provider.context.token_expiry_time = time.time() - 1  # due for refresh
        report["after_refresh"] = (
            (await session.call_tool("echo", {"message": "again"})).content[0].text
        )
        after = storage.tokens
    report.update(
        authorize_urls=authorize_urls,
        trace=trace,
        scopes=sorted(after.scope.split()) if after and after.scope else [],
        rotated=bool(
            before
            and after
            and before.access_token != after.access_token
            and before.refresh_token != after.refresh_token
        ),
    )
    print(json.dumps(report))


if __name__ == "__main__":
    arguments = sys.argv[1:]
    asyncio.run(main(*arguments[:3], arguments[3] if len(arguments) > 3 else None))
