"""The call log's list and stats queries at scale: index scans on a million rows (PostgreSQL).

One ``INSERT ... SELECT generate_series`` fills the table once for the module (committed, and
deleted after its last test: filling it takes seconds), ANALYZE gives the planner real
statistics, and EXPLAIN shows which plan each query of the audit UI gets.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection

from mcp_app.audit import selectors
from mcp_app.audit.selectors import CallFilter, call_log_search
from mcp_app.models import CallLog, Endpoint, Tool
from tests.support.catalog import make_python_tool

pytestmark = pytest.mark.django_db

ROWS = 1_000_000
# Rows are 2.5 s apart: a million of them cover the last 29 days, newest now.
STEP_SECONDS = 2.5

FILL = """
INSERT INTO mcp_app_calllog (
    created_at, duration_ms, endpoint_id, endpoint_slug, era, protocol_version, session_id,
    http_method, http_status, message_type, rpc_method, rpc_id, target, client_id, user_agent,
    status, error_message, capture, truncated, task_id, worker, request_id, client_name,
    client_version
)
SELECT
    now() - ((%(rows)s - n) * %(step)s * interval '1 second'),
    (n %% 997) / 10.0,
    (ARRAY[%(e1)s, %(e2)s, %(e3)s])[1 + n %% 3],
    (ARRAY['alpha', 'beta', 'gamma'])[1 + n %% 3],
    CASE WHEN n %% 2 = 0 THEN 'modern' ELSE 'legacy' END,
    CASE WHEN n %% 2 = 0 THEN '2026-07-28' ELSE '2025-11-25' END,
    CASE WHEN n %% 2 = 0 THEN '' ELSE 'session-' || (n / 100) END,
    'POST', 200, 'request',
    CASE WHEN n %% 4 = 0 THEN 'tools/list' ELSE 'tools/call' END,
    n::text,
    CASE WHEN n %% 4 = 0 THEN '' ELSE 'tool_' || (n %% 20) END,
    '', 'bench',
    CASE WHEN n %% 50 = 0 THEN 'tool_error' WHEN n %% 997 = 0 THEN 'rejected' ELSE 'ok' END,
    '', 'metadata', false, '', '', 'request-' || n,
    CASE WHEN n %% 1000 = 0 THEN 'rare-client' ELSE 'claude-code' END, '2.0'
FROM generate_series(1, %(rows)s) AS n
"""


@pytest.fixture(scope="module")
def million_calls(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, Endpoint]]:
    if connection.vendor != "postgresql":
        pytest.skip("the plan check is about PostgreSQL")
    with django_db_blocker.unblock():
        endpoints = {
            slug: Endpoint.objects.create(slug=slug) for slug in ("alpha", "beta", "gamma")
        }
        ids = [endpoint.pk for endpoint in endpoints.values()]
        started = time.monotonic()
        with connection.cursor() as cursor:
            cursor.execute(
                FILL,
                {"rows": ROWS, "step": STEP_SECONDS, "e1": ids[0], "e2": ids[1], "e3": ids[2]},
            )
            cursor.execute("ANALYZE mcp_app_calllog")
        print(f"inserted and analyzed {ROWS} call-log rows in {time.monotonic() - started:.1f} s")
    try:
        yield endpoints
    finally:
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute("DELETE FROM mcp_app_calllog WHERE endpoint_id = ANY(%s)", [ids])
            cursor.execute("ANALYZE mcp_app_calllog")
        with django_db_blocker.unblock():
            Endpoint.objects.filter(pk__in=ids).delete()


def explain(qs: Any) -> tuple[list[str], float]:
    """The plan's node descriptions (type and index) and its execution time in ms."""
    sql, params = qs.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON, ANALYZE) {sql}", params)
        raw = cursor.fetchone()[0]
    document = (json.loads(raw) if isinstance(raw, str) else raw)[0]
    nodes: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        name = node.get("Index Name") or node.get("Relation Name", "")
        nodes.append(f"{node['Node Type']} {name}".strip())
        for child in node.get("Plans", ()):
            walk(child)

    walk(document["Plan"])
    return nodes, document["Execution Time"]


def filled_partitions() -> set[str]:
    """The call-log tables (the partitions, or the one table) that hold rows."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname FROM pg_class WHERE relkind = 'r' AND relname LIKE %s "
            "AND reltuples > 0",
            [r"mcp\_app\_calllog%"],
        )
        return {name for (name,) in cursor.fetchall()}


def page_query(filters: CallFilter, before: int | None = None) -> Any:
    qs = call_log_search(filters=filters)
    if before is not None:
        qs = qs.filter(id__lt=before)
    return qs[: selectors.PAGE_SIZE + 1]


def test_list_pages_are_backward_index_scans_at_a_million_rows(million_calls):
    top = CallLog.objects.order_by("-id").values_list("id", flat=True).first()
    cases = {
        "newest page": (page_query(CallFilter()), "mcp_app_calllog_pkey"),
        "deep keyset page": (
            page_query(CallFilter(), before=top - 700_000),
            "mcp_app_calllog_pkey",
        ),
        # A third of all rows: walking the primary key backward fills a page soonest, and the
        # planner rightly prefers it to the endpoint index.
        "endpoint": (page_query(CallFilter(endpoint=million_calls["beta"])), "calllog"),
        # 5 % of rows: the planner may walk the primary key here too (a page fills quickly);
        # the rarer filters below must use their own index.
        "tool": (page_query(CallFilter(tool="tool_7")), "calllog"),
        "status": (page_query(CallFilter(status="rejected")), "calllog_status_id"),
        "session": (page_query(CallFilter(session="session-4321")), "calllog_session_id"),
        "request id": (page_query(CallFilter(request_id="request-4321")), "calllog_request_id"),
        # 0.1 % of rows, in every era: the client program's own index.
        "client name": (
            page_query(CallFilter(client_name="rare-client")),
            "calllog_client_name_id",
        ),
        # About 2 % of rows: any index, never a sequential scan.
        "any failure": (page_query(CallFilter(status="failed")), "calllog"),
    }
    report = {}
    # The call log's partitions holding the rows (PostgreSQL's partitions by day: migration
    # 0030): none is ever read whole. An empty one (a day ahead) or the three-row endpoint
    # table of a join may be.
    full = filled_partitions()
    for name, (qs, index) in cases.items():
        nodes, ms = explain(qs)
        report[name] = (nodes, round(ms, 2))
        assert not any(node.removeprefix("Seq Scan ") in full for node in nodes), (name, nodes)
        assert any(index in node for node in nodes), (name, nodes)
        assert ms < 200, (name, nodes, ms)
    print(json.dumps(report, indent=1))


def test_stats_of_a_day_use_the_time_index(million_calls, django_assert_max_num_queries):
    newest = CallLog.objects.order_by("-id").values_list("created_at", flat=True).first()
    until = newest + timedelta(microseconds=1)
    since = until - timedelta(days=1)
    qs = call_log_search(filters=CallFilter()).filter(created_at__gte=since, created_at__lt=until)
    nodes, _ms = explain(qs.select_related(None).order_by().values("target"))
    assert any("calllog_created" in node for node in nodes), nodes
    started = time.monotonic()
    # Calls over time, per tool, per endpoint, per client program: the call log's own path
    # (the rollups' is test_call_log_rollup's).
    with django_assert_max_num_queries(4):
        stats = selectors.call_log_stats(
            filters=CallFilter(), since=since, until=until, rollups=False
        )
    elapsed = time.monotonic() - started
    assert stats.total == pytest.approx(86_400 / STEP_SECONDS, abs=2)
    assert {row.name for row in stats.per_tool} == {f"tool_{n}" for n in range(20) if n % 4}
    assert {row.name for row in stats.per_client} == {"claude-code", "rare-client"}
    print(f"stats of one day ({stats.total} calls): {elapsed * 1000:.0f} ms")


def test_a_tools_figures_of_a_day_scan_only_its_rows_of_that_day(million_calls):
    newest = CallLog.objects.order_by("-id").values_list("created_at", flat=True).first()
    since = newest - timedelta(days=1)
    # Two tools named tool_1: one on alpha and beta, the other on gamma.
    first = make_python_tool("tool_1", "echo")
    first.endpoints.add(million_calls["alpha"], million_calls["beta"])
    second = make_python_tool("tool_1", "echo")
    second.endpoints.add(million_calls["gamma"])
    never = make_python_tool("tool_4", "echo")
    never.endpoints.add(million_calls["alpha"])
    tools = list(Tool.objects.prefetch_related("endpoints"))
    qs = selectors.tool_calls_since(tools=tools, since=since)

    nodes, ms = explain(qs.order_by().values("tool_pk"))
    started = time.monotonic()
    figures = selectors.tool_figures(tools=tools, since=since)
    elapsed = time.monotonic() - started

    # The id bound turns "this tool, last day" into a range of the (target, -id) index: no
    # scan of the 29 days before, nor of the other tools' rows.
    assert any("calllog_target_id" in node for node in nodes), nodes
    full = filled_partitions()
    assert not any(node.removeprefix("Seq Scan ") in full for node in nodes), nodes
    day = 86_400 / STEP_SECONDS / 20
    assert figures[first.pk].calls == pytest.approx(day * 2 / 3, abs=2)
    assert figures[second.pk].calls == pytest.approx(day / 3, abs=2)
    assert never.pk not in figures  # never called: no n with n % 20 == 4 is a tools/call
    print(f"figures of two tools over a day: plan {ms:.1f} ms, selector {elapsed * 1000:.0f} ms")
