"""Call-log exports as streamed downloads: CSV and JSON Lines of the filtered records.

One home for both formats, used by the audit pages (``/audit/export.csv``, ``.jsonl``) and the
management API (``/api/v1/call-log/export/``), so the two never differ in columns, filters or
the payload permission.
"""

from __future__ import annotations

import csv
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, StreamingHttpResponse
from django.utils import timezone

from mcp_app.audit.selectors import (
    CallFilter,
    acall_log_chunks,
    as_export_row,
    call_log_chunks,
    call_log_search,
    caller_names,
)
from mcp_app.models import CallLog

FORMATS = ("csv", "jsonl")
# Arguments and results are exported only to holders of this permission, as /audit/ shows them.
PAYLOAD_PERMISSION = "mcp_app.view_call_payloads"

Format = Callable[[dict[str, Any]], str]


class _Echo:
    """A file-like object whose write() returns the line, for csv.writer in a generator."""

    def write(self, value: str) -> str:
        return value


def _export(
    request: HttpRequest,
    filters: CallFilter,
    payloads: bool,
    header: str,
    line: Format,
    content_type: str,
    ext: str,
) -> StreamingHttpResponse:
    """Stream the filtered records, one piece of text per chunk of rows read.

    Under ASGI the body is an async iterator: Django would otherwise read a synchronous
    iterator whole before sending its first byte (and hold the whole export in memory).
    Each chunk is still read and formatted in a thread, by ``acall_log_chunks``.
    """
    qs = call_log_search(filters=filters).select_related(None)
    # The database is chosen now: the body is read after the view has returned, outside the
    # replica scope it ran in (services.replica).
    qs = qs.using(qs.db)

    def text(rows: list[CallLog]) -> str:
        # Users' and OAuth clients' names: a query each per chunk that names any.
        names = caller_names(rows)
        return "".join(line(as_export_row(row, payloads=payloads, names=names)) for row in rows)

    async def achunks() -> AsyncIterator[str]:
        if header:
            yield header
        async for piece in acall_log_chunks(qs, render=text):
            yield piece

    def chunks() -> Iterator[str]:
        if header:
            yield header
        for rows in call_log_chunks(qs):
            yield text(rows)

    body = achunks() if isinstance(request, ASGIRequest) else chunks()
    response = StreamingHttpResponse(body, content_type=content_type)
    filename = f"call-log-{timezone.now():%Y%m%d-%H%M%S}.{ext}"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def call_log_export(
    request: HttpRequest, *, fmt: str, filters: CallFilter, payloads: bool
) -> StreamingHttpResponse:
    """The records ``filters`` select as a download in ``fmt`` (one of ``FORMATS``);
    arguments and results only with ``payloads``."""
    if fmt == "jsonl":

        def json_line(row: dict[str, Any]) -> str:
            return json.dumps(row, ensure_ascii=False) + "\n"

        content_type = "application/x-ndjson; charset=utf-8"
        return _export(request, filters, payloads, "", json_line, content_type, "jsonl")
    columns = list(as_export_row(CallLog(created_at=timezone.now()), payloads=payloads))
    writer = csv.writer(_Echo())

    def csv_line(row: dict[str, Any]) -> str:
        return writer.writerow(
            [json.dumps(row[c]) if isinstance(row[c], dict | list) else row[c] for c in columns]
        )

    header = writer.writerow(columns)
    return _export(request, filters, payloads, header, csv_line, "text/csv; charset=utf-8", "csv")
