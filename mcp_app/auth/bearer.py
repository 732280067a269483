"""Bearer tokens on MCP requests: a token becomes a ``Principal``, or a challenge to answer.

The MCP consumer runs no Django middleware, and DOT's resource-server helpers are sync views,
so the check is ours: the token is looked up by its SHA-256 checksum (DOT stores no plaintext,
``COMPLIANT_BCP_RFC9700_TOKEN_STORAGE``), must belong to a user and a client, must not have
expired, must have been issued for this endpoint's resource (exactly; a token without a
resource is never accepted) and must carry the endpoint's base scope.

What the database says about a token is cached per process for ``OAUTH_TOKEN_CACHE_SECONDS``
(bounded in size), so a busy client costs no query per request; that is also how long a
revoked token may still be accepted (docs/auth.md, "Tokens, revocation and expiry").

The ``WWW-Authenticate`` value is built here only. Clients find ``resource_metadata=`` and
``scope=`` with a regex and split the scheme on the first space (auth.md §4.5), so the header is
``Bearer`` + one space + plain ``name="value"`` pairs, and descriptions never contain ``=``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qs

from oauth2_provider.models import get_access_token_model

from mcp_app.auth import resources
from mcp_app.conf import get_site
from mcp_app.services import metrics
from mcp_app.services.database import in_thread
from mcp_app.services.endpoint_directory import EndpointState
from mcp_app.services.process_cache import ProcessCache

# Checksums kept per process; the least recently stored are dropped beyond this.
TOKEN_CACHE_SIZE = 10_000


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: a user through an OAuth client, or anonymous (public endpoints)."""

    key: str = ""
    user_id: int | None = None
    username: str = ""
    client_id: str = ""
    scopes: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()
    # Unix time the token expires at; None when there is no token.
    expires_at: float | None = None

    def seconds_left(self, now: float | None = None) -> float | None:
        if self.expires_at is None:
            return None
        return self.expires_at - (time.time() if now is None else now)


ANONYMOUS = Principal()


@dataclass(frozen=True, slots=True)
class Challenge:
    """An answer refusing the request: HTTP status and the RFC 6750 error (or none)."""

    status: int
    error: str
    description: str
    scope: str

    def header(self, slug: str) -> str:
        params = [f'resource_metadata="{resources.metadata_url(slug)}"']
        if self.scope:
            params.append(f'scope="{self.scope}"')
        if self.error:
            params.append(f'error="{self.error}"')
            params.append(f'error_description="{_quoted(self.description)}"')
        return "Bearer " + ", ".join(params)


def _quoted(text: str) -> str:
    """Text safe inside a quoted parameter: it cannot end the string or look like ``name=``."""
    return text.replace("\\", "").replace('"', "'").replace("=", " ")


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """What the database says about one access token (cached), and the principal it makes:
    built once per lookup, so a request with a cached token builds nothing."""

    user_id: int
    expires_at: float
    audiences: frozenset[str]
    principal: Principal


# Token lookups by checksum (misses included), trusted for OAUTH_TOKEN_CACHE_SECONDS.
TokenCache = ProcessCache[str, TokenInfo | None]
_cache: TokenCache = ProcessCache(TOKEN_CACHE_SIZE)


def clear_token_cache() -> None:
    """Forget every cached token lookup of this process (tests, and after mass revocation)."""
    _cache.clear()


def checksum(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def load_token(token_checksum: str) -> TokenInfo | None:
    """Look a token up (two queries): None unless it belongs to an active user and a client.

    DCR registration tokens (no user) and client-credentials tokens never pass.
    """
    row = (
        get_access_token_model()
        .objects.select_related("user", "application")
        .filter(token_checksum=token_checksum)
        .first()
    )
    if row is None or row.user is None or row.application is None or not row.user.is_active:
        return None
    audiences = frozenset(
        found for found in (resources.canonical(str(uri)) for uri in row.resource or ()) if found
    )
    expires_at = row.expires.timestamp()
    client_id = row.application.client_id
    return TokenInfo(
        user_id=row.user.pk,
        expires_at=expires_at,
        audiences=audiences,
        principal=Principal(
            key=f"user:{row.user.pk}/client:{client_id}",
            user_id=row.user.pk,
            username=row.user.get_username(),
            client_id=client_id,
            scopes=frozenset(row.scope.split()),
            groups=frozenset(row.user.groups.values_list("name", flat=True)),
            expires_at=expires_at,
        ),
    )


_aload_token = in_thread(load_token)


async def token_info(token: str, cache: TokenCache = _cache) -> TokenInfo | None:
    """The token's info, from this process's cache while it is fresh, else from the database."""
    key = checksum(token)
    ttl = get_site().OAUTH_TOKEN_CACHE_SECONDS
    if ttl > 0:
        entry = cache.fresh(key, ttl)
        if entry is not None:
            metrics.TOKEN_CACHE_HIT.inc()
            return entry.value
        metrics.TOKEN_CACHE_MISS.inc()
    info = await _aload_token(key)
    if ttl > 0:
        cache.put(key, info)
    return info


def base_challenge_scope(state: EndpointState) -> str:
    """What a 401 asks for: the base scope, or every scope of an endpoint that has none."""
    return state.base_scope or " ".join(name for name, _ in state.scopes)


def step_up_scope(state: EndpointState, granted: Iterable[str], needed: str) -> str:
    """Granted scopes of this endpoint plus the one needed (SDK 1.x replaces, never merges)."""
    own = {name for name, _ in state.scopes}
    scopes = sorted({scope for scope in granted if scope in own} | {needed})
    return " ".join(scopes)


def _missing(state: EndpointState, error: str = "", description: str = "") -> Challenge:
    return Challenge(401, error, description, base_challenge_scope(state))


def _bearer_token(
    headers: Mapping[str, Sequence[str]], query_string: bytes
) -> str | Challenge | None:
    """The bearer token of a request, None when it has none, or a 400 for a malformed one."""
    # Parsed only when there is a query at all: MCP requests almost never carry one.
    if query_string and "access_token" in parse_qs(query_string.decode("latin-1")):
        return Challenge(
            400, "invalid_request", "Send the access token in the Authorization header only", ""
        )
    values = headers.get("authorization") or []
    if not values:
        return None
    if len(values) > 1:
        return Challenge(400, "invalid_request", "Send one Authorization header", "")
    scheme, _, token = values[0].partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = token.strip()
    if not token or len(token.split()) != 1:
        return Challenge(400, "invalid_request", "The Bearer credentials are malformed", "")
    return token


async def authenticate(
    state: EndpointState,
    headers: Mapping[str, Sequence[str]],
    query_string: bytes,
    *,
    now: float | None = None,
) -> Principal | Challenge:
    """The principal of a request to an OAuth endpoint, or the challenge that refuses it."""
    found = _bearer_token(headers, query_string)
    if isinstance(found, Challenge):
        return Challenge(found.status, found.error, found.description, base_challenge_scope(state))
    if found is None:
        return _missing(state)
    info = await token_info(found)
    if info is None:
        return _missing(state, "invalid_token", "The access token is unknown or was revoked")
    if info.expires_at <= (time.time() if now is None else now):
        return _missing(state, "invalid_token", "The access token has expired")
    if resources.endpoint_resource(state.slug) not in info.audiences:
        return _missing(state, "invalid_token", "The access token was issued for another resource")
    principal = info.principal
    if state.base_scope and state.base_scope not in principal.scopes:
        return Challenge(
            403,
            "insufficient_scope",
            f"This endpoint needs the {state.base_scope} scope",
            step_up_scope(state, principal.scopes, state.base_scope),
        )
    return principal
