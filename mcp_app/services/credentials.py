"""Credential secrets: encryption at rest, key rotation, and resolving a credential for a call.

Secrets are Fernet tokens made with the keys in MCP_SECRET_KEYS (comma separated): the first
key encrypts, every key decrypts (``MultiFernet``). Rotation: prepend a new key, run
``manage.py rotate_credentials`` (re-encrypts every row with the first key), then drop the old
key. Without MCP_SECRET_KEYS the key is derived from SECRET_KEY with HKDF-SHA256, and a system
check warns: changing SECRET_KEY would then make every stored secret unreadable.

``credential_resolve`` turns a credential name into an ``executors.base.HttpAuth`` (plain
headers, query and the strings to redact), fetching and caching OAuth client-credentials
tokens in this process through the same SSRF guard as the tools. No secret is ever logged or
put in an exception message.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import logging
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus, urlencode

import httpx
import orjson
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.db import transaction

from mcp_app.conf import get_conf
from mcp_app.executors.base import HttpAuth
from mcp_app.executors.netguard import (
    BlockedAddressError,
    GuardedClient,
    NetworkPolicy,
    ResponseTooLargeError,
    TooManyRedirectsError,
    safe_url,
)
from mcp_app.executors.redaction import Redactor
from mcp_app.models import Credential, Upstream, UpstreamConnection
from mcp_app.protocol.results import ToolError
from mcp_app.services.database import in_thread

logger = logging.getLogger(__name__)

_HKDF_SALT = b"mcphost credential secrets"
_HKDF_INFO = b"mcp_app.Credential.secret_encrypted v1"
# A token is refreshed this long before it expires (or at half its lifetime, if shorter).
TOKEN_REFRESH_MARGIN_SECONDS = 60.0
# Lifetime assumed when a token response has no expires_in (RFC 6749 section 5.1: optional).
DEFAULT_TOKEN_LIFETIME_SECONDS = 300.0
TOKEN_RESPONSE_MAX_BYTES = 64 * 1024


class CredentialError(Exception):
    """A credential cannot be used; the message names it and never holds a secret."""


def secret_keys_configured() -> bool:
    return bool(get_conf().MCP_SECRET_KEYS.strip())


def configured_keys() -> list[bytes]:
    """Return the Fernet keys of MCP_SECRET_KEYS, or the key derived from SECRET_KEY.

    Raises:
        ValueError: a configured key is not a Fernet key (32 url-safe base64-encoded bytes).
    """
    raw = [key.strip() for key in get_conf().MCP_SECRET_KEYS.split(",") if key.strip()]
    if not raw:
        return [_derived_key(settings.SECRET_KEY)]
    keys = [key.encode("ascii") for key in raw]
    for position, key in enumerate(keys, start=1):
        try:
            Fernet(key)
        except ValueError:
            raise ValueError(
                f"MCP_SECRET_KEYS: key {position} is not a Fernet key (generate one with "
                "Fernet.generate_key())."
            ) from None
    return keys


@functools.lru_cache(maxsize=4)
def _derived_key(secret_key: str) -> bytes:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=_HKDF_SALT, info=_HKDF_INFO).derive(
        secret_key.encode("utf-8")
    )
    return base64.urlsafe_b64encode(derived)


def _fernet() -> MultiFernet:
    return _multi_fernet(tuple(configured_keys()))


@functools.lru_cache(maxsize=4)
def _multi_fernet(keys: tuple[bytes, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key) for key in keys])


def encrypt_secret(secret: str) -> str:
    """Return ``secret`` encrypted with the first key."""
    return _fernet().encrypt(secret.encode("utf-8")).decode("ascii")


def decrypt_secret(credential: Credential) -> str:
    """Return the plain secret of ``credential``.

    Raises:
        CredentialError: no configured key decrypts it.
    """
    try:
        return _fernet().decrypt(credential.secret_encrypted.encode("ascii")).decode("utf-8")
    except InvalidToken:
        raise CredentialError(
            f"The secret of credential {credential.name!r} cannot be decrypted with the "
            "configured keys (MCP_SECRET_KEYS or SECRET_KEY changed?)."
        ) from None


def decrypt_value(token: str, what: str) -> str:
    """Return the plain value of ``token`` (made by ``encrypt_secret``); ``what`` names it.

    Raises:
        CredentialError: no configured key decrypts it.
    """
    try:
        return _fernet().decrypt(token.encode("ascii")).decode("utf-8")
    except InvalidToken:
        raise CredentialError(
            f"The {what} cannot be decrypted with the configured keys (MCP_SECRET_KEYS or "
            "SECRET_KEY changed?)."
        ) from None


def credential_set_secret(*, credential: Credential, secret: str) -> None:
    """Store ``secret`` on ``credential`` (encrypted; the caller saves the row)."""
    credential.secret_encrypted = encrypt_secret(secret)


def credential_create(*, name: str, kind: str, secret: str, **fields: Any) -> Credential:
    """Create a credential with its secret encrypted.

    Raises:
        ValidationError: a field is invalid or the name is taken.
    """
    credential = Credential(name=name, kind=kind, **fields)
    credential_set_secret(credential=credential, secret=secret)
    credential.full_clean()
    credential.save()
    return credential


@transaction.atomic
def credential_rotate_all() -> int:
    """Re-encrypt every stored secret with the first key; return how many rows changed:
    credentials, upstreams' OAuth client secrets, and users' upstream connections (tokens and
    client secret).

    All or nothing: one unreadable row rolls back the whole rotation, so the old keys stay
    needed until it is fixed.

    Raises:
        CredentialError: a row cannot be decrypted with any configured key.
    """
    fernet = _fernet()
    count = 0
    for credential in Credential.objects.select_for_update().order_by("pk"):
        try:
            token = fernet.rotate(credential.secret_encrypted.encode("ascii")).decode("ascii")
        except InvalidToken:
            raise CredentialError(
                f"The secret of credential {credential.name!r} (id {credential.pk}) cannot be "
                "decrypted with any configured key; nothing was rotated."
            ) from None
        # update(), not save(): re-encrypting is not an edit, updated_at stays.
        Credential.objects.filter(pk=credential.pk).update(secret_encrypted=token)
        count += 1
    for model, names in (
        (Upstream, ("oauth_client_secret_encrypted",)),
        (
            UpstreamConnection,
            ("access_token_encrypted", "refresh_token_encrypted", "client_secret_encrypted"),
        ),
    ):
        for row in model.objects.select_for_update().order_by("pk"):
            values = {name: getattr(row, name) for name in names if getattr(row, name)}
            if not values:
                continue
            try:
                rotated = {
                    name: fernet.rotate(value.encode("ascii")).decode("ascii")
                    for name, value in values.items()
                }
            except InvalidToken:
                raise CredentialError(
                    f"A secret of {model._meta.verbose_name} {row.pk} cannot be decrypted with "
                    "any configured key; nothing was rotated."
                ) from None
            model.objects.filter(pk=row.pk).update(**rotated)
            count += 1
    return count


@dataclass(frozen=True, slots=True)
class LoadedCredential:
    """A credential row's plain values, loaded for one call."""

    pk: int
    name: str
    kind: str
    version: str
    header_name: str
    query_param: str
    username: str
    token_url: str
    client_id: str
    scopes: str
    secret: str

    def __repr__(self) -> str:
        return f"LoadedCredential(name={self.name!r}, kind={self.kind!r})"


def credential_load(name: str) -> LoadedCredential:
    """Read the credential ``name`` and decrypt its secret (a database read: call it in a thread
    from async code).

    Raises:
        ToolError: the credential is missing or cannot be decrypted with the configured keys.
    """
    credential = Credential.objects.filter(name=name).first()
    if credential is None:
        raise ToolError(f"The credential {name!r} does not exist.")
    try:
        secret = decrypt_secret(credential)
    except CredentialError as exc:
        logger.error("Credential %r cannot be decrypted with the configured keys", name)
        raise ToolError(str(exc)) from None
    return LoadedCredential(
        pk=credential.pk,
        name=credential.name,
        kind=credential.kind,
        version=credential.updated_at.isoformat(),
        header_name=credential.header_name,
        query_param=credential.query_param,
        username=credential.username,
        token_url=credential.token_url,
        client_id=credential.client_id,
        scopes=credential.scopes,
        secret=secret,
    )


async def credential_resolve_by_name(*, name: str, policy: NetworkPolicy) -> HttpAuth:
    """Load the credential ``name`` and resolve it (``Resolvers.credential`` of the executors).

    Raises:
        ToolError: the credential is missing, unreadable, or its OAuth token fetch failed.
    """
    loaded = await in_thread(credential_load)(name)
    return await credential_resolve(loaded=loaded, policy=policy)


async def credential_resolve(*, loaded: LoadedCredential, policy: NetworkPolicy) -> HttpAuth:
    """Turn a loaded credential into request headers or query, and the strings to redact."""
    secret = loaded.secret
    if loaded.kind == Credential.Kind.BEARER:
        return HttpAuth(headers={"Authorization": f"Bearer {secret}"}, secrets=(secret,))
    if loaded.kind == Credential.Kind.BASIC:
        token = base64.b64encode(f"{loaded.username}:{secret}".encode()).decode("ascii")
        return HttpAuth(headers={"Authorization": f"Basic {token}"}, secrets=(secret, token))
    if loaded.kind == Credential.Kind.API_KEY_HEADER:
        return HttpAuth(headers={loaded.header_name: secret}, secrets=(secret,))
    if loaded.kind == Credential.Kind.API_KEY_QUERY:
        return HttpAuth(query={loaded.query_param: secret}, secrets=(secret,))
    if loaded.kind == Credential.Kind.OAUTH_CLIENT_CREDENTIALS:
        access_token, client_token = await _oauth_token(loaded, policy)
        return HttpAuth(
            headers={"Authorization": f"Bearer {access_token}"},
            secrets=(secret, access_token, client_token),
        )
    raise ToolError(f"The credential {loaded.name!r} has an unknown kind {loaded.kind!r}.")


# (credential pk, updated_at) -> (access token, monotonic time to refresh at). An edit of the
# row changes updated_at, so a new client id or secret never reuses an old token.
_token_cache: dict[tuple[int, str], tuple[str, float]] = {}


def clear_token_cache() -> None:
    _token_cache.clear()


async def _oauth_token(loaded: LoadedCredential, policy: NetworkPolicy) -> tuple[str, str]:
    # RFC 6749 section 2.3.1: client_secret_basic, id and secret form-encoded first.
    client_token = base64.b64encode(
        f"{quote_plus(loaded.client_id)}:{quote_plus(loaded.secret)}".encode()
    ).decode("ascii")
    key = (loaded.pk, loaded.version)
    cached = _token_cache.get(key)
    if cached is not None and time.monotonic() < cached[1]:
        return cached[0], client_token
    redactor = Redactor((loaded.secret, client_token))
    form = {"grant_type": "client_credentials"}
    if loaded.scopes.strip():
        form["scope"] = " ".join(loaded.scopes.split())
    headers = {
        "Authorization": f"Basic {client_token}",
        "Content-Type": "application/x-www-form-urlencoded",
        "Accept": "application/json",
    }
    conf = get_conf()
    timeout = conf.MCP_HTTP_TIMEOUT_SECONDS
    where = f"The token endpoint of credential {loaded.name!r}"
    try:
        async with (
            GuardedClient(
                policy, max_response_bytes=TOKEN_RESPONSE_MAX_BYTES, max_redirects=0,
                timeout=timeout,
            ) as client,
            asyncio.timeout(timeout),
        ):  # fmt: skip
            response = await client.request(
                "POST", loaded.token_url, headers=headers, content=urlencode(form).encode()
            )
    except (BlockedAddressError, ResponseTooLargeError, TooManyRedirectsError) as exc:
        raise ToolError(redactor(f"{where}: {exc}")) from None
    except (TimeoutError, httpx.HTTPError) as exc:
        raise ToolError(
            f"{where} ({safe_url(loaded.token_url)}) failed: {type(exc).__name__}."
        ) from None
    try:
        data = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        data = None
    if response.status != 200 or not isinstance(data, dict):
        excerpt = " ".join(redactor(response.content.decode("utf-8", "replace")).split())[:300]
        raise ToolError(f"{where} answered HTTP {response.status}: {excerpt}")
    access_token = data.get("access_token")
    token_type = str(data.get("token_type", "bearer"))
    if not isinstance(access_token, str) or not access_token or token_type.lower() != "bearer":
        raise ToolError(f"{where} did not return a bearer access_token.")
    lifetime = data.get("expires_in", DEFAULT_TOKEN_LIFETIME_SECONDS)
    if isinstance(lifetime, bool) or not isinstance(lifetime, int | float) or lifetime <= 0:
        lifetime = DEFAULT_TOKEN_LIFETIME_SECONDS
    margin = min(TOKEN_REFRESH_MARGIN_SECONDS, lifetime / 2)
    _token_cache[key] = (access_token, time.monotonic() + lifetime - margin)
    return access_token, client_token
