"""The request id: one value per MCP request in its log lines, call-log rows and the
``X-Request-Id`` response header.

Taken from the client's ``X-Request-Id`` when it is a plain token of at most 64 characters,
else, when this process traces (``services/tracing.py``), the trace id of the request's
span, else from the trace id of a W3C ``traceparent`` (so the id correlates with the caller's
trace), else 8 random hex digits per process followed by a counter. Held in a context
variable: tasks the request starts inherit it, and the JSON log formatter
(``mcp_app/ops/logs.py``) reads it.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Mapping, Sequence
from contextvars import ContextVar

from mcp_app.services import tracing

request_id_var: ContextVar[str] = ContextVar("mcp_request_id", default="")

_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,64}")
# W3C Trace Context: version-traceid-parentid-flags; version ff and all-zero ids are invalid.
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-.*)?")
_ZERO_TRACE = "0" * 32
# An id needs to be unique, not secret: a random prefix per process and a counter, which
# costs no system call per request (os.urandom is one).
_PROCESS_PREFIX = os.urandom(4).hex()
_counter = itertools.count()


def _new_prefix() -> None:
    global _PROCESS_PREFIX, _counter
    _PROCESS_PREFIX, _counter = os.urandom(4).hex(), itertools.count()


# A forked child (a Celery pool process) must not repeat its parent's ids.
os.register_at_fork(after_in_child=_new_prefix)


def trace_id(traceparent: str) -> str:
    """Return the trace id of a valid ``traceparent`` header value, else ""."""
    match = _TRACEPARENT.fullmatch(traceparent.strip().lower())
    if match is None or match[1] == "ff" or match[2] == _ZERO_TRACE or match[3] == "0" * 16:
        return ""
    if match[1] == "00" and match[4]:
        return ""  # version 00 has exactly four fields
    return match[2]


def request_id_for(headers: Mapping[str, Sequence[str]]) -> str:
    """Choose the request id for a request with these (lower-cased) headers."""
    incoming = headers.get("x-request-id")
    if incoming and _REQUEST_ID.fullmatch(incoming[0]):
        return incoming[0]
    # The server span continues an incoming traceparent, so this is that trace when one came.
    if tracing.tracer is not None and (current := tracing.current_trace_id()):
        return current
    traceparent = headers.get("traceparent")
    if traceparent and (trace := trace_id(traceparent[0])):
        return trace
    return f"{_PROCESS_PREFIX}{next(_counter):08x}"


def bind_request_id(headers: Mapping[str, Sequence[str]]) -> str:
    """Choose the request id and make it the current one (this context and its tasks)."""
    request_id = request_id_for(headers)
    request_id_var.set(request_id)
    return request_id
