"""stdio upstreams: the allow-list as configured, the bridge as the web side reaches it, and
the launcher the bridge asks what to start.

The web and worker processes reach a stdio upstream like any other, at
``MCP_STDIO_BRIDGE_URL/<name>/mcp`` with the bridge's secret in a header
(``stdio_bridge``); ``services.upstream_targets.upstream_resolve`` builds that target. The bridge
(``manage.py mcp_stdio_bridge``) calls ``stdio_launch`` when a session starts: it reads the
upstream row again, checks it against the allow-list as it is now, and decrypts the
credentials its environment takes. Nothing here starts a process.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from django.conf import settings

from mcp_app.bridge.app import LaunchRefused
from mcp_app.bridge.servers import (
    SECRET_HEADER,
    AllowListError,
    Launch,
    NotAllowed,
    StdioServer,
    bridge_secret,
    check_request,
    child_env,
    parse_allow_list,
)
from mcp_app.conf import get_conf
from mcp_app.executors.netguard import global_policy
from mcp_app.models import Credential, Upstream
from mcp_app.protocol.results import ToolError
from mcp_app.services.credentials import LoadedCredential, credential_load, credential_resolve
from mcp_app.services.database import in_thread


@functools.lru_cache(maxsize=4)
def _parsed(raw: str) -> dict[str, StdioServer]:
    return parse_allow_list(raw)


def stdio_servers() -> dict[str, StdioServer]:
    """The administrator's allow-list (``MCP_STDIO_SERVERS``) by server name.

    Raises:
        AllowListError: the setting is not a valid allow-list.
    """
    return _parsed(get_conf().MCP_STDIO_SERVERS)


@dataclass(frozen=True, slots=True)
class Bridge:
    """Where an upstream's bridge endpoint is, the header it needs, and its host for the
    network guard (only this host is let through for stdio targets)."""

    url: str
    host: str
    headers: Mapping[str, str]
    secret: str


def stdio_bridge_secret() -> str:
    return bridge_secret(get_conf().MCP_STDIO_BRIDGE_SECRET, settings.SECRET_KEY)


def stdio_bridge(name: str) -> Bridge:
    """The bridge endpoint of the stdio upstream ``name``.

    Raises:
        ToolError: no bridge is configured (``MCP_STDIO_BRIDGE_URL``).
    """
    base = get_conf().MCP_STDIO_BRIDGE_URL.strip().rstrip("/")
    host = urlsplit(base).hostname if base else None
    if not base or not host:
        raise ToolError(
            f"The upstream {name!r} is a stdio server, and no stdio bridge is configured "
            "(MCP_STDIO_BRIDGE_URL)."
        )
    secret = stdio_bridge_secret()
    return Bridge(
        url=f"{base}/{quote(name, safe='')}/mcp",
        host=host,
        headers={SECRET_HEADER: secret},
        secret=secret,
    )


def stdio_credentials(stdio_env: Mapping[str, str]) -> dict[str, LoadedCredential]:
    """Load (decrypt) the credential of each variable of an upstream's ``stdio_env``.

    Raises:
        ToolError: a credential is missing or cannot be decrypted.
    """
    return {variable: credential_load(name) for variable, name in stdio_env.items()}


async def credential_env_value(loaded: LoadedCredential) -> str:
    """The value a credential gives an environment variable: its secret (token, password or
    key), or for OAuth client credentials an access token fetched now."""
    if loaded.kind == Credential.Kind.OAUTH_CLIENT_CREDENTIALS:
        auth = await credential_resolve(loaded=loaded, policy=global_policy())
        return auth.secrets[1]
    return loaded.secret


def _launch_row(name: str) -> tuple[Upstream, StdioServer, dict[str, LoadedCredential]]:
    upstream = Upstream.objects.filter(name=name).first()
    if upstream is None or upstream.transport != Upstream.Transport.STDIO:
        raise LaunchRefused(f"There is no stdio upstream named {name!r}.")
    if not upstream.enabled:
        raise LaunchRefused(f"The upstream {name!r} is disabled.")
    try:
        server = stdio_servers().get(upstream.stdio_server)
    except AllowListError as exc:
        raise LaunchRefused(f"The stdio allow-list is invalid: {exc}") from None
    if server is None:
        raise LaunchRefused(
            f"The stdio server {upstream.stdio_server!r} of upstream {name!r} is no longer "
            "allowed (MCP_STDIO_SERVERS)."
        )
    try:
        check_request(
            server,
            args=upstream.stdio_args,
            cwd=upstream.stdio_cwd,
            env_names=list(upstream.stdio_env),
        )
    except NotAllowed as exc:
        raise LaunchRefused(str(exc)) from None
    try:
        loaded = stdio_credentials(upstream.stdio_env)
    except ToolError as exc:
        raise LaunchRefused(exc.message) from None
    return upstream, server, loaded


async def stdio_launch(name: str) -> Launch:
    """What the bridge starts for a new session of the stdio upstream ``name``.

    Raises:
        LaunchRefused: unknown, disabled, not stdio, no longer allowed, or a credential
            cannot be read; the message says which.
    """
    upstream, server, loaded = await in_thread(_launch_row)(name)
    values: dict[str, str] = {}
    for variable, credential in loaded.items():
        try:
            values[variable] = await credential_env_value(credential)
        except ToolError as exc:
            raise LaunchRefused(exc.message) from None
    return Launch(
        upstream=name,
        argv=(*server.command, *upstream.stdio_args),
        env=child_env(server, os.environ, values),
        cwd=upstream.stdio_cwd or server.cwd or os.environ.get("HOME", "/"),
        limits=server.limits,
        secrets=tuple(values.values()),
        max_children=upstream.max_sessions,
        idle_seconds=upstream.session_idle_seconds,
    )
