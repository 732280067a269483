"""JSON log lines (``LOG_FORMAT=json``): one object per event, on one line, for log shippers.

Every line has ``time`` (UTC, ISO 8601), ``level``, ``logger`` and ``message``; the MCP request
id (``services/request_ids.py``) when the event happened while serving one; ``trace_id`` and
``span_id`` of the current span when tracing is on (``services/tracing.py``); the ``extra``
fields the call site passed; and ``exception`` (the formatted traceback) for a logged
exception. Nothing here reads a header or an argument itself, so what a line holds is what
its call site chose to log.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import orjson

from mcp_app.services import tracing
from mcp_app.services.request_ids import request_id_var

# Attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if request_id := getattr(record, "request_id", None) or request_id_var.get():
            line["request_id"] = request_id
        if tracing.tracer is not None and (ids := tracing.current_ids()):
            line["trace_id"], line["span_id"] = ids
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key not in line:
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        # default=str: an extra that is not JSON (a path, a model) is logged as its text.
        return orjson.dumps(line, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
