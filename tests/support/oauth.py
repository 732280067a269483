"""OAuth helpers for tests: a headless user for the SDK's browser leg, token storage, a CIMD
stub fetcher, tokens issued straight into the database, and an in-process ASGI caller.

The headless user drives the real login and consent pages over HTTP (``headless.authorize``)
with its own client and cookie jar, never the SDK's client: its auth flow holds a lock while
the browser leg runs.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthToken
from oauth2_provider.cimd import CIMDError
from oauth2_provider.models import AccessToken, Application, set_token_value

from tests.support.headless import authorize

CIMD_CLIENT_ID = "https://client.example/mcp/client-metadata.json"
REDIRECT_URI = "http://127.0.0.1:3030/callback"


class StubMetadataFetcher:
    """``CIMD_METADATA_FETCHER`` for tests: knows one client document and fetches nothing."""

    def fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        if client_id != CIMD_CLIENT_ID:
            raise CIMDError("no such test client")
        document = {
            "client_id": CIMD_CLIENT_ID,
            "client_name": "Stub CIMD client",
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
        return document, 300


class MemoryStorage:
    """The SDK's ``TokenStorage`` in memory."""

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


class HeadlessUser:
    """A user who signs in and answers the consent page, as a browser would.

    ``redirect_handler``/``callback_handler`` plug into ``OAuthClientProvider``; every
    authorization URL the SDK opened is kept in ``authorize_urls`` and every page seen in
    ``pages``.
    """

    def __init__(self, username: str, password: str, *, allow: bool = True) -> None:
        self.username = username
        self.password = password
        self.allow = allow
        self.authorize_urls: list[str] = []
        self.pages: list[str] = []
        self._result: AuthorizationCodeResult | None = None

    async def redirect_handler(self, url: str) -> None:
        self.authorize_urls.append(url)
        async with httpx.AsyncClient(timeout=10, follow_redirects=False) as http:
            params = await authorize(
                http, url, self.username, self.password, allow=self.allow, pages=self.pages
            )
        self._result = AuthorizationCodeResult(
            code=params["code"][0], state=params.get("state", [None])[0], iss=params["iss"][0]
        )

    async def callback_handler(self) -> AuthorizationCodeResult:
        assert self._result is not None
        result, self._result = self._result, None
        return result


def make_client(name: str = "probe client", **fields: Any) -> Application:
    fields.setdefault("client_type", Application.CLIENT_PUBLIC)
    fields.setdefault("authorization_grant_type", Application.GRANT_AUTHORIZATION_CODE)
    fields.setdefault("redirect_uris", REDIRECT_URI)
    return Application.objects.create(name=name, **fields)


def issue_token(
    user: AbstractBaseUser | None,
    *,
    resource: list[str],
    scope: str = "mcp:read",
    expires_in: float = 3600,
    client: Application | None = None,
) -> str:
    """Store an access token the way DOT does (hashed) and return its raw value."""
    raw = secrets.token_urlsafe(32)
    token = AccessToken(
        user=user,
        application=client or make_client(),
        scope=scope,
        expires=timezone.now() + timedelta(seconds=expires_in),
        resource=resource,
    )
    set_token_value(token, raw)
    token.save()
    return raw


@dataclass
class AsgiResponse:
    status: int
    headers: dict[str, str]
    body: bytes


async def asgi_call(
    method: str,
    path: str,
    *,
    headers: Mapping[str, str] = {},  # noqa: B006 (read only)
    body: bytes = b"",
    query_string: bytes = b"",
) -> AsgiResponse:
    """Drive ``mcpsite.asgi.application`` in-process for one request, as a server would."""
    from mcpsite.asgi import application
    from tests.support.inprocess import encode_headers, http_scope

    all_headers = {"host": "127.0.0.1", **headers}
    scope = http_scope(path, encode_headers(all_headers), method=method, query_string=query_string)
    incoming = [{"type": "http.request", "body": body, "more_body": False}]
    done = asyncio.Event()
    status = 0
    response_headers: dict[str, str] = {}
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop()
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            for name, value in message["headers"]:
                response_headers[name.decode("latin-1")] = value.decode("latin-1")
        else:
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                done.set()

    async with asyncio.timeout(10):
        await application(scope, receive, send)
    return AsgiResponse(status, response_headers, b"".join(chunks))
