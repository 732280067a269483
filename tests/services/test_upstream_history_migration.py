"""Migration 0019 (issue #26): an upstream that existed before upstreams had history gets its
first version, so the first edit after the upgrade can be reverted to what it was.

The test database is migrated back to before 0019, given an upstream, and migrated forward
again (to every app's latest migration, whatever happens in the test).
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from mcp_app.models import Upstream

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = ("mcp_app", "0018_backgroundcall_continuation")
AFTER = ("mcp_app", "0019_upstream_history")


def test_existing_upstreams_get_a_first_version() -> None:
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    try:
        executor.migrate([BEFORE])
        old = executor.loader.project_state([BEFORE]).apps.get_model("mcp_app", "Upstream")
        old.objects.create(name="peer", url="https://peer.example.com/mcp", call_timeout=20)

        executor = MigrationExecutor(connection)
        executor.migrate([AFTER])
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(latest)

    peer = Upstream.objects.get(name="peer")
    [first] = peer.history.all()
    assert (first.history_type, first.history_change_reason) == ("+", "migration")
    assert (first.url, first.call_timeout, first.sync_policy) == (
        "https://peer.example.com/mcp",
        20.0,
        "mark",
    )
    peer.url = "https://moved.example.com/mcp"
    peer.save()
    assert first.instance.url == "https://peer.example.com/mcp"
