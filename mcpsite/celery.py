"""The Celery application; tasks are discovered in installed apps' ``tasks`` modules."""

import logging
import os
from typing import Any

from celery import Celery
from celery.signals import (
    celeryd_after_setup,
    celeryd_init,
    setup_logging,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)

from mcp_app.ops.logs import log_format_from_environment

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")

# kombu's Redis transport with a channel that survives Redis dying under it (the module says
# how kombu 5.7's own transport kills the worker then).
REDIS_TRANSPORT = "mcp_app.services.celery_transport:Transport"
# Its twin for a broker behind Redis Sentinel (settings turn a redis+sentinel:// URL into
# kombu's sentinel:// form).
SENTINEL_TRANSPORT = "mcp_app.services.celery_transport:SentinelTransport"

app = Celery("mcpsite")
app.config_from_object("django.conf:settings", namespace="CELERY")


@app.on_after_configure.connect
def _use_our_redis_transport(sender: Celery, source: Any, **kwargs: Any) -> None:
    # Only for a Redis broker URL: an explicit transport wins over any URL's scheme, and the
    # in-memory broker (no Redis configured) must keep kombu's memory transport.
    # The write URL is the broker URL unless settings translated a redis+sentinel:// one.
    url = str(source.broker_write_url or "")
    if not source.broker_transport and url.startswith(("redis://", "rediss://")):
        source.broker_transport = REDIS_TRANSPORT
    elif not source.broker_transport and url.startswith("sentinel://"):
        source.broker_transport = SENTINEL_TRANSPORT


app.autodiscover_tasks()
# Upkeep jobs of the beat schedule (CELERY_BEAT_SCHEDULE in settings).
app.autodiscover_tasks(["mcp_app.ops"])


# -- Database connections (docs/operations.md, "Database connections") ---------------------------
@celeryd_init.connect
def _keep_worker_connections(**kwargs: Any) -> None:
    """Give a worker kept connections, one per thread, instead of the web processes' pool.

    A worker's threads live as long as it does (no thread per request, which is what made
    kept connections leak in web processes), so its connections are bounded by its threads.
    A pool would also slow a worker's recovery after a database restart: psycopg_pool retries
    a failed connection with growing delays, and a background call's heartbeat that waits
    for it looks like a lost worker. Runs before any connection is made.
    """
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database.get("OPTIONS", {}).pop("pool", None) is not None:
        database["CONN_MAX_AGE"] = settings.WORKER_DATABASE_CONN_MAX_AGE


# -- Worker heartbeats for /readyz (mcp_app/ops/heartbeat.py) ------------------------------------
@worker_ready.connect
def _start_worker_heartbeat(sender: Any, **kwargs: Any) -> None:
    from mcp_app.ops.heartbeat import start_worker_heartbeat

    start_worker_heartbeat(sender.hostname)


@worker_shutdown.connect
def _stop_worker_heartbeat(sender: Any, **kwargs: Any) -> None:
    from mcp_app.ops.heartbeat import stop_worker_heartbeat

    stop_worker_heartbeat(sender.hostname)


# -- Traces (mcp_app/ops/tracing.py), off unless OTEL_* variables ask ------------------------------
# Set up in each pool process, after the fork: the exporter's thread would not survive it.
@worker_process_init.connect
def _start_tracing(**kwargs: Any) -> None:
    from mcp_app.ops.tracing import configure_tracing

    configure_tracing()


@worker_process_shutdown.connect
def _flush_tracing(**kwargs: Any) -> None:
    from mcp_app.ops.tracing import flush_tracing

    flush_tracing()


# -- Logs under LOG_FORMAT=json (mcp_app/ops/logs.py): every line JSON, from the first ---------
# Celery's own setup gives the root logger a plain-text handler and prints banners. Under
# LOG_FORMAT=json, Django's logging is set up as soon as a worker starts (its first warning comes
# before Django is), Celery is told that logging is taken care of, the worker's banner is logged
# as one line, beat's is not printed, and what the worker writes from its signal handlers is
# JSON too. Under LOG_FORMAT=text Celery keeps its own (timestamped) lines.
def _configure_logging() -> None:
    from django.conf import settings
    from django.utils.log import configure_logging

    configure_logging(settings.LOGGING_CONFIG, settings.LOGGING)


def _log_from_the_start(sender: Any, instance: Any, **kwargs: Any) -> None:
    import celery.apps.worker

    from mcp_app.ops.logs import say_as_json

    _configure_logging()
    instance.quiet = True
    celery.apps.worker.safe_say = say_as_json


def _use_django_logging(loglevel: Any = None, **kwargs: Any) -> None:
    _configure_logging()
    if loglevel:  # -l/--loglevel sets the root's level, as Celery's own setup does
        logging.getLogger().setLevel(loglevel)


def _log_worker_banner(sender: Any, instance: Any, **kwargs: Any) -> None:
    logging.getLogger("celery.worker").info(instance.startup_info(artlines=False).strip())
    # Celery redirects a worker's stdout (a task's print) to its log only with its own setup.
    if app.conf.worker_redirect_stdouts:
        app.log.redirect_stdouts(app.conf.worker_redirect_stdouts_level)


if log_format_from_environment() == "json":
    celeryd_init.connect(_log_from_the_start)
    setup_logging.connect(_use_django_logging)
    celeryd_after_setup.connect(_log_worker_banner)

    class _QuietBeat(app.Beat):  # type: ignore[name-defined]
        """``celery beat`` without its printed banner."""

        def __init__(self, *args: Any, quiet: bool = False, **kwargs: Any) -> None:
            super().__init__(*args, quiet=True, **kwargs)

    app.Beat = _QuietBeat
