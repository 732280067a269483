"""The Upstream model: another MCP server whose tools this host serves (tool kind mcp_upstream).

Besides where and how to reach it and how its sessions are kept (one per caller unless
``stateless``; ``session_idle_seconds``, ``max_sessions``), the row carries the upstream's
health as the runner saw it (``services.upstreams`` writes those fields; operators read them
in the admin): last success, last error, the revision negotiated, and the circuit breaker's
state; and what the scheduled probe (``services.upstreams.upstream_probe``) last found: its
state (active, degraded, offline) and whether the tool list still matches the last sync.
How callers are authorized there (``auth_mode``): the static credential, or each user's own
OAuth connection (``UpstreamConnection``; per-user sessions even when ``stateless``); and
which request headers of our clients are forwarded (``forward_headers``, opt-in).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from mcp_app.executors.netguard import parse_network
from mcp_app.models.base import TimestampedModel
from mcp_app.models.connection import forward_header_problem, split_header_names
from mcp_app.models.credential import Credential
from mcp_app.models.fields import validate_mcp_name


def split_networks(value: str) -> list[str]:
    """Split an allow-list field (one per line or comma-separated) into its entries."""
    return [item.strip() for item in value.replace(",", "\n").splitlines() if item.strip()]


class Upstream(TimestampedModel):
    class ProbeState(models.TextChoices):
        # Not probed yet (new, probes off, or disabled since before its first probe).
        UNKNOWN = "unknown", "not probed yet"
        ACTIVE = "active", "active"
        # Some failed probes in a row, fewer than the unhealthy threshold, or a slow answer.
        DEGRADED = "degraded", "degraded"
        OFFLINE = "offline", "offline"

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
    url = models.URLField(
        max_length=500, help_text="The upstream's Streamable HTTP endpoint, e.g. https://host/mcp."
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
    # Sessions with the upstream: one per caller (services/contexts.caller_key), unless the
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
    # Health, written by services.upstreams.
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
    # The scheduled probe's findings. tools_fingerprint is a digest of the upstream's whole
    # tool list (every field an operator reviews) as of the last sync, or of the first probe
    # when there is none yet: a probe that lists something else sets tools_changed_at.
    probe_state = models.CharField(
        max_length=16, choices=ProbeState.choices, default=ProbeState.UNKNOWN, editable=False
    )
    last_probe_at = models.DateTimeField(null=True, blank=True, editable=False)
    probe_failures = models.PositiveIntegerField(default=0, editable=False)
    tools_fingerprint = models.CharField(max_length=64, blank=True, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        self._clean_auth()
        for network in split_networks(self.allow_networks):
            try:
                parse_network(network)
            except ValueError:
                raise ValidationError(
                    {"allow_networks": f"{network!r} is not a network in CIDR notation."}
                ) from None

    def _clean_auth(self) -> None:
        errors: dict[str, str] = {}
        for name in split_header_names(self.forward_headers):
            problem = forward_header_problem(name)
            if problem is not None:
                errors["forward_headers"] = problem
                break
        if self.auth_mode == self.AuthMode.USER_OAUTH and self.credential_id is not None:
            errors["credential"] = "Per-user OAuth sends each user's token: leave it empty."
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
