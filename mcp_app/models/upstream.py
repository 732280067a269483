"""The Upstream model: another MCP server whose tools this host serves (tool kind mcp_upstream).

Besides where and how to reach it and how its sessions are kept (one per caller unless
``stateless``; ``session_idle_seconds``, ``max_sessions``), the row carries the upstream's
health as the runner saw it (``services.upstream_targets`` writes those fields; operators read them
in the admin): last success, last error, the revision negotiated, and the circuit breaker's
state; and what the scheduled probe (``services.upstream_health.upstream_probe``) last found: its
state (active, degraded, offline) and whether the tool list still matches the last sync.

A ``stdio`` upstream is a program the administrator allow-listed (``MCP_STDIO_SERVERS``,
``bridge.servers``), run by the stdio bridge: the row names the server, the extra arguments,
the working directory and which credential fills which environment variable (credential
names only; their secrets stay encrypted on the Credential rows). ``clean`` checks all of it
against the allow-list.
How callers are authorized there (``auth_mode``): the static credential, or each user's own
OAuth connection (``UpstreamConnection``; per-user sessions even when ``stateless``); and
which request headers of our clients are forwarded (``forward_headers``, opt-in).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone
from simple_history.models import HistoricalRecords

from mcp_app.bridge.servers import AllowListError, NotAllowed, check_request, parse_allow_list
from mcp_app.conf import get_conf
from mcp_app.executors.netguard import parse_network
from mcp_app.models.base import TimestampedModel, team_field
from mcp_app.models.connection import forward_header_problem, split_header_names
from mcp_app.models.credential import Credential
from mcp_app.models.fields import empty_dict, empty_list, validate_mcp_name


def split_networks(value: str) -> list[str]:
    """Split an allow-list field (one per line or comma-separated) into its entries."""
    return [item.strip() for item in value.replace(",", "\n").splitlines() if item.strip()]


class Upstream(TimestampedModel):
    class SyncPolicy(models.TextChoices):
        # A changed tool list only marks the upstream out of sync; an operator reviews it.
        MARK = "mark", "mark out of sync"
        # Additions and changes are applied as a manual sync would (new tools disabled).
        APPLY = "apply", "apply additions and changes"

    class ProbeState(models.TextChoices):
        # Not probed yet (new, probes off, or disabled since before its first probe).
        UNKNOWN = "unknown", "not probed yet"
        ACTIVE = "active", "active"
        # Some failed probes in a row, fewer than the unhealthy threshold, or a slow answer.
        DEGRADED = "degraded", "degraded"
        OFFLINE = "offline", "offline"

    class Transport(models.TextChoices):
        HTTP = "http", "Streamable HTTP (a URL)"
        STDIO = "stdio", "stdio (an allow-listed program, run by the stdio bridge)"

    class AuthMode(models.TextChoices):
        CREDENTIAL = "credential", "static credential (the same for every caller)"
        USER_OAUTH = "user_oauth", "per-user OAuth (each user connects their own account)"

    name = models.CharField(
        max_length=128,
        unique=True,
        validators=[validate_mcp_name],
        help_text='Upstream tools name it in their config ("upstream": "<name>").',
    )
    description = models.TextField(blank=True)
    transport = models.CharField(max_length=8, choices=Transport.choices, default=Transport.HTTP)
    url = models.URLField(
        max_length=500,
        blank=True,
        help_text="Streamable HTTP: the upstream's endpoint, e.g. https://host/mcp.",
    )
    stdio_server = models.CharField(
        max_length=128,
        blank=True,
        verbose_name="stdio server",
        help_text="stdio: the server's name in the administrator's allow-list (MCP_STDIO_SERVERS).",
    )
    stdio_args = models.JSONField(
        default=list,
        blank=True,
        verbose_name="extra arguments",
        help_text=(
            "stdio: arguments appended to the allow-listed command, a JSON list such as "
            '["--root=/data"]; each must be one the allow-list offers. Passed verbatim (no shell).'
        ),
    )
    stdio_cwd = models.CharField(
        max_length=500,
        blank=True,
        verbose_name="working directory",
        help_text="stdio: one of the directories the allow-list offers (empty: its default).",
    )
    stdio_env = models.JSONField(
        default=dict,
        blank=True,
        verbose_name="credential variables",
        help_text=(
            "stdio: environment variables filled from credentials, a JSON object such as "
            '{"API_TOKEN": "<credential name>"}; only the variables the allow-list names.'
        ),
    )
    credential = models.ForeignKey(
        Credential,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="upstreams",
        help_text="How this host authenticates to the upstream (empty: no credential).",
    )
    connect_timeout = models.FloatField(
        default=5.0,
        validators=[MinValueValidator(0.1), MaxValueValidator(120)],
        help_text="Seconds to open a connection.",
    )
    call_timeout = models.FloatField(
        default=60.0,
        validators=[MinValueValidator(0.1), MaxValueValidator(24 * 3600)],
        help_text="Seconds one request to the upstream may take, session setup included.",
    )
    allow_networks = models.TextField(
        blank=True,
        help_text=(
            "Networks (CIDR, one per line) allowed besides public addresses, e.g. 10.0.0.0/8 "
            "for an upstream on the private network. Loopback and private addresses are refused "
            "otherwise, as for HTTP tools; MCP_HTTP_ALLOWED_NETWORKS applies too."
        ),
    )
    enabled = models.BooleanField(default=True, help_text="Disabled: its tools fail at once.")
    # Sessions with the upstream: one per caller (services/context_factory.caller_key), unless the
    # operator says it keeps no per-session state.
    stateless = models.BooleanField(
        default=False,
        help_text=(
            "Share one upstream session among all callers. Leave off unless the upstream keeps "
            "nothing per session (no login, cart, working directory or toggles): otherwise "
            "each user (or, on a public endpoint, each client session) gets its own."
        ),
    )
    session_idle_seconds = models.FloatField(
        default=600.0,
        validators=[MinValueValidator(1), MaxValueValidator(7 * 24 * 3600)],
        help_text="Seconds a caller's upstream session may stay unused before it is closed.",
    )
    max_sessions = models.PositiveIntegerField(
        default=100,
        validators=[MinValueValidator(1), MaxValueValidator(10000)],
        help_text=(
            "Upstream sessions kept open per web process; beyond it the least recently used "
            "idle one is closed (its caller gets a fresh one next time)."
        ),
    )
    failure_threshold = models.PositiveIntegerField(
        default=5,
        validators=[MinValueValidator(1), MaxValueValidator(1000)],
        help_text="Consecutive failures that open the circuit breaker.",
    )
    cooldown_seconds = models.FloatField(
        default=30.0,
        validators=[MinValueValidator(0.1), MaxValueValidator(24 * 3600)],
        help_text="Seconds an open breaker fails calls at once before the next try.",
    )
    probe_interval_seconds = models.FloatField(
        default=300.0,
        validators=[MinValueValidator(0), MaxValueValidator(7 * 24 * 3600)],
        help_text=(
            "Seconds between two health probes (initialize, tools/list) of this upstream; "
            "0: never probed. The probe job (UPKEEP_PROBE_UPSTREAMS_SECONDS) looks for due "
            "upstreams."
        ),
    )
    probe_timeout = models.FloatField(
        default=10.0,
        validators=[MinValueValidator(0.1), MaxValueValidator(120)],
        help_text=(
            "Seconds a probe may take; an answer after more than half of it is slow (degraded)."
        ),
    )
    unhealthy_threshold = models.PositiveIntegerField(
        default=3,
        validators=[MinValueValidator(1), MaxValueValidator(1000)],
        help_text="Failed probes in a row that make the upstream offline (fewer: degraded).",
    )
    sync_policy = models.CharField(
        max_length=16,
        choices=SyncPolicy.choices,
        default=SyncPolicy.MARK,
        help_text=(
            "What a changed tool list (seen by the probe or announced by the upstream) does: "
            "mark the upstream out of sync for review, or apply new and changed tools, "
            "resources, templates and prompts at once (new ones disabled; removals are "
            "always left for review)."
        ),
    )
    # How callers are authorized at the upstream: the static credential above (the same for
    # everyone), or each user's own OAuth tokens (models/connection.py, the Connections page).
    auth_mode = models.CharField(
        max_length=16,
        choices=AuthMode.choices,
        default=AuthMode.CREDENTIAL,
        verbose_name="authorization",
        help_text=(
            "Per-user OAuth: each user connects their own account at the upstream once "
            "(Connections page) and calls carry that user's token; callers without a "
            "connection get an error telling them where to connect."
        ),
    )
    oauth_client_id = models.CharField(
        max_length=500,
        blank=True,
        verbose_name="OAuth client id",
        help_text=(
            "Per-user OAuth: this host's client id at the upstream's authorization server, "
            "for servers without dynamic client registration (empty: register dynamically)."
        ),
    )
    # A Fernet token (services.credentials.encrypt_secret), set through the admin form only.
    oauth_client_secret_encrypted = models.TextField(blank=True, editable=False)
    oauth_scopes = models.CharField(
        max_length=500,
        blank=True,
        verbose_name="OAuth scopes",
        help_text=(
            "Per-user OAuth: scopes to ask for, separated by spaces (empty: those the "
            "upstream names in its challenge or metadata)."
        ),
    )
    forward_headers = models.TextField(
        blank=True,
        help_text=(
            "Headers of the client's request to pass on to the upstream (one per line), e.g. "
            "X-Tenant (not on background calls). Authorization, Cookie, Mcp-*, Proxy-*, "
            "Sec-*, Content-* and framing headers are never forwarded."
        ),
    )
    # Health, written by services.upstream_targets and services.upstream_health.
    last_success_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_error = models.TextField(blank=True, editable=False)
    last_error_at = models.DateTimeField(null=True, blank=True, editable=False)
    protocol_version = models.CharField(
        max_length=32, blank=True, editable=False, verbose_name="revision negotiated"
    )
    consecutive_failures = models.PositiveIntegerField(default=0, editable=False)
    circuit_open_until = models.DateTimeField(null=True, blank=True, editable=False)
    # The upstream's notifications/tools/list_changed, and the last sync in the admin: rows are
    # out of sync while the first is later than the second.
    tools_changed_at = models.DateTimeField(null=True, blank=True, editable=False)
    tools_synced_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The scheduled probe's findings. tools_fingerprint is a digest of everything the
    # upstream offers (every field of its tools, resources, templates and prompts) as of the
    # last sync, or of the first probe when there is none yet: a probe that lists something
    # else sets tools_changed_at.
    probe_state = models.CharField(
        max_length=16, choices=ProbeState.choices, default=ProbeState.UNKNOWN, editable=False
    )
    last_probe_at = models.DateTimeField(null=True, blank=True, editable=False)
    probe_failures = models.PositiveIntegerField(default=0, editable=False)
    tools_fingerprint = models.CharField(max_length=64, blank=True, editable=False)
    # What a sync took from the upstream, per tool (its name there -> its definition as
    # listed then), so a re-sync offers only what the upstream changed since, not an
    # operator's own edits; and the tools a sync disabled because the upstream no longer
    # listed them while they were enabled (enabled again when they come back).
    synced_tools = models.JSONField(default=empty_dict, blank=True, editable=False)
    tools_gone = models.JSONField(default=empty_list, blank=True, editable=False)
    # The same for its resources, templates and prompts, by kind ("resources",
    # "resource_templates", "prompts"): {kind: {its key there: its definition}} and
    # {kind: [keys disabled by a sync because the upstream no longer listed them]}.
    synced_items = models.JSONField(default=empty_dict, blank=True, editable=False)
    items_gone = models.JSONField(default=empty_dict, blank=True, editable=False)

    # Settings only: what the site observes (health, probe, sync state) moves without an
    # edit and is not a version. The credential is a reference by name (never its secret).
    team = team_field()

    history = HistoricalRecords(
        excluded_fields=[
            "last_success_at",
            "last_error",
            "last_error_at",
            "protocol_version",
            "consecutive_failures",
            "circuit_open_until",
            "tools_changed_at",
            "tools_synced_at",
            "probe_state",
            "last_probe_at",
            "probe_failures",
            "tools_fingerprint",
            "synced_tools",
            "tools_gone",
            "synced_items",
            "items_gone",
            # A secret, even encrypted, is never kept in the history (a revert keeps it).
            "oauth_client_secret_encrypted",
        ]
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.transport == self.Transport.STDIO:
            self._clean_stdio()
        elif not self.url:
            raise ValidationError({"url": "A Streamable HTTP upstream needs its URL."})
        self._clean_auth()
        for network in split_networks(self.allow_networks):
            try:
                parse_network(network)
            except ValueError:
                raise ValidationError(
                    {"allow_networks": f"{network!r} is not a network in CIDR notation."}
                ) from None

    def _clean_stdio(self) -> None:
        try:
            servers = parse_allow_list(get_conf().MCP_STDIO_SERVERS)
        except AllowListError as exc:
            raise ValidationError({"stdio_server": str(exc)}) from None
        server = servers.get(self.stdio_server)
        if server is None:
            offered = ", ".join(sorted(servers)) or "none: MCP_STDIO_SERVERS is empty"
            raise ValidationError(
                {"stdio_server": f"{self.stdio_server!r} is not an allowed stdio server "
                                 f"(allowed: {offered})."}
            )  # fmt: skip
        if self.url:
            raise ValidationError({"url": "A stdio upstream has no URL; leave it empty."})
        if self.credential_id is not None:
            raise ValidationError(
                {"credential": "A stdio upstream takes credentials as environment variables "
                               "(credential variables), not as a header."}
            )  # fmt: skip
        args = self.stdio_args
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ValidationError({"stdio_args": "A JSON list of strings."})
        env = self.stdio_env
        if not isinstance(env, dict) or not all(
            isinstance(name, str) and isinstance(value, str) for name, value in env.items()
        ):
            raise ValidationError({"stdio_env": "A JSON object of variable -> credential name."})
        missing = sorted(set(env.values()) - set(
            Credential.objects.filter(name__in=env.values()).values_list("name", flat=True)
        ))  # fmt: skip
        if missing:
            raise ValidationError({"stdio_env": f"No credential named {missing[0]!r}."})
        try:
            check_request(server, args=args, cwd=self.stdio_cwd, env_names=list(env))
        except NotAllowed as exc:
            raise ValidationError({f"stdio_{exc.part}": str(exc)}) from None

    def _clean_auth(self) -> None:
        errors: dict[str, str] = {}
        for name in split_header_names(self.forward_headers):
            problem = forward_header_problem(name)
            if problem is not None:
                errors["forward_headers"] = problem
                break
        if self.auth_mode == self.AuthMode.USER_OAUTH and self.credential_id is not None:
            errors["credential"] = "Per-user OAuth sends each user's token: leave it empty."
        if self.auth_mode == self.AuthMode.USER_OAUTH and self.transport == self.Transport.STDIO:
            errors["auth_mode"] = "Per-user OAuth needs a Streamable HTTP upstream (a URL)."
        if errors:
            raise ValidationError(errors)

    @property
    def per_user(self) -> bool:
        return self.auth_mode == self.AuthMode.USER_OAUTH

    @property
    def tools_out_of_sync(self) -> bool:
        changed, synced = self.tools_changed_at, self.tools_synced_at
        return changed is not None and (synced is None or changed > synced)

    @property
    def circuit_open(self) -> bool:
        return self.circuit_open_until is not None and self.circuit_open_until > timezone.now()
