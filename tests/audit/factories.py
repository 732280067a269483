"""Call-log rows for read-side tests (the UI, exports, stats, retention).

Recording itself is tested end to end against a live server; these rows stand in for what the
writer stores, so the pages can be tested at a known time and scale.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from mcp_app.models import CallLog, Endpoint


def make_call(endpoint: Endpoint | None = None, **fields: Any) -> CallLog:
    values: dict[str, Any] = {
        "created_at": timezone.now(),
        "endpoint": endpoint,
        "endpoint_slug": endpoint.slug if endpoint is not None else "",
        "era": CallLog.Era.MODERN,
        "protocol_version": "2026-07-28",
        "http_method": "POST",
        "http_status": 200,
        "message_type": CallLog.MessageType.REQUEST,
        "rpc_method": "tools/call",
        "rpc_id": "1",
        "target": "echo",
        "status": CallLog.Status.OK,
        "duration_ms": 12.5,
        "capture": "full",
        "arguments": {"message": "hi"},
        "result": {"content": [{"type": "text", "text": "hi"}]},
        **fields,
    }
    return CallLog.objects.create(**values)


def make_calls(endpoint: Endpoint, count: int, *, start: datetime | None = None) -> None:
    """``count`` tools/call rows a minute apart, every fifth an error, latencies 1..count ms."""
    start = start or timezone.now() - timedelta(minutes=count)
    CallLog.objects.bulk_create(
        CallLog(
            created_at=start + timedelta(minutes=i),
            endpoint=endpoint,
            endpoint_slug=endpoint.slug,
            era=CallLog.Era.MODERN,
            http_method="POST",
            http_status=200,
            message_type=CallLog.MessageType.REQUEST,
            rpc_method="tools/call",
            rpc_id=str(i),
            target="echo" if i % 2 else "add",
            status=CallLog.Status.TOOL_ERROR if i % 5 == 0 else CallLog.Status.OK,
            duration_ms=float(i + 1),
        )
        for i in range(count)
    )
