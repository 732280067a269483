"""The official ``mcp`` SDK (2.x) client, knowing only the endpoint URL, against a real server.

It discovers everything from the 401, registers (DCR, or CIMD with the stub fetcher), signs a
user in through the real login and consent pages (driven headlessly over HTTP), exchanges the
code, calls tools, steps up to a write scope on 403, and refreshes with rotation; a replayed
refresh token revokes the whole family.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import pytest
from asgiref.sync import sync_to_async
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata
from oauth2_provider.models import Application

from tests.auth.conftest import PASSWORD, SLUG, LiveSite
from tests.support.oauth import (
    CIMD_CLIENT_ID,
    REDIRECT_URI,
    HeadlessUser,
    MemoryStorage,
    issue_token,
)
from tests.support.raw_mcp import JSON_HEADERS, open_session

pytestmark = pytest.mark.django_db

MODES = ["legacy", "2026-07-28"]


@dataclass
class Session:
    """One SDK client's OAuth state and the trace of every HTTP exchange it made."""

    user: HeadlessUser
    storage: MemoryStorage
    provider: OAuthClientProvider
    trace: list[tuple[str, str, int]] = field(default_factory=list)

    def paths(self) -> list[tuple[str, str, int]]:
        return [(method, path, status) for method, path, status in self.trace]


def make_session(
    site: LiveSite, username: str = "bob", *, public: bool = False, cimd: bool = False
) -> Session:
    user = HeadlessUser(username, PASSWORD)
    storage = MemoryStorage()
    metadata = OAuthClientMetadata(
        redirect_uris=[REDIRECT_URI],
        client_name="SDK end-to-end client",
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none" if public or cimd else None,
    )
    provider = OAuthClientProvider(
        server_url=site.notes_url,
        client_metadata=metadata,
        storage=storage,
        redirect_handler=user.redirect_handler,
        callback_handler=user.callback_handler,
        client_metadata_url=CIMD_CLIENT_ID if cimd else None,
    )
    return Session(user, storage, provider)


@asynccontextmanager
async def connected(site: LiveSite, session: Session, mode: str) -> AsyncIterator[Client]:
    async def record(response: Any) -> None:
        request = response.request
        session.trace.append((request.method, request.url.path, response.status_code))

    async with (
        asyncio.timeout(60),
        httpx2.AsyncClient(auth=session.provider, event_hooks={"response": [record]}) as http,
        Client(streamable_http_client(site.notes_url, http_client=http), mode=mode) as client,
    ):
        yield client


def authorize_query(url: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlsplit(url).query).items()}


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_that_knows_only_the_url_registers_signs_in_and_calls_tools(
    live_site: LiveSite, mode: str
):
    session = make_session(live_site)

    async with connected(live_site, session, mode) as client:
        tools = await client.list_tools()
        echoed = await client.call_tool("echo", {"message": "hello"})

    assert [tool.name for tool in tools.tools] == ["echo", "save_note"]
    assert echoed.content[0].text == "hello"
    trace = session.paths()
    assert trace[0][2] == 401
    assert ("GET", f"/.well-known/oauth-protected-resource/mcp/{SLUG}", 200) in trace
    assert ("GET", "/.well-known/oauth-authorization-server", 200) in trace
    assert ("POST", "/o/register/", 201) in trace
    assert ("POST", "/o/token/", 200) in trace
    (url,) = session.user.authorize_urls
    query = authorize_query(url)
    assert query["code_challenge_method"] == "S256"
    assert query["resource"] == live_site.notes_url
    assert query["scope"] == "mcp:read"
    assert any("Allow SDK end-to-end client?" in page for page in session.user.pages)


async def test_a_cimd_client_needs_no_registration(live_site: LiveSite):
    session = make_session(live_site, cimd=True)

    async with connected(live_site, session, "legacy") as client:
        result = await client.call_tool("echo", {"message": "by url"})

    assert result.content[0].text == "by url"
    assert not any(path == "/o/register/" for _, path, _ in session.trace)
    assert authorize_query(session.user.authorize_urls[0])["client_id"] == CIMD_CLIENT_ID
    application = await Application.objects.aget(client_id=CIMD_CLIENT_ID)
    assert application.registration_source == Application.RegistrationSource.CIMD
    assert any("Stub CIMD client" in page for page in session.user.pages)


@pytest.mark.parametrize("mode", MODES)
async def test_a_write_tool_steps_up_to_the_write_scope_with_a_second_consent(
    live_site: LiveSite, mode: str
):
    session = make_session(live_site)

    async with connected(live_site, session, mode) as client:
        await client.call_tool("echo", {"message": "read first"})
        saved = await client.call_tool("save_note", {"text": "draft"})

    assert saved.content[0].text == "Saved draft"
    first, second = session.user.authorize_urls
    assert authorize_query(first)["scope"] == "mcp:read"
    assert set(authorize_query(second)["scope"].split()) == {"mcp:read", "mcp:write"}
    assert ("POST", f"/mcp/{SLUG}", 403) in session.paths()
    assert set(session.storage.tokens.scope.split()) == {"mcp:read", "mcp:write"}


async def test_refresh_rotates_both_tokens_and_a_replayed_refresh_token_revokes_the_family(
    live_site: LiveSite,
):
    session = make_session(live_site, public=True)
    async with connected(live_site, session, "legacy") as client:
        await client.call_tool("echo", {"message": "one"})
        first = session.storage.tokens
        session.provider.context.token_expiry_time = time.time() - 1  # due for refresh
        await client.call_tool("echo", {"message": "two"})
        second = session.storage.tokens

    assert len(session.user.authorize_urls) == 1  # refreshed without asking the user
    assert second.access_token != first.access_token
    assert second.refresh_token != first.refresh_token
    client_id = session.storage.client_info.client_id
    async with httpx.AsyncClient(timeout=10) as http:
        replay = await http.post(
            f"{live_site.base_url}/o/token/",
            data={
                "grant_type": "refresh_token",
                "refresh_token": first.refresh_token,
                "client_id": client_id,
            },
        )
        after = await http.post(
            live_site.notes_url,
            headers={**JSON_HEADERS, "authorization": f"Bearer {second.access_token}"},
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        )
    assert replay.status_code == 400
    assert json.loads(replay.content)["error"] == "invalid_grant"
    assert after.status_code == 401
    assert 'error="invalid_token"' in after.headers["www-authenticate"]


async def test_a_listening_stream_ends_when_its_token_expires(live_site: LiveSite):
    token = await _token(live_site, expires_in=5)
    auth = {"authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=20, headers=auth) as http:
        session_id = await open_session(http, live_site.notes_url)
        headers = {
            "accept": "text/event-stream",
            "mcp-session-id": session_id,
            "mcp-protocol-version": "2025-11-25",
        }
        async with (
            asyncio.timeout(20),
            http.stream("GET", live_site.notes_url, headers=headers) as stream,
        ):
            assert stream.status_code == 200
            async for _line in stream.aiter_lines():
                pass  # keep-alives until the server ends the stream
        again = await http.get(live_site.notes_url, headers=headers)
    assert again.status_code == 401


async def _token(site: LiveSite, *, expires_in: float) -> str:
    """A token the live server can see: issued on a worker thread, outside the test's
    transaction, so it is committed (the module's flush removes it)."""
    return await sync_to_async(issue_token)(
        site.catalog.bob, resource=[site.notes_url], expires_in=expires_in
    )


async def test_a_2026_listen_stream_ends_when_its_token_expires(live_site: LiveSite):
    token = await _token(live_site, expires_in=5)
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    headers = {
        **JSON_HEADERS,
        "authorization": f"Bearer {token}",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "subscriptions/listen",
    }
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": True}, "_meta": meta},
    }
    async with (
        httpx.AsyncClient(timeout=20) as http,
        asyncio.timeout(20),
        http.stream("POST", live_site.notes_url, headers=headers, json=body) as stream,
    ):
        assert stream.status_code == 200
        text = (await stream.aread()).decode()  # returns once the server ends the stream
    assert "notifications/subscriptions/acknowledged" in text  # the stream had started
