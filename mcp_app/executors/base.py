"""The Executor interface every tool kind implements, its prepared config, and ConfigError;
and what the services resolve for a call (``Resolvers``: ``HttpAuth``, ``UpstreamTarget``).

An executor owns its kind end to end: it turns a tool's plain ``config`` into a typed
``PreparedConfig`` once (``prepare``, when the catalog snapshot is built or the operator
saves), gets what a call needs from outside before running (``resolve``, given ``Resolvers``
by the services), runs the call (``run``), and supplies the admin form's fields for its config
(``config_form``, ``form_initial``, ``config_from_form``). It never touches rows or the
transport, so the same code runs inline in a web process or in a Celery worker.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from django import forms
from django.conf import settings

from mcp_app.executors.netguard import NetworkPolicy
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.results import ToolResult


def setting_list(name: str, default: Sequence[str]) -> list[str]:
    """Read a list setting; a string (as set from the environment) is split on commas."""
    value = getattr(settings, name, default)
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return list(value)


class ConfigError(Exception):
    """A tool's config is unusable; the message is shown to the operator in the admin."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def shown(value: Any) -> str:
    """A config value as a message shows it: as JSON, the form the config is written in
    (``null`` and ``"x"``, not Python's ``None`` and ``'x'``)."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


class ConfigFormError(Exception):
    """The admin form's config fields do not make a usable config: messages by field name."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        super().__init__("; ".join(errors.values()))
        self.errors = dict(errors)


class PreparedConfig:
    """A kind's config, checked and parsed once; each kind subclasses it as a frozen dataclass.

    It lives in the catalog snapshot and is shared by every call of the tool, so it must never
    be mutated (``resolve`` returns a copy).
    """

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class HttpAuth:
    """A credential resolved into what goes on a request, plus the strings to redact.

    Built by ``services.credentials``; plain values only, never shown by ``repr``.
    """

    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    query: Mapping[str, str] = field(default_factory=dict, repr=False)
    secrets: tuple[str, ...] = field(default=(), repr=False)


class CallerAuth(Protocol):
    """The caller's own credential at the upstream (per-user OAuth), kept by the services.

    ``headers`` is read before every request sent (refreshing an expired token first), so a
    long-lived session, its notification stream included, always carries the current token.
    """

    async def headers(self) -> Mapping[str, str]:
        """The headers carrying the current token.

        Raises:
            ToolError: the caller has no usable connection (the message says where to connect).
        """
        ...

    def secrets(self) -> tuple[str, ...]:
        """The token values to redact from what the upstream sends."""
        ...

    async def rejected(self, authorization: str) -> None:
        """The upstream refused ``authorization``: get a fresh token, unless one came since.

        Raises:
            ToolError: no fresh token can be had (the connection is gone or expired).
        """
        ...


@dataclass(frozen=True, slots=True)
class UpstreamTarget:
    """An upstream resolved for one call: plain values built by ``services.upstream_targets``.

    ``key`` names the upstream's configuration (its id and last edit): sessions are kept per
    key, so an edit of the URL or credential opens a fresh session.
    """

    key: str
    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    query: Mapping[str, str] = field(default_factory=dict, repr=False)
    secrets: tuple[str, ...] = field(default=(), repr=False)
    connect_timeout: float = 5.0
    call_timeout: float = 60.0
    allow_networks: tuple[str, ...] = ()
    # Hosts let through by name: only the stdio bridge's, for a stdio upstream.
    allow_hosts: tuple[str, ...] = ()
    # One session shared by every caller (the operator says the upstream keeps no per-session
    # state); else one per caller, closed after ``session_idle_seconds`` unused, at most
    # ``max_sessions`` (the least recently used idle one closed to make room).
    stateless: bool = False
    session_idle_seconds: float = 600.0
    max_sessions: int = 100
    # The caller's own token (per-user OAuth), added to every request; None: ``headers`` only.
    caller_auth: CallerAuth | None = field(default=None, repr=False, compare=False)
    # Told how each call went (None: the upstream answered; else why it could not), so the
    # services keep the upstream's health and circuit breaker.
    report: Callable[[str | None], Awaitable[None]] | None = field(
        default=None, repr=False, compare=False
    )
    # Told when the upstream says its tool list changed (the services mark its row, or sync
    # it): this layer reads and writes no rows.
    tools_changed: Callable[[], Awaitable[None]] | None = field(
        default=None, repr=False, compare=False
    )


class Resolvers(Protocol):
    """What the services look up for an executor before a call: the reads it may not do."""

    async def credential(self, name: str, policy: NetworkPolicy) -> HttpAuth:
        """Return the credential ``name`` as request parts, fetching tokens through ``policy``.

        Raises:
            ToolError: the credential is missing, unreadable, or its token fetch failed.
        """
        ...

    async def upstream(self, name: str) -> UpstreamTarget:
        """Return the upstream MCP server ``name`` resolved for one call (credential included).

        Raises:
            ToolError: the upstream is unknown, disabled, failing (breaker open), or its
                credential cannot be resolved.
        """
        ...


@dataclass(frozen=True, slots=True)
class RenderedRequest:
    """The request a tool sends for some arguments, its credential left out (try-it shows it;
    the services mask secret-looking headers and shorten the body)."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: str | None
    credential: str | None


@dataclass(frozen=True, slots=True)
class ConfigReference:
    """A row a config names by its natural key: ``target`` "credential" or "upstream"."""

    key: str  # the config key holding the name
    target: str
    name: str


class CredentialChoiceField(forms.ChoiceField):
    """A config form field naming a credential; the admin fills in the choices (rows)."""


PreparedT = TypeVar("PreparedT", bound=PreparedConfig)


class Executor(Generic[PreparedT]):
    """One tool kind. Subclasses set ``kind``, ``label`` and ``config_form``, and implement
    ``prepare``, ``run`` and ``config_from_form``."""

    kind: ClassVar[str] = ""
    label: ClassVar[str] = ""
    # The admin fields of this kind's config; their names must be unique across kinds.
    config_form: ClassVar[type[forms.Form] | None] = None
    # Whether a 2026-07-28 call's questions must be answered within one run (a question
    # relayed from another server, which may ask differently each run): the services then
    # hold the run open between rounds instead of running it again with the answers.
    holds_questions: ClassVar[bool] = False
    # Whether a call acts on another system (sends a request out): repeating a recorded call
    # there (a replay, services/replay.py) may repeat its side effects, unless the tool's
    # annotations say it is read-only or idempotent.
    reaches_outside: ClassVar[bool] = False

    def prepare(self, config: Mapping[str, Any]) -> PreparedT:
        """Check and parse ``config`` into what ``run`` takes.

        Raises:
            ConfigError: the config cannot run; the message says why.
        """
        raise NotImplementedError("subclasses of Executor must provide prepare()")

    def validate_config(self, config: Mapping[str, Any]) -> None:
        """Check ``config`` without keeping the result (model validation, system checks).

        Raises:
            ConfigError: the config cannot run; the message says why.
        """
        self.prepare(config)

    async def resolve(self, prepared: PreparedT, resolvers: Resolvers) -> PreparedT:
        """Return ``prepared`` completed with what this call needs from outside (credentials).

        Raises:
            ToolError: something it needs cannot be had; the caller reads why.
        """
        return prepared

    async def run(
        self, prepared: PreparedT, arguments: Mapping[str, Any], ctx: ToolCallContext
    ) -> ToolResult:
        """Run the tool with arguments that already passed its input schema.

        Raises:
            ToolError: a failure the caller should read (becomes ``isError: true``).
        """
        raise NotImplementedError("subclasses of Executor must provide run()")

    def form_initial(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """Return the initial values of ``config_form``'s fields for a saved ``config``."""
        return {}

    def config_from_form(
        self, data: Mapping[str, Any], input_schema: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """Build the plain config from ``config_form``'s cleaned data.

        ``input_schema`` is the tool's (None: not given), for rules that tie the two.

        Raises:
            ConfigFormError: the fields do not make a usable config, by field name.
        """
        raise NotImplementedError("subclasses of Executor must provide config_from_form()")

    def save_warnings(self, config: Mapping[str, Any]) -> list[str]:
        """Return what will stop a saved (valid) config from working, for the operator."""
        return []

    def tool_defaults(self, config: Mapping[str, Any]) -> Mapping[str, Any]:
        """Return Tool field values this config declares (title, schemas, hints), if any.

        ``services.catalog_writes`` fills every such field a write leaves empty from them.
        """
        return {}

    def config_references(self, config: Mapping[str, Any]) -> Sequence[ConfigReference]:
        """Return the rows a (valid) ``config`` names; the services check that they exist."""
        return ()

    def config_problems(
        self, config: Mapping[str, Any], input_schema: Mapping[str, Any] | None
    ) -> dict[str, str]:
        """Return, by config key, what is wrong with a valid ``config`` given the tool's
        ``input_schema`` (rules tying the two); empty when nothing is."""
        return {}

    def form_field_of(self, key: str) -> str | None:
        """Return the ``config_form`` field that edits config ``key``, if one does."""
        return None

    def rendered_request(
        self, config: Mapping[str, Any], arguments: Mapping[str, Any]
    ) -> RenderedRequest | None:
        """Return the request a call with ``arguments`` sends (no credential), if the kind
        sends one and the config and arguments render; None otherwise."""
        return None
