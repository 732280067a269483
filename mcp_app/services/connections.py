"""Users' own connections to upstreams that authorize each user (per-user OAuth).

Connecting (``connection_start``, then ``connection_finish`` on the callback): the upstream's
protected-resource metadata is found from its 401 challenge or at its well-known URL (RFC
9728), its authorization server's metadata at the server's well-known URLs (RFC 8414, OpenID
Connect Discovery); this host registers itself there (RFC 7591) unless the operator set a
client id, and sends the user to authorize with PKCE (S256), a ``state`` kept in the user's
own web session and the upstream as the ``resource`` (RFC 8707). The callback exchanges the
code and stores the tokens, encrypted, on the user's ``UpstreamConnection``.

Calling (``user_auth``): a call of a signed-in user to such an upstream carries the user's
access token; an expired one is refreshed first, and one the upstream refuses is refreshed
once. A refresh locks the connection's row, so processes refreshing at once take turns and
the later ones use the token the first got (refresh tokens rotate: a second refresh with the
same one would fail, or revoke the family). A caller without a connection gets a tool error
naming the Connections page.

Disconnecting (``connection_revoke``, by the user or an operator): the tokens are revoked at
the authorization server where it offers revocation (RFC 7009) and the row is deleted.
Deleting an upstream revokes all its users' connections once the delete commits
(``upstream_connections_revoke``).

Every request to the upstream and its authorization server goes through the SSRF guard
with the upstream's allow-list. Tokens, codes, verifiers and client secrets are never
logged or put in a message; errors quote the server's ``error`` code only.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import logging
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import quote_plus, urlencode, urlsplit, urlunsplit

import httpx
import orjson
from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from mcp_app.executors.netguard import (
    BlockedAddressError,
    GuardedClient,
    NetworkPolicy,
    ResponseTooLargeError,
    TooManyRedirectsError,
    global_policy,
)
from mcp_app.models import Upstream, UpstreamConnection
from mcp_app.models.upstream import split_networks
from mcp_app.protocol.results import ToolError
from mcp_app.services.credentials import CredentialError, decrypt_value, encrypt_secret
from mcp_app.services.database import in_thread

logger = logging.getLogger(__name__)

# Bytes of one metadata, registration or token response.
RESPONSE_MAX_BYTES = 64 * 1024
# Seconds one request to the upstream or its authorization server may take.
REQUEST_SECONDS = 10.0
# Seconds a started authorization may take before its callback is refused.
PENDING_SECONDS = 600
# Authorizations a user may have started and not finished at once (older ones are dropped).
PENDING_MAX = 5
# A token is refreshed this long before it expires.
REFRESH_MARGIN_SECONDS = 30.0
SESSION_KEY = "mcp_upstream_oauth"
_CHALLENGE_PARAM = re.compile(r'(\w+)\s*=\s*"([^"]*)"')


class ConnectError(Exception):
    """Connecting or disconnecting failed; the message is for the user and holds no secret."""


def connections_url() -> str:
    """The absolute URL of the Connections page."""
    return f"{settings.PUBLIC_BASE_URL}{reverse('mcp_app:connections')}"


def callback_url() -> str:
    return f"{settings.PUBLIC_BASE_URL}{reverse('mcp_app:connection_callback')}"


def not_connected(upstream: str) -> ToolError:
    """The tool error of a caller without a (usable) connection to ``upstream``."""
    return ToolError(
        f"Your account at the upstream {upstream!r} is not connected. Connect it at "
        f"{connections_url()} (sign in with your account on this site), then call again."
    )


def _policy(upstream: Upstream) -> NetworkPolicy:
    return global_policy().merged(
        NetworkPolicy.build(networks=split_networks(upstream.allow_networks))
    )


# --- HTTP to the upstream and its authorization server ---------------------------------------


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    headers: httpx.Headers
    data: Any


async def _fetch(
    policy: NetworkPolicy,
    method: str,
    url: str,
    *,
    where: str,
    headers: Mapping[str, str] | None = None,
    form: Mapping[str, str] | None = None,
    json_body: Any = None,
) -> _Answer:
    """One request through the SSRF guard (no redirects); the body parsed as JSON if it is.
    ``where`` names the server in errors (its name, not its address: where an upstream is
    stays with the operator).

    Raises:
        ConnectError: the address is refused, the server cannot be reached, or the answer is
            too large.
    """
    sent = {"Accept": "application/json", **(headers or {})}
    content: bytes | None = None
    if form is not None:
        sent["Content-Type"] = "application/x-www-form-urlencoded"
        content = urlencode(form).encode()
    elif json_body is not None:
        sent["Content-Type"] = "application/json"
        content = orjson.dumps(json_body)
    try:
        async with GuardedClient(
            policy, max_response_bytes=RESPONSE_MAX_BYTES, max_redirects=0, timeout=REQUEST_SECONDS
        ) as client:
            response = await client.request(method, url, headers=sent, content=content)
    except BlockedAddressError:
        raise ConnectError(
            f"{where} is not at a public address; an operator can allow-list its network on "
            "the upstream."
        ) from None
    except (ResponseTooLargeError, TooManyRedirectsError):
        raise ConnectError(f"{where} answered with more than this host accepts.") from None
    except (TimeoutError, httpx.HTTPError) as exc:
        raise ConnectError(f"{where} could not be reached ({type(exc).__name__}).") from None
    try:
        data = orjson.loads(response.content) if response.content else None
    except orjson.JSONDecodeError:
        data = None
    return _Answer(response.status, response.headers, data)


def _same_resource(a: str, b: str) -> bool:
    def canonical(url: str) -> tuple[str, str, str]:
        parts = urlsplit(url)
        return parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/")

    return canonical(a) == canonical(b)


def _well_known(url: str, name: str) -> str:
    """RFC 8414 section 3.1 / RFC 9728 section 3.1: the well-known segment goes between the
    host and the path."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, f"/.well-known/{name}{path}", "", ""))


@dataclass(frozen=True, slots=True)
class Discovery:
    """What connecting to an upstream needs from its metadata."""

    resource: str
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str
    revocation_endpoint: str
    scopes: str
    auth_methods: tuple[str, ...]
    sends_iss: bool


async def discover(upstream: Upstream, policy: NetworkPolicy) -> Discovery:
    """Find the upstream's authorization server and what it offers.

    Raises:
        ConnectError: no metadata, metadata for another resource, or an authorization
            server without what this client needs (code flow with S256 PKCE).
    """
    name = upstream.name
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "mcphost-connect", "version": "1"},
        },
    }
    challenge = await _fetch(
        policy,
        "POST",
        upstream.url,
        where=f"The upstream {name!r}",
        headers={"Accept": "application/json, text/event-stream"},
        json_body=initialize,
    )
    params: dict[str, str] = {}
    if challenge.status == 401:
        found = challenge.headers.get("www-authenticate", "")
        if found.lower().startswith("bearer"):
            params = dict(_CHALLENGE_PARAM.findall(found))
    candidates = [params["resource_metadata"]] if params.get("resource_metadata") else []
    candidates += [
        _well_known(upstream.url, "oauth-protected-resource"),
        _well_known(_origin(upstream.url), "oauth-protected-resource"),
    ]
    metadata: dict[str, Any] | None = None
    for url in dict.fromkeys(candidates):
        answer = await _fetch(policy, "GET", url, where=f"The upstream {name!r}")
        if answer.status == 200 and isinstance(answer.data, dict):
            metadata = answer.data
            break
    if metadata is None:
        raise ConnectError(
            f"The upstream {name!r} publishes no protected-resource metadata (RFC 9728): "
            "it does not say where to authorize."
        )
    resource = metadata.get("resource")
    if not isinstance(resource, str) or not _same_resource(resource, upstream.url):
        raise ConnectError(
            f"The upstream {name!r} publishes metadata for another resource; not connecting."
        )
    servers = metadata.get("authorization_servers")
    if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
        raise ConnectError(f"The upstream {name!r} names no authorization server.")
    issuer = servers[0]
    server = await _server_metadata(policy, issuer, f"The authorization server of {name!r}")
    if server is None:
        raise ConnectError(
            f"The authorization server of {name!r} publishes no metadata (RFC 8414)."
        )
    methods = server.get("code_challenge_methods_supported")
    if not isinstance(methods, list) or "S256" not in methods:
        raise ConnectError(
            f"The authorization server of {name!r} does not offer PKCE with S256; not connecting."
        )
    endpoints = {}
    for key in ("authorization_endpoint", "token_endpoint"):
        value = server.get(key)
        if not isinstance(value, str) or urlsplit(value).scheme not in ("http", "https"):
            raise ConnectError(f"The authorization server of {name!r} has no {key}.")
        endpoints[key] = value
    scopes = upstream.oauth_scopes.strip() or params.get("scope", "")
    if not scopes and isinstance(metadata.get("scopes_supported"), list):
        scopes = " ".join(str(scope) for scope in metadata["scopes_supported"])
    auth_methods = server.get("token_endpoint_auth_methods_supported")
    return Discovery(
        resource=resource,
        issuer=issuer,
        authorization_endpoint=endpoints["authorization_endpoint"],
        token_endpoint=endpoints["token_endpoint"],
        registration_endpoint=_url_or_empty(server.get("registration_endpoint")),
        revocation_endpoint=_url_or_empty(server.get("revocation_endpoint")),
        scopes=" ".join(scopes.split()),
        auth_methods=tuple(auth_methods) if isinstance(auth_methods, list) else (),
        sends_iss=server.get("authorization_response_iss_parameter_supported") is True,
    )


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def _url_or_empty(value: Any) -> str:
    return value if isinstance(value, str) and urlsplit(value).scheme in ("http", "https") else ""


async def _server_metadata(policy: NetworkPolicy, issuer: str, where: str) -> dict[str, Any] | None:
    """The authorization server's metadata whose ``issuer`` is ``issuer`` (RFC 8414 section
    3.3: a document for another issuer is not used)."""
    path = urlsplit(issuer).path.rstrip("/")
    candidates = [
        _well_known(issuer, "oauth-authorization-server"),
        _well_known(issuer, "openid-configuration"),
    ]
    if path:
        candidates.append(f"{issuer.rstrip('/')}/.well-known/openid-configuration")
    for url in candidates:
        answer = await _fetch(policy, "GET", url, where=where)
        if answer.status == 200 and isinstance(answer.data, dict):
            found = answer.data.get("issuer")
            if isinstance(found, str) and found.rstrip("/") == issuer.rstrip("/"):
                return answer.data
    return None


# --- connecting: start and finish the authorization ------------------------------------------


@dataclass(frozen=True, slots=True)
class Client:
    client_id: str
    client_secret: str
    auth_method: str


async def _register(upstream: Upstream, discovery: Discovery, policy: NetworkPolicy) -> Client:
    """Register this host as a client of the authorization server (RFC 7591).

    Raises:
        ConnectError: registration is not offered, or the server refused it.
    """
    if not discovery.registration_endpoint:
        raise ConnectError(
            f"The authorization server of {upstream.name!r} offers no dynamic registration: "
            "an operator must set the upstream's OAuth client id."
        )
    wanted = "client_secret_basic" if "client_secret_basic" in discovery.auth_methods else "none"
    answer = await _fetch(
        policy,
        "POST",
        discovery.registration_endpoint,
        where=f"The authorization server of {upstream.name!r}",
        json_body={
            "client_name": f"mcphost ({urlsplit(settings.PUBLIC_BASE_URL).netloc})",
            "redirect_uris": [callback_url()],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": wanted,
            **({"scope": discovery.scopes} if discovery.scopes else {}),
        },
    )
    data = answer.data if isinstance(answer.data, dict) else {}
    client_id = data.get("client_id")
    if answer.status not in (200, 201) or not isinstance(client_id, str) or not client_id:
        raise ConnectError(
            f"The authorization server of {upstream.name!r} refused the registration "
            f"(HTTP {answer.status}{_error_code(data)})."
        )
    secret = data.get("client_secret")
    method = data.get("token_endpoint_auth_method")
    if not isinstance(method, str):
        method = wanted if isinstance(secret, str) and secret else "none"
    return Client(client_id, secret if isinstance(secret, str) else "", method)


def _error_code(data: Mapping[str, Any]) -> str:
    """``: <error>`` from an OAuth error body (the code only: a description may echo input)."""
    error = data.get("error")
    if isinstance(error, str) and re.fullmatch(r"[\w.-]{1,64}", error):
        return f": {error}"
    return ""


def _verifier_challenge() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(64)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def upstreams_for_connections() -> list[Upstream]:
    """The enabled upstreams that authorize each user."""
    return list(Upstream.objects.filter(auth_mode=Upstream.AuthMode.USER_OAUTH, enabled=True))


@dataclass(frozen=True, slots=True)
class Started:
    """A started authorization: where to send the user, and what the callback needs, to be
    kept in the user's web session under ``state`` (``pending_add``)."""

    url: str
    state: str
    pending: dict[str, Any]


async def connection_start(*, upstream: Upstream) -> Started:
    """Begin connecting a user to ``upstream``: discover, register if needed, and build the
    authorization URL with PKCE.

    Raises:
        ConnectError: discovery or registration failed (nothing is stored then).
    """
    if not upstream.per_user or not upstream.enabled:
        raise ConnectError(f"The upstream {upstream.name!r} takes no per-user connections.")
    policy = _policy(upstream)
    discovery = await discover(upstream, policy)
    if upstream.oauth_client_id:
        secret = ""
        if upstream.oauth_client_secret_encrypted:
            secret = _decrypt(upstream.oauth_client_secret_encrypted, "upstream's client secret")
        client = Client(
            upstream.oauth_client_id, secret, "client_secret_basic" if secret else "none"
        )
    else:
        client = await _register(upstream, discovery, policy)
    verifier, challenge = _verifier_challenge()
    state = secrets.token_urlsafe(32)
    query = {
        "response_type": "code",
        "client_id": client.client_id,
        "redirect_uri": callback_url(),
        "state": state,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": discovery.resource,
    }
    if discovery.scopes:
        query["scope"] = discovery.scopes
    pending = {
        "upstream": upstream.pk,
        "at": time.time(),
        "verifier": verifier,
        "issuer": discovery.issuer,
        "sends_iss": discovery.sends_iss,
        "token_endpoint": discovery.token_endpoint,
        "revocation_endpoint": discovery.revocation_endpoint,
        "resource": discovery.resource,
        "client_id": client.client_id,
        "client_secret": encrypt_secret(client.client_secret) if client.client_secret else "",
        "auth_method": client.auth_method,
    }
    separator = "&" if urlsplit(discovery.authorization_endpoint).query else "?"
    url = f"{discovery.authorization_endpoint}{separator}{urlencode(query)}"
    return Started(url=url, state=state, pending=pending)


def pending_add(session: Any, started: Started) -> None:
    """Keep ``started`` in the user's web ``session``: a callback in another browser, or of
    another user, finds nothing (the ``state`` is bound to this session)."""
    pending = dict(session.get(SESSION_KEY) or {})
    pending[started.state] = started.pending
    newest = sorted(pending.items(), key=lambda item: item[1]["at"])[-PENDING_MAX:]
    session[SESSION_KEY] = dict(newest)


def _decrypt(token: str, what: str) -> str:
    try:
        return decrypt_value(token, what)
    except CredentialError as exc:
        raise ConnectError(str(exc)) from None


def _client_auth(client_id: str, secret: str, method: str, form: dict[str, str]) -> dict[str, str]:
    """Authenticate the client at the token or revocation endpoint (RFC 6749 section 2.3)."""
    if secret and method == "client_secret_basic":
        token = base64.b64encode(f"{quote_plus(client_id)}:{quote_plus(secret)}".encode())
        return {"Authorization": f"Basic {token.decode('ascii')}"}
    form["client_id"] = client_id
    if secret and method == "client_secret_post":
        form["client_secret"] = secret
    return {}


@dataclass(frozen=True, slots=True)
class Tokens:
    access_token: str
    refresh_token: str
    expires_at: datetime.datetime | None
    scopes: str


async def _token_request(
    policy: NetworkPolicy,
    endpoint: str,
    form: dict[str, str],
    *,
    client_id: str,
    client_secret: str,
    auth_method: str,
    what: str,
    where: str,
) -> Tokens:
    """POST ``form`` to the token endpoint; the tokens of a successful answer.

    Raises:
        ConnectError: the server refused (its error code quoted) or answered no bearer token.
        InvalidGrant: it answered ``invalid_grant`` (the code or refresh token is dead).
    """
    headers = _client_auth(client_id, client_secret, auth_method, form)
    answer = await _fetch(policy, "POST", endpoint, where=where, headers=headers, form=form)
    data = answer.data if isinstance(answer.data, dict) else {}
    if answer.status != 200:
        if data.get("error") == "invalid_grant":
            raise InvalidGrant(f"{what} was refused (invalid_grant).")
        raise ConnectError(f"{what} failed (HTTP {answer.status}{_error_code(data)}).")
    access = data.get("access_token")
    kind = str(data.get("token_type", "")).lower()
    if not isinstance(access, str) or not access or kind != "bearer":
        raise ConnectError(f"{what} answered no bearer access token.")
    refresh = data.get("refresh_token")
    lifetime = data.get("expires_in")
    expires_at = None
    if isinstance(lifetime, int | float) and not isinstance(lifetime, bool) and lifetime > 0:
        expires_at = timezone.now() + datetime.timedelta(seconds=lifetime)
    scope = data.get("scope")
    return Tokens(
        access_token=access,
        refresh_token=refresh if isinstance(refresh, str) else "",
        expires_at=expires_at,
        scopes=scope if isinstance(scope, str) else form.get("scope", ""),
    )


class InvalidGrant(ConnectError):
    """The authorization server no longer honours the code or refresh token."""


def pending_take(session: Any, state: str) -> dict[str, Any] | None:
    """Remove and return the authorization ``state`` started in this web ``session``, if it is
    still fresh (single use: a replayed callback finds nothing)."""
    pending = dict(session.get(SESSION_KEY) or {})
    found = pending.pop(state, None) if state else None
    session[SESSION_KEY] = pending
    if found is None or time.time() - float(found.get("at", 0)) > PENDING_SECONDS:
        return None
    return dict(found)


async def connection_finish(
    *, user_id: int, pending: Mapping[str, Any], query: Mapping[str, str]
) -> Upstream:
    """Finish the authorization ``pending`` (from ``pending_take``) with the callback's
    ``query``: exchange the code and store the user's connection.

    Raises:
        ConnectError: the server answered an error, the code is missing, the answer came
            from another issuer, or the exchange failed. Nothing is stored then.
    """
    upstream = await Upstream.objects.filter(pk=pending["upstream"]).afirst()
    if upstream is None or not upstream.per_user:
        raise ConnectError("That upstream no longer takes per-user connections.")
    if query.get("error"):
        raise ConnectError(
            f"The authorization server of {upstream.name!r} did not authorize the "
            f"connection{_error_code(query)}."
        )
    code = query.get("code", "")
    if not code:
        raise ConnectError("The authorization server sent no code back; nothing was connected.")
    issuer = query.get("iss")
    # RFC 9207: a server that says it sends iss must send its own; anyone's must match.
    if (issuer or pending["sends_iss"]) and (issuer or "").rstrip("/") != str(
        pending["issuer"]
    ).rstrip("/"):
        raise ConnectError("The answer came from another authorization server; not connected.")
    secret = _decrypt(pending["client_secret"], "client secret") if pending["client_secret"] else ""
    tokens = await _token_request(
        _policy(upstream),
        pending["token_endpoint"],
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": callback_url(),
            "code_verifier": pending["verifier"],
            "resource": pending["resource"],
        },
        client_id=pending["client_id"],
        client_secret=secret,
        auth_method=pending["auth_method"],
        what=f"Exchanging the code at the authorization server of {upstream.name!r}",
        where=f"The authorization server of {upstream.name!r}",
    )
    replaced = await in_thread(_store)(user_id, upstream, pending, tokens)
    logger.info("User %s connected to upstream %s", user_id, upstream.pk)
    if replaced is not None and replaced.revocation_endpoint:
        # Connected again: the tokens of the connection replaced are no longer anyone's.
        try:
            await _revoke_tokens(replaced)
        except (ConnectError, CredentialError) as exc:
            logger.warning(
                "Connection %s: revoking the replaced tokens failed: %s", replaced.pk, exc
            )
    return upstream


def _store(
    user_id: int, upstream: Upstream, pending: Mapping[str, Any], tokens: Tokens
) -> UpstreamConnection | None:
    """Store the user's connection; return the one it replaces (as it was), if any."""
    replaced = (
        UpstreamConnection.objects.select_related("upstream")
        .filter(user_id=user_id, upstream=upstream)
        .first()
    )
    UpstreamConnection.objects.update_or_create(
        user_id=user_id,
        upstream=upstream,
        defaults={
            "issuer": pending["issuer"],
            "token_endpoint": pending["token_endpoint"],
            "revocation_endpoint": pending["revocation_endpoint"],
            "resource": pending["resource"],
            "client_id": pending["client_id"],
            "client_secret_encrypted": pending["client_secret"],
            "token_endpoint_auth_method": pending["auth_method"],
            "access_token_encrypted": encrypt_secret(tokens.access_token),
            "refresh_token_encrypted": (
                encrypt_secret(tokens.refresh_token) if tokens.refresh_token else ""
            ),
            "expires_at": tokens.expires_at,
            "scopes": tokens.scopes,
            "refreshed_at": None,
        },
    )
    return replaced


# --- calling: the user's token on each request, refreshed ------------------------------------


class _Gone(Exception):
    """The user has no usable connection any more."""


def _user_id(caller: str) -> int | None:
    """The user a call is for (``RequestContext.caller`` "user:<id>"), or None."""
    kind, _, value = caller.partition(":")
    return int(value) if kind == "user" and value.isdigit() else None


def _epoch(moment: datetime.datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None


class UserToken:
    """``CallerAuth`` of one user at one upstream, shared in this process by every session
    of the pair (a notification stream included), so a refresh reaches them all."""

    def __init__(self, upstream: Upstream, user_id: int) -> None:
        self.upstream_pk = upstream.pk
        self.name = upstream.name
        self.user_id = user_id
        self.policy = _policy(upstream)
        self.access = ""
        self.expires_at: float | None = None
        self.gone = False
        # The last few tokens of the pair, redacted from whatever the upstream sends.
        self._known: list[str] = []

    def __repr__(self) -> str:
        return f"UserToken(upstream={self.name!r}, user={self.user_id})"

    def update(self, access: str, expires_at: float | None) -> None:
        self.access, self.expires_at, self.gone = access, expires_at, False
        if access not in self._known:
            self._known = [*self._known[-3:], access]

    async def headers(self) -> Mapping[str, str]:
        if self.gone:
            raise not_connected(self.name)
        if self.expires_at is not None and time.time() >= self.expires_at - REFRESH_MARGIN_SECONDS:
            await self.rejected(f"Bearer {self.access}")
        return {"Authorization": f"Bearer {self.access}"}

    def secrets(self) -> tuple[str, ...]:
        return tuple(self._known)

    async def rejected(self, authorization: str) -> None:
        stale = authorization.removeprefix("Bearer").strip()
        try:
            access, expires_at = await in_thread(connection_refresh)(
                upstream_pk=self.upstream_pk,
                user_id=self.user_id,
                stale=stale,
                policy=self.policy,
                name=self.name,
            )
        except _Gone:
            self.gone = True
            raise not_connected(self.name) from None
        self.update(access, expires_at)


# (upstream pk, user id) -> the pair's token in this process.
_tokens: dict[tuple[int, int], UserToken] = {}


def _current(upstream_pk: int, user_id: int) -> tuple[str, float | None] | None:
    connection = UpstreamConnection.objects.filter(upstream_id=upstream_pk, user_id=user_id).first()
    if connection is None:
        return None
    try:
        access = decrypt_value(connection.access_token_encrypted, "connection's access token")
    except CredentialError:
        logger.error("Connection %s cannot be decrypted with the configured keys", connection.pk)
        return None
    return access, _epoch(connection.expires_at)


async def user_auth(upstream: Upstream, caller: str) -> UserToken:
    """The caller's token at the per-user ``upstream``, as read now from their connection.

    Raises:
        ToolError: the caller is no signed-in user, or has no connection (where to connect).
    """
    user_id = _user_id(caller)
    if user_id is None:
        raise not_connected(upstream.name)
    key = (upstream.pk, user_id)
    current = await in_thread(_current)(upstream.pk, user_id)
    token = _tokens.get(key)
    if current is None:
        if token is not None:
            token.gone = True  # its sessions stop sending the revoked token
        raise not_connected(upstream.name)
    if token is None:
        token = _tokens[key] = UserToken(upstream, user_id)
    token.update(*current)
    return token


def connection_refresh(
    *, upstream_pk: int, user_id: int, stale: str, policy: NetworkPolicy, name: str
) -> tuple[str, float | None]:
    """Refresh the user's access token at the upstream unless the one stored is no longer
    ``stale``; return the current one and when it expires (Unix time).

    The row stays locked while the authorization server answers: a concurrent refresh (in
    any process) waits, then finds the new token and uses it instead of refreshing again
    with a refresh token that has already rotated.

    Raises:
        _Gone: no connection, no refresh token, or the server refused it (row deleted).
        ToolError: the server could not be reached or failed otherwise (row kept).
    """
    with transaction.atomic():
        connection = (
            UpstreamConnection.objects.select_for_update()
            .filter(upstream_id=upstream_pk, user_id=user_id)
            .first()
        )
        if connection is None:
            raise _Gone
        try:
            access = decrypt_value(connection.access_token_encrypted, "access token")
            refresh = (
                decrypt_value(connection.refresh_token_encrypted, "refresh token")
                if connection.refresh_token_encrypted
                else ""
            )
            secret = (
                decrypt_value(connection.client_secret_encrypted, "client secret")
                if connection.client_secret_encrypted
                else ""
            )
        except CredentialError:
            raise _Gone from None
        if access != stale:
            return access, _epoch(connection.expires_at)  # refreshed meanwhile
        if not refresh:
            raise _Gone
        form = {
            "grant_type": "refresh_token",
            "refresh_token": refresh,
            "resource": connection.resource,
        }
        try:
            tokens = async_to_sync(_token_request)(
                policy,
                connection.token_endpoint,
                form,
                client_id=connection.client_id,
                client_secret=secret,
                auth_method=connection.token_endpoint_auth_method,
                what=f"Refreshing the connection to {name!r}",
                where=f"The authorization server of {name!r}",
            )
        except InvalidGrant:
            logger.info(
                "Connection %s: refresh refused; the user must connect again", connection.pk
            )
            # Deleted in this transaction, which must commit: _Gone is raised once it has.
            connection.delete()
            tokens = None
        except ConnectError as exc:
            raise ToolError(f"{exc} Try again later.") from None
        if tokens is not None:
            _keep(connection, tokens)
    if tokens is None:
        raise _Gone
    return tokens.access_token, _epoch(tokens.expires_at)


def _keep(connection: UpstreamConnection, tokens: Tokens) -> None:
    """Store refreshed ``tokens`` on ``connection`` (a refresh token is kept when the server
    sent no new one)."""
    connection.access_token_encrypted = encrypt_secret(tokens.access_token)
    if tokens.refresh_token:
        connection.refresh_token_encrypted = encrypt_secret(tokens.refresh_token)
    connection.expires_at = tokens.expires_at
    if tokens.scopes:
        connection.scopes = tokens.scopes
    connection.refreshed_at = timezone.now()
    connection.save()
    logger.info("Connection %s refreshed", connection.pk)


# --- disconnecting ----------------------------------------------------------------------------


def connection_revoke(connection: UpstreamConnection) -> bool:
    """Revoke the connection's tokens where its authorization server offers it (RFC 7009),
    then delete it; return whether the server confirmed.

    The row is locked meanwhile, so no refresh slips a new token past the revocation. The
    connection is deleted whether or not the server could be told: the user asked for it.
    """
    with transaction.atomic():
        row = (
            UpstreamConnection.objects.select_for_update()
            .select_related("upstream")
            .filter(pk=connection.pk)
            .first()
        )
        if row is None:
            return False
        confirmed = False
        if row.revocation_endpoint:
            try:
                confirmed = async_to_sync(_revoke_tokens)(row)
            except (ConnectError, CredentialError) as exc:
                logger.warning("Connection %s: revocation failed: %s", row.pk, exc)
        token = _tokens.get((row.upstream_id, row.user_id))
        if token is not None:
            token.gone = True
        row.delete()
        logger.info("Connection %s of user %s revoked and deleted", row.pk, row.user_id)
    return confirmed


# How long deleting an upstream spends telling its authorization server about its users'
# connections; those left are not told (logged).
REVOKE_ALL_SECONDS = 30.0


def upstream_connections_revoke(
    upstream: Upstream, *, budget_seconds: float = REVOKE_ALL_SECONDS
) -> None:
    """Revoke every user's connection to ``upstream`` at its authorization server (as
    ``connection_revoke`` does: best effort, each request bounded by ``REQUEST_SECONDS``) once
    the transaction deleting the upstream commits; the rows go with the upstream.

    Nothing is revoked if that transaction rolls back (a dry run, an import refused later):
    the users keep working connections. Once ``budget_seconds`` have passed the rest are not
    told, so deleting an upstream whose authorization server hangs takes bounded time; each
    is logged by id, never a token. Call it inside the deleting transaction.
    """
    rows = list(
        UpstreamConnection.objects.filter(upstream=upstream)
        .select_related("upstream")
        .order_by("pk")
    )
    if rows:
        transaction.on_commit(partial(_revoke_all, rows, budget_seconds), robust=True)


def _revoke_all(rows: list[UpstreamConnection], budget_seconds: float) -> int:
    """Revoke ``rows`` (deleted already) at their authorization server; return how many it
    confirmed."""
    deadline = time.monotonic() + budget_seconds
    confirmed = 0
    for row in rows:
        if (token := _tokens.get((row.upstream_id, row.user_id))) is not None:
            token.gone = True
        if not row.revocation_endpoint:
            continue
        if time.monotonic() >= deadline:
            logger.warning(
                "Connection %s of user %s deleted with upstream %s, not revoked: out of time",
                row.pk,
                row.user_id,
                row.upstream.name,
            )
            continue
        try:
            confirmed += async_to_sync(_revoke_tokens)(row)
        except (ConnectError, CredentialError) as exc:
            logger.warning("Connection %s: revocation failed: %s", row.pk, exc)
    logger.info(
        "Upstream %s deleted: %s of %s connection(s) revoked", rows[0].upstream.name,
        confirmed, len(rows),
    )  # fmt: skip
    return confirmed


async def _revoke_tokens(row: UpstreamConnection) -> bool:
    secret = (
        decrypt_value(row.client_secret_encrypted, "client secret")
        if row.client_secret_encrypted
        else ""
    )
    tokens = [("refresh_token", row.refresh_token_encrypted)] if row.refresh_token_encrypted else []
    tokens.append(("access_token", row.access_token_encrypted))
    confirmed = True
    for hint, encrypted in tokens:
        form = {"token": decrypt_value(encrypted, hint.replace("_", " ")), "token_type_hint": hint}
        headers = _client_auth(row.client_id, secret, row.token_endpoint_auth_method, form)
        answer = await _fetch(
            _policy(row.upstream),
            "POST",
            row.revocation_endpoint,
            where=f"The authorization server of {row.upstream.name!r}",
            headers=headers,
            form=form,
        )
        # RFC 7009 section 2.2: 200 whether or not the token was still valid.
        confirmed = confirmed and answer.status == 200
    return confirmed
