"""The lost-worker rule allows for a database restart (issue #13, item 1), without a database.

A worker cannot write its heartbeat while PostgreSQL is down, and writes one within a beat
of its return; a silent call is lost only once the database has been back for three beats.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from mcp_app.models import BackgroundCall
from mcp_app.protocol.results import Outcome
from mcp_app.services.background.calls import stale_verdict

LOST_AFTER = 10.0  # MCP_BACKGROUND_LOST_AFTER_SECONDS default
BEAT = 1.0  # MCP_BACKGROUND_HEARTBEAT_SECONDS default


def working(now: datetime, *, silent_for: float) -> BackgroundCall:
    return BackgroundCall(
        status=BackgroundCall.Status.WORKING,
        created_at=now - timedelta(seconds=60),
        started_at=now - timedelta(seconds=60),
        heartbeat_at=now - timedelta(seconds=silent_for),
        soft_time_limit=600.0,
        hard_time_limit=630.0,
    )


def test_a_worker_silent_through_a_database_restart_is_not_lost() -> None:
    now = timezone.now()
    call = working(now, silent_for=LOST_AFTER + 5)
    back_since = now - timedelta(seconds=2 * BEAT)
    assert stale_verdict(call, now) is not None  # what the rule said before
    assert stale_verdict(call, now, back_since) is None


def test_a_worker_still_silent_three_beats_after_the_restart_is_lost() -> None:
    now = timezone.now()
    call = working(now, silent_for=LOST_AFTER + 5)
    verdict = stale_verdict(call, now, now - timedelta(seconds=3 * BEAT + 0.5))
    assert verdict is not None
    assert verdict[1] == Outcome.LOST


def test_a_beating_worker_is_never_lost() -> None:
    now = timezone.now()
    assert stale_verdict(working(now, silent_for=BEAT), now, now - timedelta(days=1)) is None
