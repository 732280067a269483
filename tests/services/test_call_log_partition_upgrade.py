"""The upgrade of an existing call log to a partitioned one (migration 0030, issue #30), on a
table of 200,000 rows: the old table becomes the legacy partition without a row copied
or an index rebuilt (the files on disk are the same ones), every row is still there, ids go
on from the old sequence, and the audit's queries work and use the legacy partition's
indexes.

None of that depends on the size: the default run fills 200,000 rows (about 2 s) to keep the
test command within its budget. The full two million the upgrade was sized for (a 20-second
fill) is one variable away (README, "Development"): ``MCPHOST_TEST_CALLLOG_ROWS=2000000
python3 dev.py test tests/services/test_call_log_partition_upgrade.py``.

The old table is made from the migration state before 0030 in a schema of its own
(``search_path`` puts it first), so the test database's own call log is left alone.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from mcp_app.audit.selectors import CallFilter, call_log_search
from mcp_app.models import CallLog
from mcp_app.services.calllog.partitions import (
    call_log_partitions,
    convert_to_partitioned,
    is_partitioned,
)

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = "calllog_upgrade"
DEFAULT_ROWS = 200_000
# The day-by-time query below needs more than a day of rows (34,561 rows).
MIN_ROWS = 40_000


def _rows() -> int:
    raw = os.environ.get("MCPHOST_TEST_CALLLOG_ROWS", "").strip()
    if not raw:
        return DEFAULT_ROWS
    if not raw.isdigit() or int(raw) < MIN_ROWS:
        raise pytest.UsageError(
            f"MCPHOST_TEST_CALLLOG_ROWS must be a whole number of at least {MIN_ROWS}, not {raw!r}"
        )
    return int(raw)


ROWS = _rows()
# Rows 2.5 s apart, the newest a minute ago: 200,000 cover the last 6 days, two million 58.
FILL = """
INSERT INTO mcp_app_calllog (
    created_at, endpoint_slug, era, protocol_version, session_id, http_method, http_status,
    message_type, rpc_method, rpc_id, target, client_id, user_agent, status, error_message,
    capture, truncated, task_id, worker, request_id
)
SELECT
    now() - interval '1 minute' - ((%(rows)s - n) * 2.5 * interval '1 second'),
    'alpha', 'modern', '2026-07-28', '', 'POST', 200, 'request', 'tools/call', n::text,
    'tool_' || (n %% 20), '', 'bench',
    CASE WHEN n %% 997 = 0 THEN 'rejected' ELSE 'ok' END,
    '', 'metadata', false, '', '', 'request-' || n
FROM generate_series(1, %(rows)s) AS n
"""


@pytest.fixture
def old_table() -> Iterator[None]:
    if connection.vendor != "postgresql":
        pytest.skip("partitions are PostgreSQL's")
    state = MigrationExecutor(connection).loader.project_state(("mcp_app", "0029_icons"))
    old_model = state.apps.get_model("mcp_app", "CallLog")
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE SCHEMA {SCHEMA}")
        cursor.execute(f"SET search_path TO {SCHEMA}, public")
    try:
        started = time.monotonic()
        with connection.schema_editor() as editor:
            editor.create_model(old_model)
            # Filled before the schema editor builds the secondary indexes (at its exit):
            # building them once is quicker than maintaining them for each row.
            with connection.cursor() as cursor:
                cursor.execute(FILL, {"rows": ROWS})
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE mcp_app_calllog")
        print(f"filled and indexed {ROWS} rows in {time.monotonic() - started:.1f} s")
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET search_path")
            cursor.execute(f"DROP SCHEMA {SCHEMA} CASCADE")


def scalar(sql: str, params: list[object] | None = None) -> object:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


def plan(qs: object) -> str:
    sql, params = qs.query.sql_with_params()  # type: ignore[attr-defined]
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(line for (line,) in cursor.fetchall())


def test_the_upgrade_attaches_the_old_rows_without_copying_one(old_table: None) -> None:
    filled = time.monotonic()
    assert not is_partitioned()
    file_before = scalar("SELECT pg_relation_filenode('mcp_app_calllog')")
    top_before = scalar("SELECT max(id) FROM mcp_app_calllog")
    index_files = {
        name: scalar("SELECT pg_relation_filenode(%s)", [name])
        for name in ("calllog_created", "calllog_status_id", "calllog_client_name_id")
    }

    now = timezone.now()
    assert convert_to_partitioned(now=now) is True
    converted = time.monotonic()

    assert is_partitioned()
    # The call-log columns later migrations add (0035: tool_team), on the partitioned table.
    with connection.schema_editor() as editor:
        editor.add_field(CallLog, CallLog._meta.get_field("tool_team"))
    # The same file: the legacy partition is the old table, not a copy of it.
    assert scalar("SELECT pg_relation_filenode('mcp_app_calllog_legacy')") == file_before
    assert scalar("SELECT count(*) FROM mcp_app_calllog") == ROWS
    assert scalar("SELECT count(*) FROM ONLY mcp_app_calllog_legacy") == ROWS
    found = call_log_partitions()
    names = [p.name for p in found]
    assert names[0] == "mcp_app_calllog_legacy" and names[-1] == "mcp_app_calllog_default"
    # Days made ahead, a week past now.
    assert found[-2].end is not None and found[-2].end > now + timedelta(days=7)
    # Ids go on from the old sequence; a new row lands in its day's partition.
    later = timezone.now() + timedelta(days=3)
    new = CallLog.objects.create(created_at=later, http_method="POST", status="ok")
    assert new.pk == top_before + 1
    assert scalar("SELECT tableoid::regclass::text FROM mcp_app_calllog WHERE id = %s", [new.pk])
    assert scalar(
        "SELECT tableoid::regclass::text FROM mcp_app_calllog WHERE id = %s", [new.pk]
    ) == "mcp_app_calllog_" + later.strftime("p%Y%m%d")

    # The audit's queries: the newest page, a rare status, a day's rows by time.
    newest = list(call_log_search(filters=CallFilter())[:50])
    assert newest[0].pk == new.pk and len(newest) == 50
    rejected = list(call_log_search(filters=CallFilter(status="rejected"))[:50])
    assert len(rejected) == 50 and {r.status for r in rejected} == {"rejected"}
    assert "calllog_status_id_legacy" in plan(
        call_log_search(filters=CallFilter(status="rejected"))[:50]
    )
    newest_old = scalar("SELECT max(created_at) FROM mcp_app_calllog_legacy")
    day_ago = newest_old - timedelta(days=1)  # type: ignore[operator]
    assert CallLog.objects.filter(created_at__gte=day_ago, created_at__lt=later).count() == (
        86_400 / 2.5 + 1  # the old rows of their last day, both ends included
    )
    assert "calllog_created_legacy" in plan(CallLog.objects.filter(created_at__gte=day_ago))
    # Nor was an index rebuilt: each is the legacy partition's, renamed, in the same file.
    for name, file in index_files.items():
        assert scalar("SELECT pg_relation_filenode(%s)", [f"{name}_legacy"]) == file
    # Running the migration again changes nothing.
    assert convert_to_partitioned() is False
    print(f"upgraded {ROWS} rows in {converted - filled:.1f} s (no row copied)")
