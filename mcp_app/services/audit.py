"""Call-log recording: one row per MCP request, shaped by the tool's capture policy.

The transport creates one ``CallRecorder`` per HTTP request and tells it what it learns (the
endpoint, the decoded messages, the session, each answer); the recorder also watches the
response's status. When the request's work ends the transport calls ``submit()``, which hands
plain records to this process's single writer thread and returns at once. The writer applies
each tool's capture policy (nothing, metadata only, or full with a byte cap), redacts secret
fields, and INSERTs whole batches: a request costs no query of its own, only a row in a batched
INSERT. Recording never raises into the transport: a failure is logged, never answered.

Also here: the capture policy itself, and ``call_log_purge`` (retention).
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import logging
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from django.db import (
    DatabaseError,
    InterfaceError,
    OperationalError,
    connections,
    router,
    transaction,
)
from django.db.models import Max
from django.utils import timezone

from mcp_app.models import CallLog, Endpoint, Tool
from mcp_app.protocol import jsonrpc
from mcp_app.protocol.catalog import CatalogSnapshot
from mcp_app.protocol.context import LegacySession
from mcp_app.protocol.errors import McpError
from mcp_app.protocol.jsonrpc import Notification, Request, Response
from mcp_app.protocol.versions import MODERN_VERSIONS
from mcp_app.services import metrics
from mcp_app.services.catalog import EndpointState
from mcp_app.services.request_ids import request_id_var

logger = logging.getLogger(__name__)
# The thread that writes the call log; it serves no request (bench/run.py measures its cost).
WRITER_THREAD = "mcp-call-log"

AsgiSend = Callable[[dict[str, Any]], Awaitable[None]]
Status = CallLog.Status
Capture = Tool.Capture

REDACTED = "[redacted]"
# Key names that always hold secrets, matched as substrings of the lower-cased name with "-"
# read as "_": "secrets and tokens never appear" holds even when an operator forgot to list one.
SECRET_NAME_PARTS = (
    "password", "passwd", "secret", "token", "api_key", "apikey", "authorization", "cookie",
    "private_key", "credential",
)  # fmt: skip
# Secret values shorter than this are redacted under their key but not scrubbed elsewhere.
MIN_SCRUB_CHARS = 4
# Depth past which captured JSON is cut: redaction walks it recursively.
MAX_DEPTH = 32
# Metadata capture describes at most this many keys per object and this many levels.
METADATA_KEYS = 50
METADATA_DEPTH = 3
# Capture policy of messages that are not tool calls (lists, reads, prompts, lifecycle).
DEFAULT_POLICY_MODE = Capture.METADATA
ERROR_MESSAGE_CHARS = 1000
USER_AGENT_CHARS = 512

# The writer: rows per write, how long a batch waits to fill, rows held while the database
# is unreachable, retry pacing, how long a slug's endpoint id is trusted.
BATCH_ROWS = 1000
COALESCE_SECONDS = 0.02
MAX_PENDING = 100_000
RETRY_FIRST_SECONDS = 0.5
RETRY_MAX_SECONDS = 10.0
EXIT_FLUSH_SECONDS = 5.0
SLUG_CACHE_SECONDS = 60.0

_TARGET_PARAM = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "resources/subscribe": "uri",
    "resources/unsubscribe": "uri",
}
_ARGUMENT_METHODS = frozenset({"tools/call", "prompts/get"})


# -- capture policy -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CapturePolicy:
    """What one tool's calls keep of their arguments and results."""

    mode: str = DEFAULT_POLICY_MODE
    max_bytes: int = 4096
    # Lower-cased field names redacted at any depth, besides the secret-looking ones.
    redact: frozenset[str] = frozenset()


def parse_redact_names(text: str) -> frozenset[str]:
    """Split the admin's "redacted fields" text (lines or commas) into lower-cased names."""
    return frozenset(
        name.strip().lower()
        for line in text.splitlines()
        for name in line.split(",")
        if name.strip()
    )


def secret_fields_of_schema(schema: Any) -> frozenset[str]:
    """Return the names of input properties marked secret (``writeOnly`` or format password)."""
    found: set[str] = set()

    def walk(node: Any, depth: int) -> None:
        if not isinstance(node, Mapping) or depth > MAX_DEPTH:
            return
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            for name, spec in properties.items():
                if isinstance(spec, Mapping):
                    if spec.get("writeOnly") is True or spec.get("format") == "password":
                        found.add(str(name).lower())
                    walk(spec, depth + 1)
        for key in ("items", "additionalProperties"):
            walk(node.get(key), depth + 1)
        for defs in ("$defs", "definitions"):
            if isinstance(node.get(defs), Mapping):
                for spec in node[defs].values():
                    walk(spec, depth + 1)

    walk(schema, 0)
    return frozenset(found)


def is_secret_name(name: str, redact: frozenset[str] = frozenset()) -> bool:
    lowered = name.lower()
    if lowered in redact:
        return True
    normalized = lowered.replace("-", "_")
    return any(part in normalized for part in SECRET_NAME_PARTS)


def redact(
    value: Any, names: frozenset[str] = frozenset(), found: set[str] | None = None, depth: int = 0
) -> Any:
    """Return ``value`` with the values of secret or listed keys replaced, at any depth.

    The string values replaced are added to ``found``, so ``scrub`` can remove them from
    elsewhere too (a tool echoing its API key in a text block).
    """
    if depth > MAX_DEPTH:
        return "[too deep]"
    if isinstance(value, Mapping):
        cleaned = {}
        for key, item in value.items():
            if is_secret_name(str(key), names):
                cleaned[str(key)] = REDACTED
                if found is not None:
                    _collect_strings(item, found, depth + 1)
            else:
                cleaned[str(key)] = redact(item, names, found, depth + 1)
        return cleaned
    if isinstance(value, list | tuple):
        return [redact(item, names, found, depth + 1) for item in value]
    return value


def _collect_strings(value: Any, found: set[str], depth: int) -> None:
    if depth > MAX_DEPTH:
        return
    if isinstance(value, str):
        # Short values ("1", "yes") would blank out unrelated text; they leak little alone.
        if len(value) >= MIN_SCRUB_CHARS:
            found.add(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            _collect_strings(item, found, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            _collect_strings(item, found, depth + 1)


def scrub(value: Any, secrets: Iterable[str], depth: int = 0) -> Any:
    """Replace every occurrence of each of ``secrets`` inside the strings of ``value``."""
    ordered = sorted(secrets, key=len, reverse=True)  # a secret containing another goes whole
    if not ordered or depth > MAX_DEPTH:
        return value
    if isinstance(value, str):
        for secret in ordered:
            value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, Mapping):
        return {key: scrub(item, ordered, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(item, ordered, depth + 1) for item in value]
    return value


def describe(value: Any, depth: int = 0) -> Any:
    """Metadata capture: the payload's shape (keys and value types), never its values."""
    if isinstance(value, Mapping):
        if depth >= METADATA_DEPTH:
            return f"<object of {len(value)} keys>"
        shown = list(value.items())[:METADATA_KEYS]
        described = {str(key): describe(item, depth + 1) for key, item in shown}
        if len(value) > METADATA_KEYS:
            described["…"] = f"<{len(value) - METADATA_KEYS} more keys>"
        return described
    if isinstance(value, list | tuple):
        return f"<array of {len(value)}>"
    if isinstance(value, bool):
        return "<boolean>"
    if isinstance(value, int | float):
        return "<number>"
    if isinstance(value, str):
        return "<string>"
    return "<null>" if value is None else f"<{type(value).__name__}>"


@dataclass(frozen=True, slots=True)
class Captured:
    """One payload after the policy: what is stored, its original size, and whether it was cut."""

    value: Any = None
    size: int | None = None
    truncated: bool = False


def capture_call(
    arguments: Any, result: Any, policy: CapturePolicy, secret_fields: frozenset[str]
) -> tuple[Captured, Captured]:
    """Apply ``policy`` to a call's arguments and result.

    Secret-looking keys, the policy's listed fields and the tool's secret input fields are
    redacted, and their values scrubbed from every other string of both payloads, before
    anything is measured against the cap: a cut never exposes a prefix of a secret.
    """
    if policy.mode == Capture.NONE:
        return Captured(), Captured()
    if policy.mode == Capture.METADATA:
        # Types and key names hold no values, so nothing needs redacting: no walk of the
        # payload in Python (a tools/list result is the whole catalog).
        return _describe(arguments), _describe(result)
    names = policy.redact | secret_fields
    secrets: set[str] = set()
    cleaned_arguments = redact(arguments, names, secrets)
    cleaned_result = redact(result, names, secrets)
    if secrets:
        cleaned_arguments = scrub(cleaned_arguments, secrets)
        cleaned_result = scrub(cleaned_result, secrets)
    return _fit(cleaned_arguments, policy), _fit(cleaned_result, policy)


def _describe(value: Any) -> Captured:
    if value is None:
        return Captured()
    return Captured(describe(value), len(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)))


def _fit(value: Any, policy: CapturePolicy) -> Captured:
    if value is None:
        return Captured()
    encoded = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    if len(encoded) <= policy.max_bytes:
        return Captured(value, len(encoded))
    head = encoded[: policy.max_bytes].decode("utf-8", errors="ignore")
    marker = {
        "truncated": True,
        "bytes": len(encoded),
        "kept_bytes": policy.max_bytes,
        "head": head,
    }
    return Captured(marker, len(encoded), truncated=True)


# -- the recorder (event-loop side: no I/O) -------------------------------------------------


@dataclass(slots=True)
class _Entry:
    """What is known about one JSON-RPC message (or about a request that carried none)."""

    message_type: str = ""
    rpc_method: str = ""
    rpc_id: str = ""
    target: str = ""
    arguments: Any = None
    result: Any = None
    status: str = ""
    error_code: int | None = None
    error_message: str = ""
    version: str = ""
    dispatched: bool = False
    started: float | None = None
    finished: float | None = None
    # Background calls: the call's id (also its MCP task id) and the worker that ran it.
    task_id: str = ""
    worker: str = ""


@dataclass(slots=True)
class PendingCall:
    """A finished request's record, waiting for the writer thread (policy not yet applied)."""

    row: dict[str, Any]
    arguments: Any
    result: Any
    tool_pk: int | None
    input_schema: Any
    policy_tag: tuple[int, int] | None


def _json_id(value: Any) -> str:
    if value is None:
        return ""
    try:
        return orjson.dumps(value).decode()[:200]
    except orjson.JSONEncodeError:  # a lone surrogate: the writer's safe_text replaces it
        return str(value)[:200]


def _cut(text: str, limit: int = ERROR_MESSAGE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class CallRecorder:
    """Collects what one HTTP request to an MCP endpoint did; ``submit()`` queues its rows.

    Every method is cheap and never raises for odd input: the transport calls them on the hot
    path, and recording must never turn a served request into an error.
    """

    def __init__(self, scope: Mapping[str, Any], headers: Mapping[str, Sequence[str]]) -> None:
        self._created_at = timezone.now()
        self._t0 = time.monotonic()
        self._http_method = str(scope.get("method", ""))[:8]
        route = scope.get("url_route") or {}
        self._slug = str(route.get("kwargs", {}).get("slug", ""))[:100]
        client = scope.get("client")
        self._remote_addr = client[0] if client else None
        self._user_agent = _cut(_header(headers, "user-agent"), USER_AGENT_CHARS)
        self._session_id = _header(headers, "mcp-session-id")[:64]
        self._version = _header(headers, "mcp-protocol-version")[:16]
        self._request_id = request_id_var.get()
        self._era = ""
        self._endpoint_id: int | None = None
        self._snapshot: CatalogSnapshot | None = None
        self._policy_tag: tuple[int, int] | None = None
        self._entries: list[_Entry] = []
        self._by_message: dict[int, _Entry] = {}
        self._http_status: int | None = None
        self._error_body = b""
        self._submitted = False
        self._principal_id: int | None = None
        self._client_id = ""
        self._body: bytes | None = None

    def watch(self, send: AsgiSend) -> AsgiSend:
        """Wrap the ASGI ``send`` to see the response status (and the body of an error)."""

        async def watched(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self._http_status = message["status"]
                for name, value in message.get("headers", ()):
                    if name == b"mcp-session-id":
                        self._session_id = value.decode("latin-1")[:64]
            elif (self._http_status or 0) >= 400 and len(self._error_body) < 4096:
                # Error bodies are small JSON-RPC errors; keep enough to read code and message.
                self._error_body += message.get("body", b"")[:4096]
            await send(message)

        return watched

    def endpoint(self, state: EndpointState | None) -> None:
        if state is not None:
            self._endpoint_id = state.id
            self._snapshot = state.snapshot
            self._policy_tag = (state.id, state.catalog_version)

    def request_body(self, body: bytes) -> None:
        """Note the request's whole body; it is decoded only if the request ends undecoded.

        A request refused after its body arrived but before the transport decoded it (a 500
        while the database is down, a 415) is then still recorded with its method and id.
        """
        self._body = body

    def received(self, messages: Iterable[Any], *, modern: bool) -> None:
        """Note the decoded message(s) of a POST: one row each."""
        self._era = CallLog.Era.MODERN if modern else CallLog.Era.LEGACY
        self._note(messages)

    def _note(self, messages: Iterable[Any]) -> None:
        for message in messages:
            entry = _Entry()
            if isinstance(message, Request | Notification):
                entry.message_type = (
                    CallLog.MessageType.REQUEST
                    if isinstance(message, Request)
                    else CallLog.MessageType.NOTIFICATION
                )
                entry.rpc_method = message.method[:128]
                params = message.params if isinstance(message.params, Mapping) else {}
                key = _TARGET_PARAM.get(message.method)
                if key is not None and isinstance(params.get(key), str):
                    entry.target = params[key][:512]
                if message.method in _ARGUMENT_METHODS:
                    entry.arguments = params.get("arguments")
                elif params:
                    entry.arguments = {k: v for k, v in params.items() if k != "_meta"} or None
                if isinstance(message, Request):
                    entry.rpc_id = _json_id(message.id)
            elif isinstance(message, Response):
                entry.message_type = CallLog.MessageType.RESPONSE
                entry.rpc_id = _json_id(message.id)
                if message.error is not None:
                    entry.error_code, entry.error_message = _error_fields(message.error)
            self._entries.append(entry)
            self._by_message[id(message)] = entry

    def principal(self, user_id: int | None, client_id: str) -> None:
        """Note who called (an OAuth user and client); anonymous requests never call this."""
        self._principal_id = user_id
        self._client_id = client_id[:200]

    def session(self, session: LegacySession) -> None:
        self._session_id = session.id[:64]
        self._version = session.protocol_version
        self._era = CallLog.Era.LEGACY

    def dispatched(self, request: Request, version: str) -> None:
        entry = self._by_message.get(id(request))
        if entry is not None:
            entry.version = version
            entry.dispatched = True
            entry.started = time.monotonic()

    def answered(
        self,
        request: Request,
        body: Mapping[str, Any],
        error: Any,
        outcome: str | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        """Record the JSON-RPC answer to ``request`` (a result, or an error object in ``body``).

        ``outcome`` is what the wire does not show: "timed_out" for a tool stopped at its limit;
        ``detail`` says where a background call ran ({"task_id", "worker"}).
        """
        entry = self._by_message.get(id(request))
        if entry is None:
            return
        entry.finished = time.monotonic()
        if detail:
            entry.task_id = str(detail.get("task_id") or "")[:64]
            entry.worker = str(detail.get("worker") or "")[:200]
        if error is not None:
            entry.status = Status.PROTOCOL_ERROR
            entry.error_code, entry.error_message = _error_fields(body.get("error"))
            return
        result = body.get("result")
        entry.result = result
        entry.status = Status.OK
        if request.method == "tools/call" and isinstance(result, Mapping) and result.get("isError"):
            entry.status = Status.TOOL_ERROR
            entry.error_message = _cut(_first_text(result.get("content")))
            if outcome == "timed_out":
                entry.status = Status.TIMED_OUT

    def submit_after(self, task: asyncio.Task[None]) -> None:
        """``add_done_callback`` form of ``submit``: a cancelled task's open calls are cancelled."""
        self.submit(cancelled=task.cancelled())

    def submit(self, *, cancelled: bool = False) -> None:
        """Queue this request's rows for the writer; only the first call counts."""
        if self._submitted:
            return
        self._submitted = True
        try:
            records = self._records(cancelled)
            _writer().put(records)
            # The one place MCP traffic is counted (services/metrics.py).
            metrics.record_calls((record.row, record.tool_pk is not None) for record in records)
        except Exception:
            # The boundary between serving and recording: a recording bug is logged, the
            # served answer stands.
            logger.exception("Call log record dropped", extra={"endpoint": self._slug})

    def _records(self, cancelled: bool) -> list[PendingCall]:
        now = time.monotonic()
        request_ms = (now - self._t0) * 1000
        if not self._entries and self._body:
            self._note_undecoded_body()
        entries = self._entries or [_Entry()]
        rejection: tuple[int | None, str] | None = None
        records = []
        for entry in entries:
            status, code, message = entry.status, entry.error_code, entry.error_message
            if not status:
                if cancelled and entry.dispatched or self._http_status is None:
                    status = Status.CANCELLED
                elif self._http_status < 400:
                    status = Status.OK
                else:
                    status = Status.PROTOCOL_ERROR if self._http_status >= 500 else Status.REJECTED
                    if rejection is None:
                        rejection = _error_from_body(self._error_body)
                    if code is None and not message:
                        code, message = rejection
            if entry.started is not None:
                duration = ((entry.finished or now) - entry.started) * 1000
            else:
                duration = request_ms
            version = entry.version or self._version
            era = self._era
            if version:
                era = CallLog.Era.MODERN if version in MODERN_VERSIONS else CallLog.Era.LEGACY
            tool = None
            if entry.rpc_method == "tools/call" and self._snapshot is not None:
                tool = self._snapshot.tool(entry.target)
            records.append(
                PendingCall(
                    row={
                        "created_at": self._created_at,
                        "duration_ms": round(duration, 3),
                        "endpoint_id": self._endpoint_id,
                        "endpoint_slug": self._slug,
                        "era": era,
                        "protocol_version": version[:16],
                        "session_id": self._session_id,
                        "http_method": self._http_method,
                        "http_status": self._http_status,
                        "message_type": entry.message_type,
                        "rpc_method": entry.rpc_method,
                        "rpc_id": entry.rpc_id,
                        "target": entry.target,
                        "principal_id": self._principal_id,
                        "client_id": self._client_id,
                        "remote_addr": self._remote_addr,
                        "user_agent": self._user_agent,
                        "status": status,
                        "error_code": code,
                        "error_message": _cut(message),
                        "task_id": entry.task_id,
                        "worker": entry.worker,
                        "request_id": self._request_id,
                        # The definitions that answered (services/history.py).
                        "catalog_version": self._policy_tag[1] if self._policy_tag else None,
                        "tool_history_id": getattr(tool and tool.key, "history_id", None),
                    },
                    arguments=entry.arguments,
                    result=entry.result,
                    tool_pk=tool.key.pk if tool is not None else None,
                    input_schema=tool.input_schema if tool is not None else None,
                    policy_tag=self._policy_tag,
                )
            )
        return records

    def _note_undecoded_body(self) -> None:
        """Read the messages of a body the transport never decoded, if it is JSON-RPC at all."""
        try:
            decoded = jsonrpc.decode(self._body or b"")
        except McpError:
            return
        self._note(decoded if isinstance(decoded, list) else [decoded])


def _header(headers: Mapping[str, Sequence[str]], name: str) -> str:
    values = headers.get(name)
    return values[0] if values else ""


def _error_fields(error: Any) -> tuple[int | None, str]:
    if not isinstance(error, Mapping):
        return None, ""
    code = error.get("code")
    message = error.get("message")
    # The column is a 32-bit integer: a larger code (a client's own response) is not kept,
    # rather than having the database refuse the whole record.
    return (
        code
        if isinstance(code, int) and not isinstance(code, bool) and -(2**31) <= code < 2**31
        else None,
        _cut(message) if isinstance(message, str) else "",
    )


def _error_from_body(body: bytes) -> tuple[int | None, str]:
    """Read code and message of the JSON-RPC error an HTTP-level rejection answered with."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None, ""
    if isinstance(data, list) and data:
        data = data[0]
    return _error_fields(data.get("error")) if isinstance(data, Mapping) else (None, "")


def _first_text(content: Any) -> str:
    if isinstance(content, list):
        for block in content:
            if isinstance(block, Mapping) and isinstance(block.get("text"), str):
                return block["text"]
    return ""


# -- safe text: what PostgreSQL's text and jsonb accept -------------------------------------

# PostgreSQL text and jsonb reject U+0000, and UTF-8 cannot encode a lone surrogate: both are
# replaced by U+FFFD in every stored string, so no character a client sends keeps its call out
# of the log.
REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def safe_text(text: str) -> str:
    """Return ``text`` with U+0000 and lone surrogates replaced by U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", REPLACEMENT)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(REPLACEMENT, text)
    return text


def safe_json(value: Any, depth: int = 0) -> Any:
    """Return ``value`` with ``safe_text`` applied to every string and key, at any depth."""
    if isinstance(value, str):
        return safe_text(value)
    if depth > MAX_DEPTH:
        return "[too deep]"
    if isinstance(value, Mapping):
        return {safe_text(str(key)): safe_json(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [safe_json(item, depth + 1) for item in value]
    return value


def _json_text(value: Any) -> str | None:
    """Serialise a captured payload for a jsonb column, made safe only when it needs to be."""
    if value is None:
        return None
    try:
        encoded = orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:  # a lone surrogate
        encoded = b""
    # The escape of U+0000 is the only way it appears in orjson's output; an escaped
    # backslash followed by "u0000" also matches, and only costs a needless walk.
    if not encoded or b"\\u0000" in encoded:
        encoded = orjson.dumps(safe_json(value), default=str, option=orjson.OPT_NON_STR_KEYS)
    return encoded.decode()


# -- the writer thread ----------------------------------------------------------------------

# The columns the writer fills (every column but the id): first those a record's ``row``
# names, then what the capture policy decides, in this order in each written tuple.
_CAPTURE_KEYS = (
    "capture", "arguments", "result", "arguments_bytes", "result_bytes", "truncated", "progress",
)  # fmt: skip
_BY_ATTNAME = {field.attname: field for field in CallLog._meta.concrete_fields}
_ROW_KEYS = tuple(
    name
    for name, field in _BY_ATTNAME.items()
    if not field.primary_key and name not in _CAPTURE_KEYS
)
_FIELDS = tuple(_BY_ATTNAME[name] for name in (*_ROW_KEYS, *_CAPTURE_KEYS))
_COLUMNS = tuple(field.column for field in _FIELDS)
# The value of each column a record does not name (an admin test call names no client).
_ROW_DEFAULTS = {name: _BY_ATTNAME[name].get_default() for name in _ROW_KEYS}
_JSON_INDEXES = frozenset(
    i for i, field in enumerate(_FIELDS) if field.attname in {"arguments", "result", "progress"}
)
# Marks a record the database refused whole: only its metadata (ASCII-escaped) was kept.
REJECTED_CAPTURE = "rejected"
# Outage errors are retried (the record waits); any other database error rejects the record.
_OUTAGE_ERRORS = (OperationalError, InterfaceError)

Row = tuple[Any, ...]


class _Writer:
    """One thread per process that turns pending records into batched writes.

    Under load batches grow (a batch waits up to ``COALESCE_SECONDS`` for more records, up to
    ``BATCH_ROWS``), and a steady-state batch is one statement: PostgreSQL gets one COPY,
    other databases one executemany INSERT, both built from plain tuples, never model
    instances; capture policies are cached per (endpoint, catalog version, tool).

    Records wait in memory while the database is unreachable (retried with backoff that new
    records never shorten) up to ``MAX_PENDING``; past that they are dropped and counted, so
    an outage cannot exhaust the web process. A record the database refuses is written again
    reduced to its metadata, or dropped if even that is refused: it is never retried. At exit
    the queue is flushed for up to ``EXIT_FLUSH_SECONDS``.
    """

    def __init__(self) -> None:
        self._queue: collections.deque[PendingCall] = collections.deque()
        self._cond = threading.Condition()
        self._busy = False
        self._idle = False
        self._stopping = False
        self.dropped = 0
        self._dropping = False
        self._down_since: float | None = None
        self._policies: dict[tuple[int, int, int], tuple[CapturePolicy, frozenset[str]]] = {}
        self._slugs: dict[str, tuple[float, int | None]] = {}
        self._thread = threading.Thread(target=self._run, name=WRITER_THREAD, daemon=True)
        self._thread.start()

    def put(self, records: Sequence[PendingCall]) -> None:
        with self._cond:
            room = MAX_PENDING - len(self._queue)
            if room < len(records):
                self.dropped += len(records) - max(room, 0)
                metrics.CALL_LOG_DROPPED.inc(len(records) - max(room, 0))
                if not self._dropping:
                    # Once per episode: a full queue during an outage would log per request.
                    self._dropping = True
                    logger.error("Call log queue full: records are being dropped")
                records = records[: max(room, 0)]
            self._queue.extend(records)
            # Wake the writer only when it waits for work or a batch is full: a notify per
            # request would cost a thread switch per request. All waiters, since a flush()
            # may be waiting too and must not take the writer's wake-up.
            if self._idle or len(self._queue) >= BATCH_ROWS:
                self._cond.notify_all()

    def flush(self, timeout: float) -> bool:
        """Wait until every queued record is written; False if ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def stop(self) -> None:
        self.flush(EXIT_FLUSH_SECONDS)
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    def _run(self) -> None:
        delay = RETRY_FIRST_SECONDS
        batch: list[PendingCall] = []
        rows: list[Row] = []
        while True:
            if not rows:
                batch = self._next_batch()
                if not batch:
                    return
            try:
                alias = router.db_for_write(CallLog)
                if not rows:
                    rows = self._rows(alias, batch)
                started = time.monotonic()
                self._write_rows(alias, rows)
                metrics.CALL_LOG_BATCH_SECONDS.observe(time.monotonic() - started)
            except _OUTAGE_ERRORS as exc:
                if not rows:
                    with self._cond:
                        self._queue.extendleft(reversed(batch))
                self._outage(exc)
                connections[router.db_for_write(CallLog)].close()
                if not self._pause(delay):
                    return
                delay = min(delay * 2, RETRY_MAX_SECONDS)
                continue
            except Exception:
                logger.exception("Call log batch dropped (%d records)", len(rows) or len(batch))
                metrics.CALL_LOG_DROPPED.inc(len(rows) or len(batch))
                rows = []
            if self._down_since is not None:
                logger.warning(
                    "Call log database reachable again after %.1f s; %d records dropped so far",
                    time.monotonic() - self._down_since,
                    self.dropped,
                )
                self._down_since = None
            delay = RETRY_FIRST_SECONDS
            with self._cond:
                self._busy = False
                self._dropping = False
                self._cond.notify_all()

    def _next_batch(self) -> list[PendingCall]:
        """Wait for records, then up to ``COALESCE_SECONDS`` for a full batch; [] to stop."""
        with self._cond:
            self._idle = True
            while not self._queue and not self._stopping:
                self._cond.wait()
            self._idle = False
            deadline = time.monotonic() + COALESCE_SECONDS
            while len(self._queue) < BATCH_ROWS and not self._stopping:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            if self._stopping:
                return []
            self._busy = True
            batch = [self._queue.popleft() for _ in range(min(BATCH_ROWS, len(self._queue)))]
            metrics.CALL_LOG_QUEUE.set(len(self._queue))
            return batch

    def _outage(self, exc: Exception) -> None:
        if self._down_since is None:
            # One line per outage, not a traceback per retry.
            self._down_since = time.monotonic()
            logger.warning(
                "Call log database unreachable (%s); holding records and retrying",
                type(exc).__name__,
            )

    def _pause(self, delay: float) -> bool:
        """Wait ``delay`` seconds whatever arrives meanwhile; False when stopping."""
        deadline = time.monotonic() + delay
        with self._cond:
            while not self._stopping:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return True
                self._cond.wait(remaining)
        return False

    def _rows(self, alias: str, batch: Sequence[PendingCall]) -> list[Row]:
        self._load_policies(alias, batch)
        self._resolve_endpoints(alias, batch)
        rows = []
        for pending in batch:
            try:
                rows.append(self._row(pending))
            except Exception:
                # A record this code cannot shape still leaves its metadata.
                logger.exception("Call log record could not be captured; kept its metadata")
                rows.append(_reduced(self._bare_row(pending)))
        return rows

    def _write_rows(self, alias: str, rows: list[Row]) -> None:
        """Write ``rows``; on an outage, raise with the rows not yet written left in ``rows``."""
        try:
            self._insert(alias, rows)
            rows.clear()
            return
        except _OUTAGE_ERRORS:
            raise
        except DatabaseError:
            pass
        # One refused row must not cost the batch: write them one by one.
        while rows:
            try:
                self._insert(alias, rows[:1])
            except _OUTAGE_ERRORS:
                raise
            except DatabaseError as exc:
                self._write_reduced(alias, rows[0], exc)
            del rows[0]

    def _write_reduced(self, alias: str, row: Row, exc: DatabaseError) -> None:
        logger.warning(
            "Call log record rejected by the database (%s); kept its metadata only",
            type(exc).__name__,
        )
        try:
            self._insert(alias, [_reduced(row)])
        except _OUTAGE_ERRORS:
            raise
        except DatabaseError as again:
            logger.error("Call log record dropped: its metadata was rejected too (%s)", again)
            metrics.CALL_LOG_DROPPED.inc()

    @staticmethod
    def _insert(alias: str, rows: Sequence[Row]) -> None:
        connection = connections[alias]
        table = connection.ops.quote_name(CallLog._meta.db_table)
        columns = ", ".join(connection.ops.quote_name(column) for column in _COLUMNS)
        if connection.vendor == "postgresql":
            # COPY: one statement, rows streamed as text, no SQL to parse per row.
            sql = f"COPY {table} ({columns}) FROM STDIN"
            with (
                connection.wrap_database_errors,
                connection.cursor() as cursor,
                cursor.cursor.copy(sql) as copy,
            ):
                for row in rows:
                    copy.write_row(row)
            return
        # Other backends (SQLite in the embedded run): one executemany in one transaction.
        prepared = [
            tuple(
                value if i in _JSON_INDEXES else _FIELDS[i].get_db_prep_save(value, connection)
                for i, value in enumerate(row)
            )
            for row in rows
        ]
        marks = ", ".join(["%s"] * len(_COLUMNS))
        with transaction.atomic(using=alias), connection.cursor() as cursor:
            cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", prepared)

    def _load_policies(self, alias: str, batch: Sequence[PendingCall]) -> None:
        """Fetch the capture policy of every tool in ``batch`` not cached for its catalog version.

        A tool edit bumps its endpoints' catalog version, so (endpoint, version, tool) never
        serves a stale policy; one query covers every miss of the batch, and a tool deleted
        since is cached too (with the default policy), so a steady state runs no query.
        """
        missing = {
            (*pending.policy_tag, pending.tool_pk): pending.input_schema
            for pending in batch
            if pending.tool_pk is not None
            and pending.policy_tag is not None
            and (*pending.policy_tag, pending.tool_pk) not in self._policies
        }
        if not missing:
            return
        if len(self._policies) > 10_000:
            self._policies.clear()
        rows = (
            Tool.objects.using(alias)
            .filter(pk__in={key[2] for key in missing})
            .values_list("pk", "capture_mode", "capture_max_bytes", "capture_redact")
        )
        found = {
            pk: CapturePolicy(mode, max_bytes, parse_redact_names(names))
            for pk, mode, max_bytes, names in rows
        }
        for key, schema in missing.items():
            # A tool deleted since the call has no row: its calls keep metadata only.
            policy = found.get(key[2], CapturePolicy())
            self._policies[key] = (policy, secret_fields_of_schema(schema))

    def _resolve_endpoints(self, alias: str, batch: Sequence[PendingCall]) -> None:
        """Name the endpoint of requests rejected before it was looked up (Host, size).

        Only rejections lack it; slugs are cached for ``SLUG_CACHE_SECONDS``, so a stream of
        rejections runs this query once in a while, not per batch.
        """
        now = time.monotonic()
        slugs = {
            pending.row["endpoint_slug"]
            for pending in batch
            if pending.row.get("endpoint_id") is None
            and pending.row.get("endpoint_slug")
            and self._slugs.get(pending.row["endpoint_slug"], (0.0, None))[0] < now
        }
        if slugs:
            if len(self._slugs) > 10_000:
                self._slugs.clear()
            ids = dict(
                Endpoint.objects.using(alias).filter(slug__in=slugs).values_list("slug", "pk")
            )
            for slug in slugs:
                self._slugs[slug] = (now + SLUG_CACHE_SECONDS, ids.get(slug))
        for pending in batch:
            if pending.row.get("endpoint_id") is None and pending.row.get("endpoint_slug"):
                cached = self._slugs.get(pending.row["endpoint_slug"])
                pending.row["endpoint_id"] = cached[1] if cached else None

    def _row(self, pending: PendingCall) -> Row:
        policy, secret_fields = CapturePolicy(), frozenset[str]()
        if pending.tool_pk is not None and pending.policy_tag is not None:
            policy, secret_fields = self._policies.get(
                (*pending.policy_tag, pending.tool_pk), (policy, secret_fields)
            )
        try:
            arguments, result = capture_call(
                pending.arguments, pending.result, policy, secret_fields
            )
        except orjson.JSONEncodeError:  # a lone surrogate, which no JSON text can carry
            arguments, result = capture_call(
                safe_json(pending.arguments), safe_json(pending.result), policy, secret_fields
            )
        captured = arguments.size is not None or result.size is not None
        return (
            *self._bare_values(pending),
            policy.mode if captured else "",
            _json_text(arguments.value),
            _json_text(result.value),
            arguments.size,
            result.size,
            arguments.truncated or result.truncated,
            None,
        )

    @staticmethod
    def _bare_values(pending: PendingCall) -> list[Any]:
        row = pending.row
        values = []
        for key in _ROW_KEYS:
            value = row.get(key, _ROW_DEFAULTS[key])
            values.append(safe_text(value) if type(value) is str else value)
        return values

    def _bare_row(self, pending: PendingCall) -> Row:
        return (*self._bare_values(pending), "", None, None, None, None, False, None)


def _reduced(row: Row) -> Row:
    """The metadata of a refused row: no payloads, every string ASCII-escaped, and a marker."""
    values = []
    for field, value in zip(_FIELDS, row, strict=True):
        if field.attname in {"arguments", "result", "progress", "error_code"}:
            value = None  # payloads, and the one number a client chooses freely
        elif field.attname == "capture":
            value = REJECTED_CAPTURE
        elif isinstance(value, str):
            value = safe_text(value).encode("ascii", "backslashreplace").decode("ascii")
            if field.max_length is not None:
                value = value[: field.max_length]
        values.append(value)
    return tuple(values)


_writer_lock = threading.Lock()
_writer_instance: _Writer | None = None


def _writer() -> _Writer:
    """This process's writer, started on first use (and again in a forked child)."""
    global _writer_instance
    if _writer_instance is None:
        with _writer_lock:
            if _writer_instance is None:
                writer = _Writer()
                atexit.register(writer.stop)
                _writer_instance = writer
    return _writer_instance


def _forget_writer() -> None:
    # A forked child (a Celery pool process) has no writer thread: it starts its own. Told by
    # the fork rather than asked of getpid() per request, which is a system call.
    global _writer_instance
    _writer_instance = None


os.register_at_fork(after_in_child=_forget_writer)


# Marks rows of calls made from the admin's try-it page rather than over HTTP by a client.
ADMIN_TEST_HTTP_METHOD = "ADMIN"
ADMIN_TEST_USER_AGENT = "mcphost admin test call"


def record_admin_test_call(
    *,
    tool: Tool,
    arguments: Any,
    result: Mapping[str, Any] | None,
    error_code: int | None,
    error_message: str,
    duration_ms: float,
    version: str,
    user_id: int | None,
) -> None:
    """Queue the record of a ``tools/call`` an operator ran from the admin (try-it).

    It goes through the same writer and capture policy as client calls; ``http_method``
    ``ADMIN`` and the user agent tell it apart, the operator is its principal and no endpoint
    is named (the tool ran outside any endpoint).
    """
    if result is None:
        status, message = Status.PROTOCOL_ERROR, error_message
    elif result.get("isError"):
        status, message = Status.TOOL_ERROR, _first_text(result.get("content"))
    else:
        status, message = Status.OK, ""
    row = {
        "created_at": timezone.now(),
        "duration_ms": round(duration_ms, 3),
        "endpoint_id": None,
        "endpoint_slug": "",
        "era": CallLog.Era.MODERN if version in MODERN_VERSIONS else CallLog.Era.LEGACY,
        "protocol_version": version[:16],
        "session_id": "",
        "http_method": ADMIN_TEST_HTTP_METHOD,
        "http_status": None,
        "message_type": CallLog.MessageType.REQUEST,
        "rpc_method": "tools/call",
        "rpc_id": "",
        "target": tool.name[:512],
        "principal_id": user_id,
        "remote_addr": None,
        "user_agent": ADMIN_TEST_USER_AGENT,
        "status": status,
        "error_code": error_code,
        "error_message": _cut(message),
    }
    # The policy cache is keyed by (endpoint, catalog version, tool); with no endpoint, the
    # tool's last edit stands in for the version, so an edited policy is never served stale.
    edited = int(tool.updated_at.timestamp() * 1_000_000) if tool.updated_at else 0
    pending = PendingCall(
        row=row,
        arguments=arguments,
        result=result,
        tool_pk=tool.pk,
        input_schema=tool.input_schema,
        policy_tag=(0, edited),
    )
    try:
        _writer().put([pending])
    except Exception:
        # As for client calls: a recording bug is logged, the run's answer stands.
        logger.exception("Call log record dropped", extra={"tool": tool.name})


def call_log_flush(*, timeout: float = 10.0) -> bool:
    """Block until this process's queued records are written; False if ``timeout`` passed."""
    return _writer().flush(timeout)


# -- retention ------------------------------------------------------------------------------


def call_log_purge(*, older_than: timedelta, chunk: int = 10_000) -> int:
    """Delete records created more than ``older_than`` ago; return how many.

    Deletes by id range in chunks, so a purge of millions of rows holds no long lock and
    never builds a huge transaction. Ids grow with time, so the scan stops at the newest
    expired id; the date condition still decides each row (a slow request's row is written
    after quicker, younger ones).
    """
    cutoff: datetime = timezone.now() - older_than
    newest = CallLog.objects.filter(created_at__lt=cutoff).aggregate(top=Max("id"))["top"]
    if newest is None:
        return 0
    deleted = 0
    while True:
        ids = list(
            CallLog.objects.filter(id__lte=newest, created_at__lt=cutoff)
            .order_by("id")
            .values_list("id", flat=True)[:chunk]
        )
        if not ids:
            return deleted
        count, _ = CallLog.objects.filter(id__in=ids).delete()
        deleted += count
