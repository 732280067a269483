"""JSON log lines (``LOG_FORMAT=json``): one object per event, on one line, for log shippers.

Every line has ``time`` (UTC, ISO 8601), ``level``, ``logger`` and ``message``; the MCP request
id (``services/request_ids.py``) when the event happened while serving one; ``trace_id`` and
``span_id`` of the current span when tracing is on (``services/tracing.py``); the ``extra``
fields the call site passed; and ``exception`` (the formatted traceback) for a logged
exception. Nothing here reads a header or an argument itself, so what a line holds is what
its call site chose to log.

Both formatters (``JsonFormatter``, ``TextFormatter``) redact credentials from the finished
line, whoever logged it: the value of a query parameter named like a secret (``access_token``,
``api_key``, ``key``, ``...token``, ``...secret``), any API token (``mcpk_...``) and the
credentials after ``Bearer``/``Basic``. A refused request's URL is quoted by Django
(``django.request`` passes the request, whose text is its full path) and by the servers'
access logs, and a client that put its key in the query string must not find it there.
``settings.LOGGING`` sends uvicorn's loggers through the same handler, and
``route_stray_output`` Python's warnings and Daphne's access log, which Daphne writes to
stdout itself. ``say_as_json`` stands in for what a Celery worker writes from a signal handler.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

from mcp_app.services import tracing
from mcp_app.services.request_ids import request_id_var

# Attributes every LogRecord has; anything else on a record came from ``extra`` (but for
# uvicorn's ``color_message``, its message again with terminal colour codes).
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "color_message"}


REDACTED = "[redacted]"
# A query parameter whose name says it carries a credential, up to the value's end (the JSON
# text of a line ends a value at a quote or a backslash too, so that it stays valid JSON).
_SECRET_PARAMETER = re.compile(
    r"([?&;](?:[\w.%-]*?(?:token|key|secret|passw|auth|credential|signature|session|cookie)"
    r"[\w.%-]*|code|sig)=)[^&;\s\"'#\\]+",
    re.IGNORECASE,
)
_API_TOKEN = re.compile(r"mcpk_[A-Za-z0-9_-]+")
_AUTHORIZATION = re.compile(r"\b(Bearer|Basic)(\s+|%20)[A-Za-z0-9._~+/=-]{4,}", re.IGNORECASE)


def redact_secrets(text: str) -> str:
    """Return ``text`` with the credentials it quotes replaced by ``[redacted]``."""
    if "=" in text:
        text = _SECRET_PARAMETER.sub(rf"\1{REDACTED}", text)
    if "mcpk_" in text:
        text = _API_TOKEN.sub(REDACTED, text)
    return _AUTHORIZATION.sub(rf"\1\2{REDACTED}", text)


class TextFormatter(logging.Formatter):
    """Plain lines (``LOG_FORMAT=text``), with credentials redacted."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_secrets(super().format(record))


def log_format_from_environment() -> str:
    """``LOG_FORMAT`` ("json" or "text"), read as ``settings.LOG_FORMAT`` is, where there are
    no settings yet: uvicorn's supervisor, Celery's command line."""
    return os.environ.get("LOG_FORMAT", "text").strip().lower()


def formatter_for_environment() -> logging.Formatter:
    """The formatter ``LOG_FORMAT`` names, for the supervisor of uvicorn's worker processes,
    which never loads Django's settings (``mcpsite/uvicorn_logging.json``)."""
    if log_format_from_environment() == "json":
        return JsonFormatter()
    return TextFormatter()


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact_secrets(self._json(record))

    def _json(self, record: logging.LogRecord) -> str:
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


_daphne_access = logging.getLogger("daphne.access")


def route_stray_output() -> None:
    """Send what would bypass the handlers through them: Python's warnings (``py.warnings``),
    and Daphne's access log (NCSA lines it writes to stdout itself; ``daphne.access``)."""
    logging.captureWarnings(True)
    try:
        from daphne.access import AccessLogGenerator
    except ImportError:  # Daphne not installed: nothing writes that log
        return

    def write_entry(
        self: Any,
        host: str,
        date: datetime,
        request: str,
        status: Any = None,
        length: Any = None,
        ident: Any = None,
        user: Any = None,
    ) -> None:
        _daphne_access.info(
            '%s %s %s "%s" %s %s',
            host,
            ident or "-",
            user or "-",
            request,
            status or "-",
            length or "-",
        )

    AccessLogGenerator.write_entry = write_entry


def say_as_json(message: str, f: Any = sys.__stderr__) -> None:
    """Write ``message`` as one JSON log line, with one system call and no lock: Celery's
    ``safe_say``, which a worker uses in its signal handlers, where logging could deadlock."""
    record = logging.makeLogRecord(
        {"name": "celery.apps.worker", "levelno": logging.INFO, "levelname": "INFO"}
    )
    record.msg = message.strip()
    line = JsonFormatter().format(record) + "\n"
    with contextlib.suppress(AttributeError, OSError, ValueError):  # best effort, as Celery's
        os.write(f.fileno(), line.encode())
