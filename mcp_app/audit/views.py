"""Audit pages: the call list (with its live-tail feed), one call, statistics and exports.

Thin by design (style.md §3): parse the GET filters (``forms``), call a selector, render.
Reading needs ``mcp_app.audit_calls``; arguments and results also need
``mcp_app.view_call_payloads``. Anonymous users go to the login page, others get 403.
With a read replica, each view reads the call log from it once the permission is checked
(``services.replica``), and the pages say so.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import wraps
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, render
from django.urls import reverse, reverse_lazy
from django.utils import timezone

from mcp_app.audit import charts
from mcp_app.audit.exports import call_log_export
from mcp_app.audit.forms import (
    DEFAULT_RANGE,
    KNOWN_METHODS,
    LIST_RANGES,
    RANGE_LABELS,
    RANGES,
    CallFilterForm,
    OverviewFilterForm,
)
from mcp_app.audit.selectors import (
    call_log_newer,
    call_log_overview,
    call_log_page,
    call_log_search,
    call_log_stats,
    caller_names,
    tool_for_call,
    tool_version_for_call,
)
from mcp_app.auth.clients import client_name, client_names
from mcp_app.conf import get_conf
from mcp_app.models import CallLog
from mcp_app.services import teams
from mcp_app.services.calllog.recorder import ADMIN_TEST_HTTP_METHOD
from mcp_app.services.replica import current_read_state, replica_reads

AUDIT_PERMISSION = "mcp_app.audit_calls"
PAYLOAD_PERMISSION = "mcp_app.view_call_payloads"
View = Callable[..., HttpResponseBase]
# The statistics page reloads itself this often (while it is visible).
STATS_REFRESH_SECONDS = 60
# Times as every page prints them (mcpsite/formats: DATETIME_FORMAT "Y-m-d H:i:s T").
TIME_FORMAT = "%Y-%m-%d %H:%M:%S %Z"


def auditor_required(view: View) -> View:
    """Send anonymous users to log in; answer 403 to users without the audit permission."""

    @wraps(view)
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not request.user.has_perm(AUDIT_PERMISSION):
            raise PermissionDenied(
                "The call log needs the permission “Can search, inspect and export the call"
                f" log” ({AUDIT_PERMISSION})."
            )
        return view(request, *args, **kwargs)

    return login_required(checked, login_url=reverse_lazy("admin:login"))


def _filters(request: HttpRequest) -> CallFilterForm:
    form = CallFilterForm(request.GET or None, user=request.user)
    form.is_valid()
    return form


def _int_param(request: HttpRequest, name: str) -> int | None:
    value = request.GET.get(name, "")
    return int(value) if value.isdigit() and len(value) < 19 else None


def _query_without(request: HttpRequest, *names: str) -> str:
    params = request.GET.copy()
    for name in names:
        params.pop(name, None)
    return params.urlencode()


# The list's error column: this many characters of the message (the whole one on hover).
ERROR_EXCERPT_CHARS = 120


def _name_callers(rows: list[CallLog]) -> list[CallLog]:
    """Set ``username`` and ``oauth_client_name`` on each row: a query each for the page,
    none when no row names a user or an OAuth client."""
    users, clients = caller_names(rows)
    for row in rows:
        found = users.get(row.principal_id) if row.principal_id is not None else None
        row.username = found or ""  # type: ignore[attr-defined]
        row.oauth_client_name = clients.get(row.client_id, "")  # type: ignore[attr-defined]
    return rows


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= ERROR_EXCERPT_CHARS else text[: ERROR_EXCERPT_CHARS - 1] + "…"


def _row_json(record: CallLog) -> dict[str, Any]:
    return {
        "id": record.pk,
        "url": reverse("mcp_app:audit_detail", args=[record.pk]),
        "created_at": timezone.localtime(record.created_at).strftime(TIME_FORMAT),
        "try_it": record.http_method == ADMIN_TEST_HTTP_METHOD,
        "endpoint": record.endpoint_slug,
        "method": record.rpc_method or record.http_method,
        "target": record.target,
        "era": record.era,
        "status": record.status,
        "status_label": record.get_status_display(),
        "http_status": record.http_status,
        "duration_ms": record.duration_ms,
        "session_id": record.session_id,
        "client_name": record.client_name,
        "client_version": record.client_version,
        "client_from_user_agent": record.client_from_user_agent,
        "client_url": _list_url(client_name=record.client_name) if record.client_name else "",
        "user": getattr(record, "username", ""),
        "oauth_client_name": getattr(record, "oauth_client_name", ""),
        "client_id": record.client_id,
        "error": _excerpt(record.error_message),
        "error_full": record.error_message,
    }


def _list_url(**params: str) -> str:
    return f"{reverse('mcp_app:audit_list')}?{urlencode(params)}"


@auditor_required
@replica_reads
def call_list(request: HttpRequest) -> HttpResponse:
    form = _filters(request)
    before = _int_param(request, "before")
    rows, next_before = call_log_page(call_log_search(filters=form.call_filter()), before=before)
    query = _query_without(request, "before")
    ranges_base = _query_without(request, "before", "range", "since", "until")
    context = {
        "nav": "audit",
        "form": form,
        "rows": _name_callers(rows),
        "before": before,
        "next_before": next_before,
        "query": query,
        "newest_id": rows[0].pk if rows else 0,
        "methods": KNOWN_METHODS,
        "try_it_method": ADMIN_TEST_HTTP_METHOD,
        "filtered": bool(query),
        "quick_ranges": [
            (key, RANGE_LABELS[key], f"?{ranges_base}{'&' if ranges_base else ''}range={key}")
            for key in LIST_RANGES
        ],
        "current_range": request.GET.get("range", ""),
        "time_zone": timezone.get_current_timezone_name(),
        "read_source": current_read_state(),
    }
    return render(request, "audit/list.html", context)


@auditor_required
@replica_reads
def call_feed(request: HttpRequest) -> JsonResponse:
    """The live tail: records newer than ``?after=<id>`` matching the same filters."""
    after = _int_param(request, "after") or 0
    rows = call_log_newer(call_log_search(filters=_filters(request).call_filter()), after=after)
    _name_callers(rows)
    return JsonResponse(
        {
            "rows": [_row_json(row) for row in rows],
            "latest": rows[0].pk if rows else after,
            # When the tail was updated, in the rows' format (not the browser's own).
            "updated": timezone.localtime().strftime(TIME_FORMAT),
        }
    )


@auditor_required
@replica_reads
def call_detail(request: HttpRequest, pk: int) -> HttpResponse:
    calls = teams.visible(CallLog.objects.select_related("endpoint", "principal"), request.user)
    record = get_object_or_404(calls, pk=pk)  # another team's call: 404, as a missing one
    payloads = request.user.has_perm(PAYLOAD_PERMISSION)
    context = {
        "nav": "audit",
        "record": record,
        "client_name": client_name(record.client_id),
        "try_it": record.http_method == ADMIN_TEST_HTTP_METHOD,
        "tool": tool_for_call(record),
        "tool_version": tool_version_for_call(record),
        "payloads": payloads,
        "arguments": _pretty(record.arguments) if payloads else None,
        "result": _pretty(record.result) if payloads else None,
        "progress": _pretty(record.progress) if payloads else None,
        "client_info": _pretty(record.client_info),
        "client_url": _list_url(client_name=record.client_name) if record.client_name else "",
    }
    return render(request, "audit/detail.html", context)


def _pretty(value: Any) -> str | None:
    return None if value is None else json.dumps(value, indent=2, ensure_ascii=False)


@auditor_required
@replica_reads
def call_overview(request: HttpRequest) -> HttpResponse:
    """The fleet at a glance over the last 24 hours, each figure linked to its calls."""
    until = timezone.now()
    since = until - RANGES[DEFAULT_RANGE]
    form = OverviewFilterForm(request.GET or None, user=request.user)
    overview = call_log_overview(
        since=since,
        idle_seconds=get_conf().MCP_SESSION_IDLE_SECONDS,
        filters=form.call_filter(),
    )
    links = _ListLinks(request, since=since, until=until)
    names = client_names([row.key for row in overview.clients])
    context = {
        "nav": "audit",
        "form": form,
        "filtered": any(request.GET.get(name) for name in form.fields),
        "overview": overview,
        "busiest": [(row, links.tool(row.name)) for row in overview.busiest],
        "failing": [(row, links.tool(row.name)) for row in overview.failing],
        "slowest": [(row, links.tool(row.name)) for row in overview.slowest],
        "users": [(row, row.key, links.filtered(user=row.key)) for row in overview.users],
        "clients": [
            (row, names.get(row.key, row.key), links.filtered(client=row.key))
            for row in overview.clients
        ],
        "client_programs": [
            (row, links.filtered(client_name=row.name, client_version=row.version))
            for row in overview.client_programs
        ],
        "refresh_seconds": STATS_REFRESH_SECONDS,
        "read_source": current_read_state(),
    }
    return render(request, "audit/overview.html", context)


class _ListLinks:
    """URLs of the call list showing what one part of the stats page counted."""

    def __init__(self, request: HttpRequest, *, since: datetime, until: datetime) -> None:
        self.base = request.GET.copy()
        for name in ("range", "since", "until", "before"):
            self.base.pop(name, None)
        self.since, self.until = since, until

    def _url(self, **params: str) -> str:
        query = self.base.copy()
        for name, value in params.items():
            query[name] = value
        return f"{reverse('mcp_app:audit_list')}?{query.urlencode()}"

    def _window(self, since: datetime, until: datetime) -> dict[str, str]:
        # The list's filter fields read local time, as <input type="datetime-local"> sends it.
        def local(moment: datetime) -> str:
            return timezone.localtime(moment).strftime("%Y-%m-%dT%H:%M:%S")

        # Whole seconds: the end rounds up, so calls of its last second stay in.
        end = until if until.microsecond == 0 else until + timedelta(seconds=1)
        return {"since": local(since), "until": local(end)}

    def bucket(self, start: datetime, end: datetime) -> str:
        return self._url(**self._window(max(start, self.since), end))

    def tool(self, name: str) -> str:
        return self._url(tool=name, method="tools/call", **self._window(self.since, self.until))

    def endpoint(self, slug: str) -> str:
        return self._url(endpoint=slug, **self._window(self.since, self.until))

    def filtered(self, **filters: str) -> str:
        return self._url(**filters, **self._window(self.since, self.until))


@auditor_required
@replica_reads
def call_stats(request: HttpRequest) -> HttpResponse:
    form = _filters(request)
    since, until = form.time_range()
    stats = call_log_stats(filters=form.call_filter(), since=since, until=until)
    links = _ListLinks(request, since=since, until=until)
    context = {
        "nav": "audit",
        "form": form,
        "stats": stats,
        "error_pct": round(stats.error_rate * 100, 1),
        "ranges": [(key, RANGE_LABELS[key]) for key in RANGES],
        "current_range": request.GET.get("range", "" if "since" in request.GET else "24h"),
        "query": _query_without(request, "range", "since", "until"),
        "calls_chart": charts.calls_chart(stats.buckets, stats.bucket, links.bucket),
        "error_chart": charts.error_rate_chart(stats.buckets, stats.bucket),
        "tool_chart": charts.latency_chart(stats.per_tool, "Latency per tool", links.tool),
        "endpoint_chart": charts.latency_chart(
            stats.per_endpoint, "Latency per endpoint", links.endpoint
        ),
        "tool_rows": [(row, links.tool(row.name)) for row in stats.per_tool],
        "endpoint_rows": [(row, links.endpoint(row.name)) for row in stats.per_endpoint],
        "client_rows": [(row, links.filtered(client_name=row.name)) for row in stats.per_client],
        "refresh_seconds": STATS_REFRESH_SECONDS,
        "time_zone": timezone.get_current_timezone_name(),
        "read_source": current_read_state(),
    }
    return render(request, "audit/stats.html", context)


@auditor_required
@replica_reads
def export_csv(request: HttpRequest) -> StreamingHttpResponse:
    return _export(request, "csv")


@auditor_required
@replica_reads
def export_jsonl(request: HttpRequest) -> StreamingHttpResponse:
    return _export(request, "jsonl")


def _export(request: HttpRequest, fmt: str) -> StreamingHttpResponse:
    return call_log_export(
        request,
        fmt=fmt,
        filters=_filters(request).call_filter(),
        payloads=request.user.has_perm(PAYLOAD_PERMISSION),
    )
