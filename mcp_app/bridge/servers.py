"""The administrator's allow-list of stdio MCP servers, and what an operator may ask of it.

``MCP_STDIO_SERVERS`` is a JSON object, one entry per server an operator may register::

    {
      "everything": {
        "command": ["node", "/opt/everything/dist/index.js", "stdio"],
        "args": ["--verbose", "--root=*"],
        "env": {"LOG_LEVEL": "info"},
        "credential_env": ["API_TOKEN"],
        "cwd": "/srv/mcp",
        "cwd_allowed": ["/srv/mcp/a", "/srv/mcp/b"],
        "memory_mb": 512, "cpu_seconds": 3600, "open_files": 1024
      }
    }

``command`` (required) is the program and its fixed arguments. An operator may append
arguments from ``args`` (each equal to an entry, or starting with an entry's text before a
final ``*``), fill the variables of ``credential_env`` from credentials, and pick a working
directory among ``cwd`` and ``cwd_allowed``. There is no shell: arguments reach the program
verbatim. The child's environment is PATH, HOME and LANG of the bridge, ``env``, and the
credential variables, nothing else. Limits are set in the child before it starts
(``launch.py``): address space (``memory_mb``), CPU time and open files.

Pure: standard library only, so the model's validation, the services and the bridge share it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# The header every request to the bridge carries (the shared secret); compared in constant
# time, never logged.
SECRET_HEADER = "X-Mcphost-Bridge-Secret"
_KEYS = frozenset(
    {"command", "args", "env", "credential_env", "cwd", "cwd_allowed", "memory_mb",
     "cpu_seconds", "open_files"}
)  # fmt: skip
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
# The bridge's own variables a child inherits (everything else of the bridge stays out).
INHERITED_ENV = ("PATH", "HOME", "LANG")


class AllowListError(ValueError):
    """``MCP_STDIO_SERVERS`` is not a valid allow-list (the message says where)."""


class NotAllowed(ValueError):
    """An operator asked for something the allow-list does not allow (the message says what;
    ``part`` is which: "args", "cwd" or "env")."""

    def __init__(self, part: str, message: str) -> None:
        super().__init__(message)
        self.part = part


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits of a child (None: the bridge's own)."""

    memory_mb: int | None = None
    cpu_seconds: int | None = None
    open_files: int | None = None


@dataclass(frozen=True, slots=True)
class StdioServer:
    """One allow-listed server."""

    name: str
    command: tuple[str, ...]
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    credential_env: tuple[str, ...] = ()
    cwd: str = ""
    cwd_allowed: tuple[str, ...] = ()
    limits: Limits = Limits()

    def argument_allowed(self, argument: str) -> bool:
        for allowed in self.args:
            if allowed.endswith("*") and argument.startswith(allowed[:-1]):
                return True
            if argument == allowed:
                return True
        return False


@dataclass(frozen=True, slots=True)
class Launch:
    """Exactly what the bridge starts for one session of an upstream.

    ``secrets`` are the credential values in ``env``: redacted from the child's stderr in
    the bridge's log. ``max_children`` and ``idle_seconds`` come from the upstream's
    ``max_sessions`` and ``session_idle_seconds``.
    """

    upstream: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(repr=False)
    cwd: str
    limits: Limits = Limits()
    secrets: tuple[str, ...] = field(default=(), repr=False)
    max_children: int = 100
    idle_seconds: float = 600.0


def parse_allow_list(raw: str | Mapping[str, Any]) -> dict[str, StdioServer]:
    """Parse ``MCP_STDIO_SERVERS`` (JSON text, or the object itself); empty: no server.

    Raises:
        AllowListError: not a JSON object of valid entries.
    """
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise AllowListError(f"MCP_STDIO_SERVERS is not valid JSON: {exc}.") from None
    else:
        data = raw
    if not isinstance(data, Mapping):
        raise AllowListError("MCP_STDIO_SERVERS must be a JSON object of servers by name.")
    return {name: _server(name, entry) for name, entry in data.items()}


def _server(name: Any, entry: Any) -> StdioServer:
    where = f"MCP_STDIO_SERVERS[{name!r}]"
    if not isinstance(name, str) or not _SERVER_NAME.match(name):
        raise AllowListError(f"{where}: a server name is letters, digits, '_', '.' and '-'.")
    if not isinstance(entry, Mapping):
        raise AllowListError(f"{where} must be an object.")
    unknown = set(entry) - _KEYS
    if unknown:
        raise AllowListError(f"{where}: unknown keys {', '.join(sorted(unknown))}.")
    command = _strings(entry.get("command"), f"{where}.command")
    if not command:
        raise AllowListError(f"{where}.command must name the program to run.")
    env = entry.get("env", {})
    if not isinstance(env, Mapping) or not all(
        isinstance(key, str) and _ENV_NAME.match(key) and isinstance(value, str)
        for key, value in env.items()
    ):
        raise AllowListError(f"{where}.env must map variable names to strings.")
    credential_env = _strings(entry.get("credential_env", []), f"{where}.credential_env")
    if not all(_ENV_NAME.match(variable) for variable in credential_env):
        raise AllowListError(f"{where}.credential_env must list variable names.")
    cwd = entry.get("cwd", "")
    if not isinstance(cwd, str):
        raise AllowListError(f"{where}.cwd must be a directory.")
    limits = {}
    for key in ("memory_mb", "cpu_seconds", "open_files"):
        value = entry.get(key)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 1
        ):
            raise AllowListError(f"{where}.{key} must be a positive integer.")
        limits[key] = value
    return StdioServer(
        name=name,
        command=tuple(command),
        args=tuple(_strings(entry.get("args", []), f"{where}.args")),
        env=dict(env),
        credential_env=tuple(credential_env),
        cwd=cwd,
        cwd_allowed=tuple(_strings(entry.get("cwd_allowed", []), f"{where}.cwd_allowed")),
        limits=Limits(**limits),
    )


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise AllowListError(f"{where} must be a list of strings.")
    return value


def check_request(
    server: StdioServer, *, args: Sequence[str], cwd: str, env_names: Sequence[str]
) -> None:
    """Check an operator's extra arguments, working directory and credential variables.

    Raises:
        NotAllowed: the first thing the allow-list does not allow.
    """
    for argument in args:
        if not server.argument_allowed(argument):
            raise NotAllowed(
                "args",
                f"The argument {argument!r} is not allowed for the stdio server "
                f"{server.name!r} (allowed: {', '.join(server.args) or 'none'}).",
            )
    if cwd and cwd != server.cwd and cwd not in server.cwd_allowed:
        raise NotAllowed(
            "cwd",
            f"The working directory {cwd!r} is not allowed for the stdio server {server.name!r}.",
        )
    for name in env_names:
        if name not in server.credential_env:
            raise NotAllowed(
                "env",
                f"The variable {name!r} is not one the stdio server {server.name!r} takes "
                f"from a credential (allowed: {', '.join(server.credential_env) or 'none'}).",
            )


def child_env(
    server: StdioServer, inherited: Mapping[str, str], credentials: Mapping[str, str]
) -> dict[str, str]:
    """The child's whole environment: PATH, HOME and LANG, the fixed env, the credentials."""
    env = {name: inherited[name] for name in INHERITED_ENV if name in inherited}
    env.setdefault("LANG", "C.UTF-8")
    return {**env, **server.env, **credentials}


def bridge_secret(configured: str, secret_key: str) -> str:
    """The bridge's shared secret: the configured one, else one derived from SECRET_KEY."""
    if configured:
        return configured
    return hmac.new(secret_key.encode(), b"mcphost stdio bridge", hashlib.sha256).hexdigest()
