"""Celery beat runs every upkeep job on its schedule (issue #16): a real ``celery beat`` and a
real worker, one-second intervals, and the effect of each job observed in the database; and
the embedded setup's web process runs the schedule itself.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application

from mcp_app.models import BackgroundCall, CallLog, CallLogRollup, Endpoint, Session
from mcp_app.services.calllog.partitions import call_log_partitions, is_partitioned, slot_start
from mcp_app.services.sessions import session_open
from tests.support.live import ROOT, SECRET_KEY, asgi_server, database_url
from tests.support.oauth import issue_token, make_client
from tests.support.waiting import wait_until
from tests.support.worker import celery_worker

pytestmark = pytest.mark.django_db(transaction=True)

JOB_INTERVALS = {
    "UPKEEP_PURGE_SESSIONS_SECONDS": "1",
    "UPKEEP_PURGE_OAUTH_CLIENTS_SECONDS": "1",
    "UPKEEP_CLEAR_CIMD_APPLICATIONS_SECONDS": "1",
    "UPKEEP_CLEAR_TOKENS_SECONDS": "1",
    "UPKEEP_REAP_BACKGROUND_CALLS_SECONDS": "1",
    "UPKEEP_CALL_LOG_PARTITIONS_SECONDS": "1",
    "UPKEEP_PURGE_CALL_LOGS_SECONDS": "1",
    "UPKEEP_CALL_LOG_ROLLUP_SECONDS": "1",
}
EFFECT_TIMEOUT_SECONDS = 60.0
LONG_AGO = timezone.now() - timedelta(days=40)


@contextlib.contextmanager
def celery_beat(workdir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``celery -A mcpsite beat`` with one-second intervals on the test database."""
    broker = os.environ.get("CELERY_BROKER_URL") or os.environ["REDIS_URL"]
    env = {
        **os.environ,
        **JOB_INTERVALS,
        "DATABASE_URL": database_url(),
        "SECRET_KEY": SECRET_KEY,
        "CELERY_BROKER_URL": broker,
    }
    log = open(workdir / "beat.log", "wb")  # noqa: SIM115
    command = [
        sys.executable, "-m", "celery", "-A", "mcpsite", "beat", "--loglevel", "INFO",
        "--schedule", str(workdir / "schedule"),
    ]  # fmt: skip
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        log.close()


def _wait_until(condition: Callable[[], bool], what: str, beat_log: Path) -> None:
    def log() -> str:
        return beat_log.read_text(errors="replace") if beat_log.exists() else ""

    wait_until(condition, what, timeout=EFFECT_TIMEOUT_SECONDS, interval=0.2, detail=log)


def test_beat_runs_every_upkeep_job(endpoint: Endpoint) -> None:
    old_session = session_open(
        endpoint_id=endpoint.id, protocol_version="2025-06-18", client_capabilities={},
        client_info={"name": "gone", "version": "1"},
    )  # fmt: skip
    Session.objects.filter(id=old_session.id).update(last_seen_at=LONG_AGO)
    live_session = session_open(
        endpoint_id=endpoint.id, protocol_version="2025-06-18", client_capabilities={},
        client_info={"name": "here", "version": "1"},
    )  # fmt: skip
    dcr = make_client("abandoned", registration_source=Application.RegistrationSource.DCR)
    Application.objects.filter(pk=dcr.pk).update(created=LONG_AGO)
    cimd = make_client(
        "expired document",
        registration_source=Application.RegistrationSource.CIMD,
        cimd_expires_at=LONG_AGO,
    )
    issue_token(None, resource=["http://x/mcp/test"], expires_in=-40 * 24 * 3600)
    expired_call = BackgroundCall.objects.create(
        endpoint=endpoint, tool_name="gone", protocol_version="2025-06-18",
        status=BackgroundCall.Status.COMPLETED, soft_time_limit=1, hard_time_limit=2,
        expires_at=LONG_AGO,
    )  # fmt: skip
    expired_tokens = AccessToken.objects.filter(expires__lt=LONG_AGO + timedelta(days=1))
    assert expired_tokens.count() == 1
    # The call log: a record past the retention window (90 days by default) and, on
    # PostgreSQL, a day ahead whose partition is missing.
    old_record = CallLog.objects.create(
        created_at=timezone.now() - timedelta(days=100), http_method="POST", status="ok"
    )
    # A call of a few minutes ago, for the charts' rollups.
    recent = CallLog.objects.create(
        created_at=timezone.now() - timedelta(minutes=3), http_method="POST", status="ok"
    )
    minute = recent.created_at.replace(second=0, microsecond=0)
    day_ahead = slot_start(timezone.now() + timedelta(days=5), days=1)
    if is_partitioned():
        missing = [p.name for p in call_log_partitions() if p.start == day_ahead]
        with connection.cursor() as cursor:
            cursor.execute(f'DROP TABLE "{missing[0]}"')

    workdir = Path(tempfile.mkdtemp(prefix="mcphost-beat-"))
    with celery_worker(concurrency=1), celery_beat(workdir):
        log = workdir / "beat.log"
        _wait_until(
            lambda: not Session.objects.filter(id=old_session.id).exists(),
            "purge_sessions did not delete the old session", log,
        )  # fmt: skip
        _wait_until(
            lambda: not Application.objects.filter(pk__in=[dcr.pk, cimd.pk]).exists(),
            "purge_oauth_clients / clearcimdapplications left a client", log,
        )  # fmt: skip
        _wait_until(
            lambda: not expired_tokens.exists(),
            "cleartokens did not delete the expired token", log,
        )  # fmt: skip
        _wait_until(
            lambda: not BackgroundCall.objects.filter(id=expired_call.id).exists(),
            "reap_background_calls did not delete the expired call", log,
        )  # fmt: skip
        _wait_until(
            lambda: not CallLog.objects.filter(id=old_record.id).exists(),
            "purge_call_logs did not delete the old record", log,
        )  # fmt: skip
        _wait_until(
            lambda: CallLogRollup.objects.filter(grain="minute", bucket_start=minute).exists(),
            "call_log_rollup did not roll up the recent call", log,
        )  # fmt: skip
        if is_partitioned():
            _wait_until(
                lambda: any(p.start == day_ahead for p in call_log_partitions()),
                "call_log_partitions did not create the missing day", log,
            )  # fmt: skip
    assert Session.objects.filter(id=live_session.id).exists()


def test_embedded_web_process_runs_the_schedule_itself(endpoint: Endpoint) -> None:
    """What ``dev.py run`` starts: no broker, no beat process, no worker process."""
    expired_call = BackgroundCall.objects.create(
        endpoint=endpoint, tool_name="gone", protocol_version="2025-06-18",
        status=BackgroundCall.Status.COMPLETED, soft_time_limit=1, hard_time_limit=2,
        expires_at=LONG_AGO,
    )  # fmt: skip
    workdir = Path(tempfile.mkdtemp(prefix="mcphost-embedded-beat-"))
    env = {
        **JOB_INTERVALS,
        "MCPHOST_EMBEDDED_BEAT": "1",
        "CELERY_BROKER_URL": "memory://",
        "CELERY_BEAT_SCHEDULE_FILENAME": str(workdir / "schedule"),
    }
    with asgi_server("daphne", extra_env=env):
        _wait_until(
            lambda: not BackgroundCall.objects.filter(id=expired_call.id).exists(),
            "the embedded schedule did not reap the expired call", workdir / "schedule",
        )  # fmt: skip
