"""Legacy sessions: opening, expiry, closing, and purging old rows."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from mcp_app.models import Session
from mcp_app.services import invalidation
from mcp_app.services.catalog_writes import endpoint_create
from mcp_app.services.sessions import (
    DatabaseSessionStore,
    session_close,
    session_load,
    session_open,
)


def open_for(endpoint) -> str:
    return session_open(
        endpoint_id=endpoint.pk,
        protocol_version="2025-11-25",
        client_capabilities={},
        client_info={"name": "t", "version": "1"},
    ).id


def test_an_idle_session_expires(endpoint, settings):
    settings.MCP_SESSION_IDLE_SECONDS = 60
    session_id = open_for(endpoint)
    assert session_load(session_id=session_id, endpoint_id=endpoint.pk) is not None
    Session.objects.filter(id=session_id).update(last_seen_at=timezone.now() - timedelta(minutes=2))
    # This process holds the session in memory until its next re-check of the row.
    settings.MCP_CACHE_RECHECK_SECONDS = 0.0
    assert session_load(session_id=session_id, endpoint_id=endpoint.pk) is None


def test_a_held_session_needs_no_query_and_a_close_elsewhere_reaches_it(
    endpoint, django_assert_num_queries
):
    session_id = open_for(endpoint)
    with django_assert_num_queries(0):
        assert session_load(session_id=session_id, endpoint_id=endpoint.pk) is not None
        # Another principal's lookup of the same id is refused from memory too.
        assert session_load(session_id=session_id, endpoint_id=endpoint.pk, user_id=7) is None

    # Closed by another process: its push reaches this one (applied here like a pushed one).
    Session.objects.filter(id=session_id).update(closed_at=timezone.now())
    invalidation.apply_locally(invalidation.Invalidation(session_ids=frozenset({session_id})))

    assert session_load(session_id=session_id, endpoint_id=endpoint.pk) is None


def test_a_log_level_change_is_seen_by_the_next_load(transactional_db):
    # The store writes from a worker thread, on its own connection: rows must be committed.
    endpoint = endpoint_create(slug="levels", auth_mode="public")
    session_id = open_for(endpoint)
    async_to_sync(DatabaseSessionStore().set_log_level)(session_id, "debug")

    loaded = session_load(session_id=session_id, endpoint_id=endpoint.pk)

    assert loaded is not None and loaded.log_level == "debug"


def test_a_closed_session_is_gone_and_closing_twice_is_refused(endpoint):
    session_id = open_for(endpoint)
    assert session_close(session_id=session_id, endpoint_id=endpoint.pk)
    assert session_load(session_id=session_id, endpoint_id=endpoint.pk) is None
    assert not session_close(session_id=session_id, endpoint_id=endpoint.pk)


def test_purge_removes_only_sessions_older_than_the_cutoff(endpoint):
    fresh, stale, closed_long_ago = open_for(endpoint), open_for(endpoint), open_for(endpoint)
    long_ago = timezone.now() - timedelta(days=8)
    Session.objects.filter(id=stale).update(last_seen_at=long_ago)
    Session.objects.filter(id=closed_long_ago).update(closed_at=long_ago)
    out = StringIO()
    call_command("purge_sessions", "--days", "7", stdout=out)
    assert "Deleted 2 session(s)" in out.getvalue()
    assert list(Session.objects.values_list("id", flat=True)) == [fresh]


@pytest.mark.django_db
def test_purge_refuses_a_negative_age():
    with pytest.raises(CommandError, match="negative"):
        call_command("purge_sessions", "--days", "-1")
