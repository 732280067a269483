"""The one settings module. Every deployment difference is an environment variable.

See README.md ("Configuration") for the list. Defaults give the embedded single-process
setup: SQLite, the in-memory channel layer, no Redis.
"""

import copy
import hashlib
import ipaddress
import os
import re
import secrets
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from mcp_app.services import redis_sentinel, redis_tls

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("MCPHOST_VAR_DIR", BASE_DIR / "var"))


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def _secret_key() -> str:
    """Return SECRET_KEY, or a random key kept in VAR_DIR so restarts keep sessions valid."""
    if key := os.environ.get("SECRET_KEY"):
        return key
    path = VAR_DIR / "secret_key"
    if path.exists():
        return path.read_text().strip()
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    path.write_text(key)
    path.chmod(0o600)
    return key


SECRET_KEY = _secret_key()
DEBUG = _env_bool("DEBUG", False)

# The externally visible origin of this site, e.g. https://mcp.example.com. Endpoint URLs,
# the connect page and (later) OAuth metadata are derived from it.
PUBLIC_BASE_URL = os.environ.get("PUBLIC_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
_public = urlsplit(PUBLIC_BASE_URL)

ALLOWED_HOSTS = _env_list(
    "ALLOWED_HOSTS", sorted({_public.hostname or "127.0.0.1", "127.0.0.1", "localhost", "[::1]"})
)
CSRF_TRUSTED_ORIGINS = _env_list("CSRF_TRUSTED_ORIGINS", [f"{_public.scheme}://{_public.netloc}"])


# -- HTTPS (docs/operations.md, "Deploy settings") -----------------------------------------
# Secure by default when the public origin is https: the site is then only meant to be reached
# over TLS. An empty variable counts as unset (compose passes every one through).
def _env_flag(name: str, default: bool) -> bool:
    value = os.environ.get(name, "").strip()
    return default if not value else value.lower() in {"1", "true", "yes", "on"}


_https = _public.scheme == "https"
SECURE_SSL_REDIRECT = _env_flag("SECURE_SSL_REDIRECT", _https)
SESSION_COOKIE_SECURE = _env_flag("SESSION_COOKIE_SECURE", _https)
CSRF_COOKIE_SECURE = _env_flag("CSRF_COOKIE_SECURE", _https)
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS") or (365 * 24 * 3600 * _https))
# Both bind every subdomain of the host (and preload, browsers' built-in lists): never on by
# default, the operator decides for their domain.
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_flag("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = _env_flag("SECURE_HSTS_PRELOAD", False)
# Behind a proxy that terminates TLS, name the header it sets to "https" (X-Forwarded-Proto);
# only if the proxy always sets or strips it, since a client could send it otherwise.
# Without it, SECURE_SSL_REDIRECT redirects every proxied request forever.
if _proxy_header := os.environ.get("SECURE_PROXY_SSL_HEADER", "").strip():
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _proxy_header.upper().replace("-", "_"), "https")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "oauth2_provider",
    # Catalog history and rollback (README, "History and rollback").
    "simple_history",
    "mcp_app",
    # Only a management command (load_conformance_fixtures); its tools are offered only
    # when MCP_PYTHON_TOOL_MODULES lists conformance.tools.
    "conformance",
]

MIDDLEWARE = [
    # First, so every response (a redirect to https included) names its request.
    "mcp_app.ops.middleware.request_id_middleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Lets catalog history rows name the signed-in user of any request (admin and API alike).
    "simple_history.middleware.HistoryRequestMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, so it sees what a view raised first: a database outage answers 503, not 500.
    "mcp_app.ops.middleware.DatabaseOutageMiddleware",
]

ROOT_URLCONF = "mcpsite.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

ASGI_APPLICATION = "mcpsite.asgi.application"
WSGI_APPLICATION = None

# A web process's PostgreSQL connections come from one pool (psycopg_pool, Django's "pool"
# option), never one per thread: under ASGI every Django request runs on a thread of its own,
# so persistent per-thread connections (CONN_MAX_AGE) were left behind by finished threads
# until PostgreSQL ran out of them, and a flood of requests, authenticated or not, could take
# the database from every process. A process holds at most DATABASE_POOL_MAX_SIZE connections;
# a request that finds them all busy waits DATABASE_POOL_TIMEOUT seconds, and beyond
# DATABASE_POOL_MAX_WAITING waiting requests the next is refused at once: both answer 503
# (ops/middleware.py), so threads stay bounded too. A connection is checked before it is
# handed out (one round trip), so none fails after a PostgreSQL restart; the call-log writer
# keeps one. Connecting and every statement have time limits: a database that stops
# answering costs a request at most DATABASE_STATEMENT_TIMEOUT_SECONDS (server side) and a
# new connection at most DATABASE_CONNECT_TIMEOUT_SECONDS (docs/operations.md, "Database
# connections").
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'mcphost.sqlite3'}"),
        conn_max_age=0,
        conn_health_checks=_env_bool("DATABASE_CONN_HEALTH_CHECKS", True),
    )
}
# The longest the MCP endpoint and the executors' credential and upstream lookups wait for
# one ORM call before answering 503 (services/database.py): a frozen database cannot make
# them hang. The probes have their own bound (READINESS_TIMEOUT_SECONDS).
DATABASE_WAIT_SECONDS = float(os.environ.get("DATABASE_WAIT_SECONDS", "15"))
DATABASE_POOL_MAX_SIZE = int(os.environ.get("DATABASE_POOL_MAX_SIZE", "10"))
# Celery workers keep a connection per thread instead of using the pool (mcpsite/celery.py).
WORKER_DATABASE_CONN_MAX_AGE = int(os.environ.get("WORKER_DATABASE_CONN_MAX_AGE", "600"))
# Behind a pooler in transaction mode (PgBouncer's pool_mode = transaction) a server
# connection serves whichever client has a transaction to run, so nothing a session keeps
# between transactions holds: no startup options (PgBouncer refuses a connection sending
# `options`, or ignores them when told to, statement timeout included: set it on the database
# role instead) and no server-side cursors. docs/operations.md, "Behind PgBouncer".
DATABASE_POOLER = os.environ.get("DATABASE_POOLER", "").strip().lower()
if DATABASE_POOLER not in ("", "transaction"):
    raise ImproperlyConfigured(
        f"DATABASE_POOLER={DATABASE_POOLER!r}: expected 'transaction' (PgBouncer in "
        "transaction mode) or nothing (a direct connection, or a pooler in session mode)."
    )
if DATABASE_POOLER == "transaction":
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several threads (Channels' sync_to_async pool) write; wait for the lock instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
else:
    _statement_ms = int(float(os.environ.get("DATABASE_STATEMENT_TIMEOUT_SECONDS", "30")) * 1000)
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "connect_timeout": int(os.environ.get("DATABASE_CONNECT_TIMEOUT_SECONDS", "5")),
            # Names the process's connections in pg_stat_activity (e.g. mcphost-web).
            "application_name": os.environ.get("DATABASE_APPLICATION_NAME", "mcphost"),
            "pool": {
                "min_size": int(os.environ.get("DATABASE_POOL_MIN_SIZE", "1")),
                "max_size": DATABASE_POOL_MAX_SIZE,
                "timeout": float(os.environ.get("DATABASE_POOL_TIMEOUT", "3")),
                "max_waiting": int(
                    os.environ.get("DATABASE_POOL_MAX_WAITING", str(4 * DATABASE_POOL_MAX_SIZE))
                ),
                # Idle connections beyond min_size are closed after this long.
                "max_idle": float(os.environ.get("DATABASE_POOL_MAX_IDLE", "300")),
                "name": "mcphost",
            },
        }
    )
    if DATABASE_POOLER != "transaction":
        DATABASES["default"]["OPTIONS"]["options"] = f"-c statement_timeout={_statement_ms}"

# A streaming read replica of DATABASE_URL's database, connected to as the primary is (same
# options, a pool of its own): only the call-log reads of the audit pages, the exports and
# the API's call-log endpoints go there, while it is at most MCP_REPLICA_MAX_LAG_SECONDS
# behind (mcp_app/services/replica.py; docs/operations.md, "With a read replica"). Tests
# read it as the test database itself (MIRROR): no second test database is made.
if _replica_url := os.environ.get("DATABASE_REPLICA_URL", "").strip():
    _replica = dj_database_url.parse(
        _replica_url, conn_max_age=0, conn_health_checks=DATABASES["default"]["CONN_HEALTH_CHECKS"]
    )
    if {_replica["ENGINE"], DATABASES["default"]["ENGINE"]} != {"django.db.backends.postgresql"}:
        raise ImproperlyConfigured(
            "DATABASE_REPLICA_URL needs PostgreSQL, as DATABASE_URL: it names a streaming "
            "replica of DATABASE_URL's database."
        )
    # Its URL's own options (?sslmode=...) win over the primary's.
    _replica["OPTIONS"] = {
        **copy.deepcopy(DATABASES["default"]["OPTIONS"]),
        **_replica.get("OPTIONS", {}),
    }
    _replica["OPTIONS"]["pool"]["name"] = "mcphost-replica"
    _replica["DISABLE_SERVER_SIDE_CURSORS"] = DATABASES["default"].get(
        "DISABLE_SERVER_SIDE_CURSORS", False
    )
    _replica["TEST"] = {"MIRROR": "default"}
    DATABASES["replica"] = _replica
    DATABASE_ROUTERS = ["mcp_app.services.replica.ReplicaRouter"]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# redis://... or, for a master that Redis Sentinel fails over, redis+sentinel://...
# (mcp_app/services/redis_sentinel.py; docs/operations.md, "Redis with Sentinel").
REDIS_URL = os.environ.get("REDIS_URL", "")
# Django's cache (the API's throttles, DCR's rate limits, the CIMD fetch backoff) may live on
# a Redis of its own; by default REDIS_URL's.
CACHE_REDIS_URL = os.environ.get("CACHE_REDIS_URL", "") or REDIS_URL
# A rediss:// URL's TLS options (mcp_app/services/redis_tls.py) are checked by making the
# context a connection would use: a missing CA file fails here, not on every connection.
for _name in ("REDIS_URL", "CELERY_BROKER_URL", "MCP_RATE_LIMIT_REDIS_URL", "CACHE_REDIS_URL"):
    try:
        redis_sentinel.parse(os.environ.get(_name, ""))
        redis_tls.context(os.environ.get(_name, ""))
    except ValueError as exc:
        raise ImproperlyConfigured(f"{_name}: {exc}") from None


def _default_redis_namespace(database: Mapping[str, Any]) -> str:
    """A name of this installation, the same in all its processes: derived from its database.

    Two installations sharing one Redis database have different databases (or they would be
    one installation), so their keys and channels stay apart without any configuration.
    """
    where = f"{database.get('HOST') or ''}:{database.get('PORT') or ''}/{database['NAME']}"
    readable = re.sub(r"[^A-Za-z0-9_-]", "", Path(str(database["NAME"])).stem)[:32]
    return f"mcphost:{readable}-{hashlib.sha256(where.encode()).hexdigest()[:8]}"


# The prefix of every Redis key and channel this installation uses (channel layer, cache,
# invalidations, SSE events, worker heartbeats, Celery's broker keys); docs/operations.md.
REDIS_NAMESPACE = os.environ.get("REDIS_NAMESPACE", "").strip() or _default_redis_namespace(
    DATABASES["default"]
)
if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,80}", REDIS_NAMESPACE):
    raise ImproperlyConfigured(
        "REDIS_NAMESPACE may hold only letters, digits and . _ : - (at most 80 of them)"
    )

# After a Redis restart every pooled connection is dead and fails its next command: such a
# command is retried once, at once, on a fresh connection (the channel layer and the SSE
# event store). Only once: a receiver whose connection broke while Redis is down still
# fails, which ends its stream, and the client reconnects and joins its groups afresh
# (a restarted Redis has forgotten them).
REDIS_CLIENT_OPTIONS = {
    "retry": Retry(ExponentialBackoff(cap=0.1, base=0.01), 1),
    "retry_on_error": [RedisConnectionError],
}

# Messages a channel holds unread before new ones are dropped. Each process receives every
# group its streams follow on one channel (mcp_app/services/notify.py), so a burst of
# progress notifications across many calls meets this limit, not a per-stream one.
CHANNEL_CAPACITY = 10_000

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": (
                "mcp_app.services.redis_sentinel.SentinelChannelLayer"
                if redis_sentinel.is_sentinel_url(REDIS_URL)
                else "channels_redis.core.RedisChannelLayer"
            ),
            # channels_redis blocks 5 s per receive (BZPOPMIN) and redis-py's default read
            # timeout is also 5 s: the two race and idle receivers die with "Timeout reading".
            # Reads may take longer than the block; connecting may not.
            "CONFIG": {
                # A redis+sentinel:// URL becomes channels_redis's sentinel form.
                "hosts": [
                    redis_sentinel.channel_layer_host(
                        REDIS_URL,
                        socket_timeout=30,
                        socket_connect_timeout=5,
                        # Every stream opening joins groups on a pooled connection of its
                        # own: redis-py's default of 100 refused bursts of openings (500s).
                        max_connections=1000,
                        **REDIS_CLIENT_OPTIONS,
                    )
                ],
                "capacity": CHANNEL_CAPACITY,
                # Group and channel keys; channels_redis appends names to it as they are.
                "prefix": f"{REDIS_NAMESPACE}:asgi:",
            },
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels.layers.InMemoryChannelLayer",
            "CONFIG": {"capacity": CHANNEL_CAPACITY},
        }
    }

# Background tool calls (mcp_app/services/background/). Without a broker the web process
# runs an embedded worker on Celery's in-memory transport (for trying the product only).
# The in-memory transport's host is named: kombu warns on every connection that lacks one.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL or "memory://localhost/")
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # Queues, unacknowledged jobs and bindings in this installation's namespace: another
    # installation's workers on the same Redis must never take its calls.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"global_keyprefix": f"{REDIS_NAMESPACE}:celery:"}
    if CELERY_BROKER_URL.startswith("rediss://"):
        # kombu makes TLS options of the URL's ssl_* ones only: without any, the Redis
        # transport mcpsite/celery.py names would speak plain text to the TLS port (kombu's
        # own would use TLS but check no certificate). These apply to a URL without
        # options: the certificate is checked against the system's CAs, as redis-py does.
        CELERY_BROKER_USE_SSL = {"ssl_cert_reqs": ssl.CERT_REQUIRED}
elif redis_sentinel.is_sentinel_url(CELERY_BROKER_URL):
    # kombu's own form: one sentinel:// URL per sentinel, the master's name as an option
    # (mcpsite/celery.py picks our sentinel transport for it).
    CELERY_BROKER_URL, _sentinel_options = redis_sentinel.kombu_broker(CELERY_BROKER_URL)
    # Celery reads a CELERY_BROKER_URL environment variable before this setting (the
    # redis+sentinel:// URL, which kombu does not know); the read and write URLs come first.
    CELERY_BROKER_READ_URL = CELERY_BROKER_WRITE_URL = CELERY_BROKER_URL
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "global_keyprefix": f"{REDIS_NAMESPACE}:celery:",
        **_sentinel_options,
    }
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
# Acknowledged only after the call ends, so a worker that dies before starting a call leaves
# the message for another worker; a call that did start is never run twice (its row says it
# started, and a worker lost mid-call is failed, not retried: tools may have side effects).
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = False
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# -- Operations: probes and worker heartbeats (docs/operations.md) ---------------------------
# /readyz gives each dependency (database, Redis, worker heartbeats) this long to answer.
READINESS_TIMEOUT_SECONDS = float(os.environ.get("READINESS_TIMEOUT_SECONDS", "2"))
# Each Celery worker writes a heartbeat to Redis this often; /readyz wants at least one newer
# than the stale bound when some tool may run on a worker.
WORKER_HEARTBEAT_SECONDS = float(os.environ.get("WORKER_HEARTBEAT_SECONDS", "10"))
WORKER_HEARTBEAT_STALE_SECONDS = float(os.environ.get("WORKER_HEARTBEAT_STALE_SECONDS", "30"))

# /metrics answers clients in these networks (comma-separated CIDR), and any client sending
# "Authorization: Bearer <METRICS_BEARER_TOKEN>" when that is set; others get 403.
METRICS_ALLOWED_NETWORKS = os.environ.get("METRICS_ALLOWED_NETWORKS", "127.0.0.0/8,::1/128")
METRICS_BEARER_TOKEN = os.environ.get("METRICS_BEARER_TOKEN", "")

# -- Upkeep on Celery beat (mcp_app/ops/tasks.py; docs/operations.md) -----------------------
# Seconds between runs of each job; 0 takes it off the schedule (run the command yourself).
# A job not picked up within its interval expires rather than pile up behind a missing worker.
_DAY = 24 * 3600
UPKEEP_JOBS = {
    # name: (interval setting, default seconds, keyword arguments)
    "purge_sessions": (
        "UPKEEP_PURGE_SESSIONS_SECONDS",
        _DAY,
        {"days": float(os.environ.get("UPKEEP_PURGE_SESSIONS_DAYS", "7"))},
    ),
    "purge_oauth_clients": (
        "UPKEEP_PURGE_OAUTH_CLIENTS_SECONDS",
        _DAY,
        {"days": float(os.environ.get("UPKEEP_PURGE_OAUTH_CLIENTS_DAYS", "7"))},
    ),
    "clear_cimd_applications": ("UPKEEP_CLEAR_CIMD_APPLICATIONS_SECONDS", _DAY, {}),
    "clear_tokens": ("UPKEEP_CLEAR_TOKENS_SECONDS", _DAY, {}),
    "reap_background_calls": ("UPKEEP_REAP_BACKGROUND_CALLS_SECONDS", 60, {}),
    # Looks for upstreams whose own probe interval has passed (Upstream.probe_interval_seconds).
    "probe_upstreams": ("UPKEEP_PROBE_UPSTREAMS_SECONDS", 15, {}),
    # The call log's partitions ahead (PostgreSQL; a no-op on SQLite): hourly, so a missed run
    # or two never leaves a day without its partition.
    "call_log_partitions": ("UPKEEP_CALL_LOG_PARTITIONS_SECONDS", 3600, {}),
    # The call log's rollups, which the audit charts read (services/calllog/rollup.py): each
    # run counts the minutes closed since the last; the charts read raw rows after that.
    "call_log_rollup": ("UPKEEP_CALL_LOG_ROLLUP_SECONDS", 60, {}),
    # Call-log retention: off unless set (run purge_call_logs yourself, as before).
    "purge_call_logs": (
        "UPKEEP_PURGE_CALL_LOGS_SECONDS",
        0,
        {"days": float(os.environ.get("UPKEEP_PURGE_CALL_LOGS_DAYS", "90"))},
    ),
}
CELERY_BEAT_SCHEDULE = {}
for _job, (_setting, _default, _kwargs) in UPKEEP_JOBS.items():
    _every = float(os.environ.get(_setting, str(_default)))
    if _every > 0:
        CELERY_BEAT_SCHEDULE[_job] = {
            "task": f"mcp_app.upkeep.{_job}",
            "schedule": _every,
            "kwargs": _kwargs,
            "options": {"expires": _every},
        }
# Beat remembers when each job last ran, so a restart does not reset daily intervals (keep
# this file on a volume).
CELERY_BEAT_SCHEDULE_FILENAME = os.environ.get(
    "CELERY_BEAT_SCHEDULE_FILENAME", str(VAR_DIR / "celerybeat-schedule")
)
# dev.py run sets this: the web process runs the schedule itself (mcp_app/ops/beat.py).
EMBEDDED_BEAT = _env_bool("MCPHOST_EMBEDDED_BEAT", False)

# -- OAuth 2.1 (django-oauth-toolkit as the authorization server; docs/auth.md) -------------
# The issuer is PUBLIC_BASE_URL exactly (no trailing slash): clients compare it byte for byte
# with the protected-resource metadata's authorization_servers entry.
LOGIN_URL = "/accounts/login/"
# Seconds a validated access token stays cached per web process: the bound on how late a
# revocation takes effect on MCP requests.
OAUTH_TOKEN_CACHE_SECONDS = float(os.environ.get("OAUTH_TOKEN_CACHE_SECONDS", "10"))
# Dynamic Client Registration: registrations per client address and hour (0 = unlimited).
OAUTH_DCR_RATE_PER_HOUR = int(os.environ.get("OAUTH_DCR_RATE_PER_HOUR", "20"))

OAUTH2_PROVIDER = {
    "OAUTH2_VALIDATOR_CLASS": "mcp_app.auth.validators.McpOAuth2Validator",
    # Scopes are per endpoint (Endpoint.scopes); the backend reads them from the catalog.
    "SCOPES_BACKEND_CLASS": "mcp_app.auth.scopes.EndpointScopes",
    "SCOPES": {},
    "DEFAULT_SCOPES": [],
    "OIDC_ISS_ENDPOINT": PUBLIC_BASE_URL,
    "PKCE_REQUIRED": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": [
        "client_secret_basic",
        "client_secret_post",
        "none",
    ],
    "ACCESS_TOKEN_EXPIRE_SECONDS": int(os.environ.get("OAUTH_ACCESS_TOKEN_SECONDS", "3600")),
    "REFRESH_TOKEN_EXPIRE_SECONDS": int(
        os.environ.get("OAUTH_REFRESH_TOKEN_SECONDS", str(30 * 24 * 3600))
    ),
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    "ROTATE_REFRESH_TOKEN": True,
    # A replayed refresh token revokes its whole family. No grace period: DOT's grace period
    # answers a retried refresh with the token it issued before, which it can only do when
    # tokens are stored in plaintext (oauth2_provider.E001); hashed storage matters more.
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": 0,
    "REQUEST_APPROVAL_PROMPT": "force",
    "ALLOW_LOCALHOST_LOOPBACK": True,
    "DCR_ENABLED": _env_bool("OAUTH_DCR_ENABLED", True),
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    "CIMD_ENABLED": _env_bool("OAUTH_CIMD_ENABLED", True),
    "CIMD_METADATA_FETCHER": os.environ.get(
        "OAUTH_CIMD_FETCHER", "mcp_app.auth.cimd.GuardedMetadataFetcher"
    ),
}

if CACHE_REDIS_URL:
    # Shared by every web process: the API's throttles, DCR's rate limits and DOT's CIMD
    # fetch backoff.
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            # A list: Django splits a string at the commas of a sentinel URL's hosts.
            "LOCATION": [CACHE_REDIS_URL],
            "KEY_PREFIX": REDIS_NAMESPACE,
            # A black-holed Redis holds a request this long at most (the API throttles then
            # count per process for a while: mcp_app/api/throttling.py).
            "OPTIONS": {
                "socket_connect_timeout": 1,
                "socket_timeout": 1,
                # Makes a pool that follows the master for a redis+sentinel:// URL.
                "pool_class": "mcp_app.services.redis_sentinel.CachePool",
            },
        }
    }

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# One date and time format on every page, the audit's (mcpsite/formats/en/formats.py).
FORMAT_MODULE_PATH = ["mcpsite.formats"]

# Serve STATIC_URL from the web process itself (no proxy in front: the run command, one
# container). Behind a proxy, run collectstatic and let the proxy serve STATIC_ROOT.
SERVE_STATIC = _env_bool("SERVE_STATIC", False)
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", VAR_DIR / "staticfiles"))
MEDIA_URL = "media/"
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", VAR_DIR / "media"))

# LOG_FORMAT=json: one JSON object per line, with the MCP request id (mcp_app/ops/logs.py).
LOG_FORMAT = os.environ.get("LOG_FORMAT", "text").strip().lower()

# Management REST API (/api/v1/, mcp_app/api, docs/api.md): Django REST framework, its
# OpenAPI 3.1 schema (drf-spectacular) and Swagger UI from our own static files (sidecar).
INSTALLED_APPS += ["rest_framework", "drf_spectacular", "drf_spectacular_sidecar"]
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "mcp_app.api.authentication.ApiTokenAuthentication",
        "mcp_app.api.authentication.OAuthManagementAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["mcp_app.api.permissions.ModelPermissions"],
    # They refuse NUL, unpaired surrogates, deep nesting and oversized bodies (parsers.py).
    "DEFAULT_PARSER_CLASSES": [
        "mcp_app.api.parsers.JsonParser",
        "mcp_app.api.parsers.FormParser",
        "mcp_app.api.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "mcp_app.api.pagination.Cursor",
    "PAGE_SIZE": 100,
    "DEFAULT_FILTER_BACKENDS": [
        "mcp_app.api.filters.FieldFilter",
        "rest_framework.filters.SearchFilter",
        "rest_framework.filters.OrderingFilter",
    ],
    # Keyed by user or client address (TRUSTED_PROXIES), counted in Redis or, while Redis
    # fails, per process (mcp_app/api/throttling.py).
    "DEFAULT_THROTTLE_CLASSES": [
        "mcp_app.api.throttling.UserRateThrottle",
        "mcp_app.api.throttling.AnonRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "user": os.environ.get("API_THROTTLE_USER", "1200/minute"),
        "anon": os.environ.get("API_THROTTLE_ANON", "60/minute"),
    },
    "EXCEPTION_HANDLER": "mcp_app.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    # ?format= chooses an export's file format (yaml, json), not a renderer.
    "URL_FORMAT_OVERRIDE": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "mcphost management API",
    "DESCRIPTION": "Manage MCP endpoints and their catalogs (docs/api.md).",
    "VERSION": "1",
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    # A draft's status and its diff's action, named (another "status" enum took the plain name).
    "ENUM_NAME_OVERRIDES": {
        "DraftStatusEnum": "mcp_app.models.draft.Draft.Status",
        "DraftEntryActionEnum": ["create", "update", "unchanged"],
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "mcp_app.api.schema.any_json_value",
        "mcp_app.api.schema.error_responses",
    ],
}
# Bearer tokens an address may have refused per period before its tokens get 429 unseen
# (DRF's rate format; empty turns it off).
API_THROTTLE_AUTH_FAILURES = os.environ.get("API_THROTTLE_AUTH_FAILURES", "20/minute")
# Proxies (comma-separated CIDR) whose X-Forwarded-For names the client, for every
# per-address limit (mcp_app/auth/addresses.py); none by default: REMOTE_ADDR is the client.
TRUSTED_PROXIES = _env_list("TRUSTED_PROXIES", [])
for _network in TRUSTED_PROXIES:
    ipaddress.ip_network(_network, strict=False)  # a typo stops the start, not each request
# The OAuth scope a token from our authorization server needs for the management API; the
# token must be issued for the API's resource (PUBLIC_BASE_URL/api), never an MCP endpoint.
API_OAUTH_SCOPE = os.environ.get("API_OAUTH_SCOPE", "mcp:manage")

# Every line goes through the console handler, in LOG_FORMAT, with credentials redacted
# (mcp_app/ops/logs.py): uvicorn's loggers too, which uvicorn gives handlers of its own before
# Django starts, Python's warnings, and Daphne's access log, which Daphne writes to stdout
# itself. Each logger keeps its level (uvicorn's --log-level).
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {"()": "mcp_app.ops.logs.JsonFormatter"},
        "text": {"()": "mcp_app.ops.logs.TextFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json" if LOG_FORMAT == "json" else "text",
        }
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
    "loggers": {
        "mcp_app": {"level": os.environ.get("MCP_LOG_LEVEL", "INFO")},
        "uvicorn": {"handlers": ["console"], "propagate": False},
        "uvicorn.access": {"handlers": ["console"], "propagate": False},
        "daphne.access": {"level": "INFO"},
    },
}
from mcp_app.ops.logs import route_stray_output  # noqa: E402

route_stray_output()

# MCP clients are native apps whose OAuth callbacks are http loopback URIs (RFC 8252 §7.3),
# which DOT's fix for this warning (https redirect URIs only) would refuse; the consent page
# says when a redirect goes to a loopback address (mcp_app/auth/views.py).
SILENCED_SYSTEM_CHECKS = ["oauth2_provider.W008"]

# stdio upstreams (docs/operations.md, "stdio upstreams"). MCP_STDIO_SERVERS is the
# administrator's allow-list, a JSON object (mcp_app/bridge/servers.py): the only programs an
# operator may register, with the arguments, variables and directories they may add.
# MCP_STDIO_BRIDGE_URL is where web and worker processes reach `manage.py mcp_stdio_bridge`
# (e.g. http://bridge:8765); MCP_STDIO_BRIDGE_SECRET the secret its every request carries
# (empty: derived from SECRET_KEY, so processes sharing SECRET_KEY agree). Read through
# mcp_app.conf.get_conf() like every MCP_* knob; named here so the section documents itself.
MCP_STDIO_SERVERS = os.environ.get("MCP_STDIO_SERVERS", "")
MCP_STDIO_BRIDGE_URL = os.environ.get("MCP_STDIO_BRIDGE_URL", "")
MCP_STDIO_BRIDGE_SECRET = os.environ.get("MCP_STDIO_BRIDGE_SECRET", "")

# App knobs (MCP_*) are read through mcp_app.conf.get_conf(); their defaults live there.
for _name, _value in os.environ.items():
    if _name.startswith("MCP_") and _name != "MCP_LOG_LEVEL":
        globals()[_name] = _value
