"""Per-user OAuth to an upstream: each user connects their own account, calls carry it.

Everything is real and on loopback: one live Daphne process is both the protected upstream
(the OAuth endpoint ``protected``, whose ``whoami`` tool names the user of the token it
got) and its authorization server (django-oauth-toolkit: metadata, dynamic registration,
PKCE, refresh, revocation), and it relays that upstream through the endpoints ``relay``
(OAuth) and ``relay-public``. Users connect over HTTP as a browser would: sign in, press
Connect on the Connections page, consent at the authorization server, come back to the
callback. The SDK client calls the relay in both eras.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import pytest
from asgiref.sync import sync_to_async
from cryptography.fernet import Fernet
from django.contrib.auth.models import User
from django.test import override_settings
from django.utils import timezone
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from oauth2_provider.models import AccessToken, RefreshToken

from mcp_app.executors.netguard import NetworkPolicy
from mcp_app.models import (
    CallLog,
    Endpoint,
    Resource,
    Session,
    Tool,
    Upstream,
    UpstreamConnection,
)
from mcp_app.services.api_tokens import api_token_create
from mcp_app.services.connections import connection_refresh
from mcp_app.services.credentials import decrypt_value
from mcp_app.services.database import in_thread
from mcp_app.services.upstream_health import upstream_probe
from tests.support.catalog import make_endpoint
from tests.support.headless import AuthorizationDenied, authorize
from tests.support.live import asgi_server, flush_database, wait_until_idle
from tests.support.oauth import issue_token

pytestmark = pytest.mark.django_db
PASSWORD = "connect-test-password"
# The server's key for secrets at rest, so the test can read what it stored.
SECRET_KEYS = Fernet.generate_key().decode()


@dataclass
class Site:
    url: str
    upstream_pk: int
    users: dict[str, int]
    # The users' tokens at the relay endpoint (issued directly: the relay is not the subject).
    relay_tokens: dict[str, str]
    log: Path


@pytest.fixture(scope="module")
def site(django_db_setup: None, django_db_blocker: Any) -> Iterator[Site]:
    env = {
        "CELERY_BROKER_URL": "memory://",
        "MCP_PYTHON_TOOL_MODULES": "mcp_app.builtin_tools,tests.support.identity_tools",
        # The upstream checks every token against the database, so a revoked one fails now.
        "OAUTH_TOKEN_CACHE_SECONDS": "0",
        "MCPHOST_KEEP_SERVER_LOGS": "1",
        "MCP_SECRET_KEYS": SECRET_KEYS,
    }
    with asgi_server("daphne", env) as url:
        with django_db_blocker.unblock():
            protected = make_endpoint("protected", auth_mode=Endpoint.AuthMode.OAUTH)
            # Created as is: the function exists in the server's modules, not this process's.
            whoami = Tool.objects.create(
                name="whoami", kind=Tool.Kind.PYTHON, config={"function": "test_whoami"}
            )
            protected.tools.add(whoami)
            upstream = Upstream(
                name="own",
                url=f"{url}/mcp/protected",
                allow_networks="127.0.0.1/32",
                auth_mode=Upstream.AuthMode.USER_OAUTH,
                # Per-user even so: a user's session is never shared.
                stateless=True,
            )
            upstream.full_clean()
            upstream.save()
            tools = []
            for name, execution in (
                ("up_whoami", Tool.Execution.INLINE),
                ("up_whoami_bg", Tool.Execution.BACKGROUND),
            ):
                tool = Tool(
                    name=name,
                    description="Who the upstream says is calling.",
                    kind=Tool.Kind.MCP_UPSTREAM,
                    config={"upstream": "own", "tool": "whoami"},
                    input_schema={"type": "object"},
                    execution_mode=execution,
                )
                tool.full_clean()
                tool.save()
                tools.append(tool)
            # A resource of the upstream, read through the relay with the reader's account.
            protected.resources.add(
                Resource.objects.create(
                    uri="prot://note", name="note", mime_type="text/plain", text="members only"
                )
            )
            note = Resource(uri="ours://note", name="note", upstream=upstream)
            note.remote_uri = "prot://note"
            note.full_clean()
            note.save()
            # Per-user upstreams a user cannot connect to: one that asks for no authorization
            # (a public endpoint), one on loopback without the network allowed.
            for name, target, networks in (
                ("open", f"{url}/mcp/relay-public", "127.0.0.1/32"),
                ("unlisted", f"{url}/mcp/protected", ""),
            ):
                Upstream.objects.create(
                    name=name,
                    url=target,
                    allow_networks=networks,
                    auth_mode=Upstream.AuthMode.USER_OAUTH,
                )
            relay = make_endpoint("relay", auth_mode=Endpoint.AuthMode.OAUTH)
            relay.tools.add(*tools)
            relay.resources.add(note)
            make_endpoint("relay-public").tools.add(*tools)
            users = {
                name: User.objects.create_user(name, password=PASSWORD).pk
                for name in ("alice", "bob", "carol")
            }
            tokens = {
                name: issue_token(User.objects.get(pk=pk), resource=[f"{url}/mcp/relay"])
                for name, pk in users.items()
            }
        port = urlsplit(url).port
        yield Site(
            url,
            upstream.pk,
            users,
            tokens,
            Path(tempfile.gettempdir()) / f"mcphost-daphne-{port}.log",
        )
        wait_until_idle(url)
    flush_database(django_db_blocker)


@asynccontextmanager
async def browser(site: Site, username: str) -> AsyncIterator[httpx.AsyncClient]:
    """A signed-in user's browser: a cookie jar that does not follow redirects."""
    async with httpx.AsyncClient(base_url=site.url, timeout=20) as http:
        await http.get("/accounts/login/")
        response = await http.post(
            "/accounts/login/",
            data={
                "username": username,
                "password": PASSWORD,
                "csrfmiddlewaretoken": http.cookies["csrftoken"],
            },
        )
        assert response.status_code == 302, response.text
        yield http


async def post_form(http: httpx.AsyncClient, path: str) -> httpx.Response:
    return await http.post(path, data={"csrfmiddlewaretoken": http.cookies["csrftoken"]})


async def start_connect(http: httpx.AsyncClient, site: Site, upstream_pk: int | None = None) -> str:
    """Press Connect (of ``own``, or of the upstream ``upstream_pk``); return the
    authorization URL it sends the browser to."""
    pk = site.upstream_pk if upstream_pk is None else upstream_pk
    response = await post_form(http, f"/connections/{pk}/connect/")
    assert response.status_code == 302, response.text
    return response.headers["location"]


async def connect(site: Site, username: str) -> None:
    async with browser(site, username) as http:
        page = await http.get("/connections/")
        assert "not connected" in page.text
        location = await start_connect(http, site)
        params = await authorize(http, location, username, PASSWORD)
        response = await http.get(
            "/connections/callback/", params={key: values[0] for key, values in params.items()}
        )
        assert response.status_code == 302, response.text
        page = await http.get(response.headers["location"])
        assert "Your account at own is connected." in page.text


@asynccontextmanager
async def client_of(
    site: Site, mode: str, username: str | None, endpoint: str = "relay"
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {site.relay_tokens[username]}"} if username else {}
    async with (
        asyncio.timeout(30),
        httpx2.AsyncClient(headers=headers, timeout=20) as http,
        Client(
            streamable_http_client(f"{site.url}/mcp/{endpoint}", http_client=http), mode=mode
        ) as client,
    ):
        yield client


async def call(
    site: Site,
    mode: str,
    username: str | None,
    endpoint: str = "relay",
    tool: str = "up_whoami",
) -> Any:
    async with client_of(site, mode, username, endpoint) as client:
        return await client.call_tool(tool, {})


async def connection_of(site: Site, username: str) -> UpstreamConnection | None:
    return await UpstreamConnection.objects.filter(
        upstream_id=site.upstream_pk, user_id=site.users[username]
    ).afirst()


async def access_token_of(site: Site, username: str) -> str:
    connection = await connection_of(site, username)
    assert connection is not None
    return decrypted(connection.access_token_encrypted)


def decrypted(value: str) -> str:
    with override_settings(MCP_SECRET_KEYS=SECRET_KEYS):
        return decrypt_value(value, "token")


def not_connected_text(site: Site) -> str:
    return (
        f"Your account at the upstream 'own' is not connected. Connect it at "
        f"{site.url}/connections/"
    )


@pytest.fixture(params=["legacy", "2026-07-28"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


async def test_each_user_calls_the_upstream_with_their_own_account(site, mode):
    for name in ("alice", "bob"):
        if await connection_of(site, name) is None:
            await connect(site, name)
    for name in ("alice", "bob"):
        result = await call(site, mode, name)
        assert not result.is_error, result.content
        assert result.content[0].text == f"user:{site.users[name]}"
    # The tokens are stored encrypted: the row holds no plain token.
    connection = await connection_of(site, "alice")
    assert connection is not None
    assert await access_token_of(site, "alice") not in connection.access_token_encrypted
    assert connection.scopes


async def test_a_background_call_carries_its_users_own_account(site, mode):
    for name in ("alice", "bob"):
        if await connection_of(site, name) is None:
            await connect(site, name)
        result = await call(site, mode, name, tool="up_whoami_bg")
        assert not result.is_error, result.content
        assert result.content[0].text == f"user:{site.users[name]}"


async def test_each_user_keeps_one_upstream_session_of_their_own(site):
    """The upstream is marked stateless, yet users never share a session: one would be
    refused by the upstream (a session is bound to its user) and reopened on every switch."""
    for name in ("alice", "bob"):
        if await connection_of(site, name) is None:
            await connect(site, name)
        await call(site, "legacy", name)

    async def sessions() -> dict[str, int]:
        return {
            name: await Session.objects.filter(
                endpoint__slug="protected", user_id=site.users[name]
            ).acount()
            for name in ("alice", "bob")
        }

    before = await sessions()
    for name in ("alice", "bob", "alice", "bob"):
        result = await call(site, "legacy", name)
        assert result.content[0].text == f"user:{site.users[name]}"
    assert await sessions() == before


async def test_an_upstream_resource_is_read_with_the_readers_own_account(site, mode):
    if await connection_of(site, "alice") is None:
        await connect(site, "alice")
    async with client_of(site, mode, "alice") as client:
        read = await client.read_resource("ours://note")
    assert read.contents[0].text == "members only"
    async with client_of(site, mode, "carol") as client:
        with pytest.raises(MCPError) as refused:
            await client.read_resource("ours://note")
    assert not_connected_text(site) in refused.value.error.message


async def test_a_user_without_a_connection_is_told_where_to_connect(site, mode):
    result = await call(site, mode, "carol")
    assert result.is_error
    assert result.content[0].text.startswith(not_connected_text(site))


async def test_a_public_endpoint_without_a_user_is_told_where_to_connect(site, mode):
    result = await call(site, mode, None, endpoint="relay-public")
    assert result.is_error
    assert result.content[0].text.startswith(not_connected_text(site))


async def test_an_expired_token_is_refreshed_before_the_call(site):
    if await connection_of(site, "alice") is None:
        await connect(site, "alice")
    before = await access_token_of(site, "alice")
    await UpstreamConnection.objects.filter(
        upstream_id=site.upstream_pk, user_id=site.users["alice"]
    ).aupdate(expires_at=timezone.now() - datetime.timedelta(minutes=1))
    result = await call(site, "legacy", "alice")
    assert not result.is_error, result.content
    assert result.content[0].text == f"user:{site.users['alice']}"
    connection = await UpstreamConnection.objects.aget(
        upstream_id=site.upstream_pk, user_id=site.users["alice"]
    )
    assert connection.refreshed_at is not None
    assert connection.expires_at > timezone.now()
    assert await access_token_of(site, "alice") != before


async def test_a_token_the_upstream_refuses_is_refreshed_once(site):
    if await connection_of(site, "bob") is None:
        await connect(site, "bob")
    before = await access_token_of(site, "bob")
    # The token ends early at the authorization server; as far as the relay knows it is good.
    await AccessToken.objects.filter(
        user_id=site.users["bob"], application__name__startswith="mcphost"
    ).aupdate(expires=timezone.now() - datetime.timedelta(seconds=1))
    result = await call(site, "2026-07-28", "bob")
    assert not result.is_error, result.content
    assert result.content[0].text == f"user:{site.users['bob']}"
    assert await access_token_of(site, "bob") != before


async def test_processes_refreshing_at_once_take_turns(site):
    """Four refreshes at once of the same stale token, each on its own database connection
    as separate processes would be: one refreshes, the others wait for its row lock and use
    the token it got (refresh tokens rotate: a second refresh with the same one would be
    refused, and revoke the whole family)."""
    if await connection_of(site, "alice") is None:
        await connect(site, "alice")
    stale = await access_token_of(site, "alice")
    refresh = partial(
        in_thread(connection_refresh),
        upstream_pk=site.upstream_pk,
        user_id=site.users["alice"],
        stale=stale,
        policy=NetworkPolicy.build(networks=["127.0.0.1/32"]),
        name="own",
    )
    with override_settings(MCP_SECRET_KEYS=SECRET_KEYS):
        got = await asyncio.gather(*(refresh() for _ in range(4)))
    tokens = {access for access, _expires in got}
    assert len(tokens) == 1
    assert tokens == {await access_token_of(site, "alice")} != {stale}
    result = await call(site, "legacy", "alice")
    assert result.content[0].text == f"user:{site.users['alice']}"


async def test_disconnecting_revokes_the_tokens_and_the_next_call_is_refused(site, mode):
    await connect(site, "carol")
    result = await call(site, mode, "carol")
    assert result.content[0].text == f"user:{site.users['carol']}"
    carol = site.users["carol"]
    # What the relay holds for carol at the authorization server (its registered client).
    held = {"user_id": carol, "application__name__startswith": "mcphost"}
    assert await AccessToken.objects.filter(**held).aexists()
    async with browser(site, "carol") as http:
        response = await post_form(http, f"/connections/{site.upstream_pk}/disconnect/")
        assert response.status_code == 302
        page = await http.get("/connections/")
        assert "its tokens were revoked" in page.text
    assert await connection_of(site, "carol") is None
    # RFC 7009 at the authorization server: nothing of carol's is left there.
    assert not await AccessToken.objects.filter(**held).aexists()
    assert not await RefreshToken.objects.filter(**held, revoked__isnull=True).aexists()
    result = await call(site, mode, "carol")
    assert result.is_error
    assert result.content[0].text.startswith(not_connected_text(site))


async def test_a_callback_with_a_state_of_no_started_connection_changes_nothing(site):
    async with browser(site, "carol") as http:
        await start_connect(http, site)
        response = await http.get(
            "/connections/callback/", params={"code": "stolen", "state": "forged"}
        )
    assert response.status_code == 400
    assert "matches no connection you started in this browser" in unescape(response.text)
    assert await connection_of(site, "carol") is None


async def test_a_state_started_by_another_user_matches_nothing(site):
    async with browser(site, "bob") as bob:
        location = await start_connect(bob, site)
        params = await authorize(bob, location, "bob", PASSWORD)
    async with browser(site, "carol") as carol:
        response = await carol.get(
            "/connections/callback/", params={key: values[0] for key, values in params.items()}
        )
    assert response.status_code == 400
    assert await connection_of(site, "carol") is None


async def test_a_callback_without_a_code_changes_nothing(site):
    async with browser(site, "carol") as http:
        location = await start_connect(http, site)
        state = parse_qs(urlsplit(location).query)["state"][0]
        response = await http.get("/connections/callback/", params={"state": state})
    assert response.status_code == 400
    assert "sent no code back; nothing was connected" in unescape(response.text)
    assert await connection_of(site, "carol") is None


async def test_a_refusal_at_the_authorization_server_changes_nothing(site):
    async with browser(site, "carol") as http:
        location = await start_connect(http, site)
        with pytest.raises(AuthorizationDenied) as denied:
            await authorize(http, location, "carol", PASSWORD, allow=False)
        params = {key: values[0] for key, values in denied.value.params.items()}
        response = await http.get("/connections/callback/", params=params)
    assert response.status_code == 400
    assert "did not authorize the connection: access_denied" in unescape(response.text)
    assert await connection_of(site, "carol") is None


async def test_tokens_never_reach_the_call_log_the_exports_or_the_logs(site):
    if await connection_of(site, "alice") is None:
        await connect(site, "alice")
    await call(site, "legacy", "alice")
    token = await access_token_of(site, "alice")
    connection = await connection_of(site, "alice")
    assert connection is not None
    refresh = decrypted(connection.refresh_token_encrypted)
    wait_until_idle(site.url)
    rows = [str(row) async for row in CallLog.objects.values()]
    assert rows
    staff, _ = await User.objects.aget_or_create(
        username="auditor", defaults={"is_staff": True, "is_superuser": True}
    )
    staff.set_password(PASSWORD)
    await staff.asave()
    async with browser(site, "auditor") as http:
        exports = [
            (await http.get(path)).text
            for path in (
                "/audit/export.jsonl",
                "/audit/export.csv",
                f"/admin/mcp_app/upstreamconnection/{connection.pk}/change/",
                "/admin/mcp_app/upstreamconnection/",
                f"/admin/mcp_app/upstream/{site.upstream_pk}/change/",
            )
        ]
    _token, key = await sync_to_async(api_token_create)(user=staff, name="audit")
    async with httpx.AsyncClient(
        base_url=site.url, headers={"Authorization": f"Bearer {key}"}, timeout=20
    ) as api:
        for path in ("/api/v1/upstreams/", "/api/v1/call-log/?page_size=200"):
            response = await api.get(path)
            assert response.status_code == 200, response.text
            exports.append(response.text)
    log = site.log.read_text(errors="replace")
    for text in [*rows, *exports, log]:
        assert token not in text
        assert refresh not in text


async def test_an_operator_revokes_a_users_connection_in_the_admin(site):
    await connect(site, "carol")
    connection = await connection_of(site, "carol")
    assert connection is not None
    held = {"user_id": site.users["carol"], "application__name__startswith": "mcphost"}
    assert await AccessToken.objects.filter(**held).aexists()
    await User.objects.aget_or_create(
        username="operator", defaults={"is_staff": True, "is_superuser": True}
    )
    operator = await User.objects.aget(username="operator")
    operator.set_password(PASSWORD)
    await operator.asave()
    async with browser(site, "operator") as http:
        response = await http.post(
            "/admin/mcp_app/upstreamconnection/",
            data={
                "action": "revoke",
                "_selected_action": [str(connection.pk)],
                "csrfmiddlewaretoken": http.cookies["csrftoken"],
            },
        )
        assert response.status_code == 302, response.text
    assert await connection_of(site, "carol") is None
    assert not await AccessToken.objects.filter(**held).aexists()
    result = await call(site, "legacy", "carol")
    assert result.content[0].text.startswith(not_connected_text(site))


async def test_the_probe_finds_a_per_user_upstream_alive_without_a_user(site):
    """Probed with no user's token, the upstream answers 401: it is up (not a failure)."""
    assert await upstream_probe("own") == Upstream.ProbeState.ACTIVE
    upstream = await Upstream.objects.aget(pk=site.upstream_pk)
    assert (upstream.probe_failures, upstream.tools_fingerprint) == (0, "")


async def test_a_refresh_the_authorization_server_refuses_ends_the_connection(site):
    """The refresh token was revoked at the authorization server (elsewhere): the next call
    after expiry is told to connect again, and the dead connection is gone."""
    await connect(site, "carol")
    held = {"user_id": site.users["carol"], "application__name__startswith": "mcphost"}
    await RefreshToken.objects.filter(**held).adelete()
    await UpstreamConnection.objects.filter(
        upstream_id=site.upstream_pk, user_id=site.users["carol"]
    ).aupdate(expires_at=timezone.now() - datetime.timedelta(minutes=1))
    result = await call(site, "legacy", "carol")
    assert result.is_error
    assert result.content[0].text.startswith(not_connected_text(site))
    assert await connection_of(site, "carol") is None


@pytest.mark.parametrize(
    ("upstream", "reason"),
    [
        ("open", "publishes no protected-resource metadata (RFC 9728)"),
        (
            "unlisted",
            "The upstream 'unlisted' is not at a public address; an operator can allow-list",
        ),
    ],
)
async def test_an_upstream_that_cannot_be_connected_says_why(site, upstream, reason):
    pk = (await Upstream.objects.aget(name=upstream)).pk
    async with browser(site, "carol") as http:
        response = await post_form(http, f"/connections/{pk}/connect/")
    assert response.status_code == 502
    assert reason in unescape(response.text)
    # Where the upstream is stays with the operator.
    assert urlsplit(site.url).netloc not in response.text.split("<main", 1)[1]
    assert not await UpstreamConnection.objects.filter(upstream_id=pk).aexists()


async def test_a_read_whose_token_dies_mid_request_says_where_to_connect(site):
    """The upstream refuses the token (ended early at the authorization server) and the
    refresh is refused too: the read answers the not-connected error, not an internal one."""
    await connect(site, "carol")
    held = {"user_id": site.users["carol"], "application__name__startswith": "mcphost"}
    await RefreshToken.objects.filter(**held).adelete()
    await AccessToken.objects.filter(**held).aupdate(
        expires=timezone.now() - datetime.timedelta(seconds=1)
    )
    async with client_of(site, "legacy", "carol") as client:
        with pytest.raises(MCPError) as refused:
            await client.read_resource("ours://note")
    assert not_connected_text(site) in refused.value.error.message
    assert await connection_of(site, "carol") is None


async def test_the_sync_page_lists_a_per_user_upstream_with_the_operators_account(site):
    operator, _ = await User.objects.aget_or_create(
        username="syncer", defaults={"is_staff": True, "is_superuser": True}
    )
    operator.set_password(PASSWORD)
    await operator.asave()
    sync = f"/admin/mcp_app/upstream/{site.upstream_pk}/sync/"
    async with browser(site, "syncer") as http:
        before = unescape((await http.get(sync)).text)
    assert "Your account at the upstream 'own' is not connected" in before
    await connect(site, "syncer")
    async with browser(site, "syncer") as http:
        page = await http.get(sync)
    assert page.status_code == 200
    assert "whoami" in page.text
    assert "not connected" not in unescape(page.text)


async def test_connecting_again_revokes_the_tokens_it_replaces(site):
    await connect(site, "carol")
    first = await access_token_of(site, "carol")
    # The authorization server stores a token by its checksum.
    checksum = hashlib.sha256(first.encode()).hexdigest()
    assert await AccessToken.objects.filter(token_checksum=checksum).aexists()
    await connect(site, "carol")
    assert await access_token_of(site, "carol") != first
    assert not await AccessToken.objects.filter(token_checksum=checksum).aexists()
    result = await call(site, "legacy", "carol")
    assert result.content[0].text == f"user:{site.users['carol']}"


async def test_deleting_a_per_user_upstream_revokes_its_users_tokens_first(site):
    """The admin's delete goes through the write path: each connection is revoked at the
    authorization server (RFC 7009) as a disconnect would, then the upstream is deleted."""
    spare = await Upstream.objects.acreate(
        name="spare",
        url=f"{site.url}/mcp/protected",
        allow_networks="127.0.0.1/32",
        auth_mode=Upstream.AuthMode.USER_OAUTH,
        stateless=True,
    )
    async with browser(site, "carol") as http:
        location = await start_connect(http, site, spare.pk)
        params = await authorize(http, location, "carol", PASSWORD)
        response = await http.get(
            "/connections/callback/", params={key: values[0] for key, values in params.items()}
        )
        assert response.status_code == 302, response.text
    connection = await UpstreamConnection.objects.aget(upstream=spare)
    checksum = hashlib.sha256(decrypted(connection.access_token_encrypted).encode()).hexdigest()
    assert await AccessToken.objects.filter(token_checksum=checksum).aexists()
    await User.objects.aget_or_create(
        username="operator", defaults={"is_staff": True, "is_superuser": True}
    )
    operator = await User.objects.aget(username="operator")
    operator.set_password(PASSWORD)
    await operator.asave()

    async with browser(site, "operator") as http:
        response = await http.post(
            f"/admin/mcp_app/upstream/{spare.pk}/delete/",
            data={"post": "yes", "csrfmiddlewaretoken": http.cookies["csrftoken"]},
        )
        assert response.status_code == 302, response.text

    assert not await Upstream.objects.filter(pk=spare.pk).aexists()
    assert not await UpstreamConnection.objects.filter(pk=connection.pk).aexists()
    # Revoked at the authorization server, not only forgotten here.
    assert not await AccessToken.objects.filter(token_checksum=checksum).aexists()
    assert not await RefreshToken.objects.filter(
        user_id=site.users["carol"], application__client_id=connection.client_id,
        revoked__isnull=True,
    ).aexists()  # fmt: skip
    deleted = (
        await Upstream.history.filter(id=spare.pk, history_type="-")
        .select_related("history_user")
        .aget()
    )
    assert (deleted.history_change_reason, deleted.history_user.username) == ("admin", "operator")
