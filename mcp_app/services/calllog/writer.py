"""The call-log writer: one thread per process turning queued records into batched writes.

Records are queued by the recorder (``recorder.py``: a request's notes, which this thread
builds into records and counts) and by try-it; the writer applies each tool's capture policy
(``capture.py``) off the request path and writes a batch as one COPY (PostgreSQL) or one
executemany INSERT (SQLite), holding records through a database outage.
"""

from __future__ import annotations

import atexit
import collections
import logging
import multiprocessing.util
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from django.db import (
    DatabaseError,
    InterfaceError,
    OperationalError,
    connections,
    router,
    transaction,
)

from mcp_app.models import CallLog, Endpoint, Tool
from mcp_app.services import metrics
from mcp_app.services.calllog.capture import (
    CapturePolicy,
    capture_call,
    json_text,
    parse_redact_names,
    safe_json,
    safe_text,
    scrub,
    secret_fields_of_schema,
)

logger = logging.getLogger(__name__)
# The thread that writes the call log; it serves no request (bench/run.py measures its cost).
WRITER_THREAD = "mcp-call-log"

# The writer: rows per write, how long a batch waits to fill, rows held while the database
# is unreachable, retry pacing, how long a slug's endpoint id is trusted.
BATCH_ROWS = 1000
COALESCE_SECONDS = 0.02
MAX_PENDING = 100_000
RETRY_FIRST_SECONDS = 0.5
RETRY_MAX_SECONDS = 10.0
EXIT_FLUSH_SECONDS = 5.0
SLUG_CACHE_SECONDS = 60.0


@dataclass(slots=True)
class PendingCall:
    """A finished request's record, waiting for the writer thread (policy not yet applied)."""

    row: dict[str, Any]
    arguments: Any
    result: Any
    tool_pk: int | None
    input_schema: Any
    policy_tag: tuple[int, int] | None
    # The caller's own credentials (its bearer token), scrubbed from every stored payload.
    secrets: tuple[str, ...] = ()
    # The clientInfo the request declared, as sent (None: none; the User-Agent stands in).
    client_info: Any = None


class Deferred(Protocol):
    """A finished request whose records the writer thread builds (the recorder, frozen)."""

    def build(self) -> list[PendingCall]: ...


# A queued item: a record, or a request's records still to build and how many they are.
Queued = PendingCall | tuple[Deferred, int]


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
_COLUMNS = tuple(field.get_attname_column()[1] or field.name for field in _FIELDS)
# The value of each column a record does not name (an admin test call names no client).
_ROW_DEFAULTS = tuple(_BY_ATTNAME[name].get_default() for name in _ROW_KEYS)
_JSON_INDEXES = frozenset(
    i
    for i, field in enumerate(_FIELDS)
    if field.attname in {"arguments", "result", "progress", "client_info", "policy_decisions"}
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
    the queue is flushed for up to ``EXIT_FLUSH_SECONDS`` (``drain``), however many of the
    process's exit hooks ask for it, and then the thread ends (``stop``).
    """

    def __init__(self) -> None:
        self._queue: collections.deque[Queued] = collections.deque()
        # The records in the queue (a deferred item counts as its records).
        self._queued = 0
        self._cond = threading.Condition()
        self._busy = False
        self._idle = False
        self._stopping = False
        # When the process's exit flushes give up waiting (set by the first drain()).
        self._exit_deadline: float | None = None
        self.dropped = 0
        self._dropping = False
        self._down_since: float | None = None
        self._policies: dict[tuple[int, int, int], tuple[CapturePolicy, frozenset[str]]] = {}
        self._slugs: dict[str, tuple[float, int | None]] = {}
        self._thread = threading.Thread(target=self._run, name=WRITER_THREAD, daemon=True)
        self._thread.start()

    def put(self, records: Sequence[PendingCall]) -> None:
        metrics.CALL_LOG_RECEIVED.inc(len(records))
        self._enqueue(records)

    def put_later(self, deferred: Deferred, records: int) -> None:
        """Queue a request's ``records`` records, built on the writer thread (``build()``).

        The event loop only hands the request over; the rows, their capture and their
        counting in the metrics all happen on this thread. When the queue has no room for
        all of them (an outage), they are built here and as many kept as fit, as ``put``.
        """
        metrics.CALL_LOG_RECEIVED.inc(records)
        with self._cond:
            if MAX_PENDING - self._queued >= records:
                self._queue.append((deferred, records))
                self._queued += records
                if self._idle or self._queued >= BATCH_ROWS:
                    self._cond.notify_all()
                return
        try:
            built = deferred.build()
        except Exception:
            logger.exception("Call log record dropped")
            metrics.CALL_LOG_DROPPED.inc(records)
            return
        self._enqueue(built)

    def _enqueue(self, records: Sequence[PendingCall]) -> None:
        with self._cond:
            room = MAX_PENDING - self._queued
            if room < len(records):
                self.dropped += len(records) - max(room, 0)
                metrics.CALL_LOG_DROPPED.inc(len(records) - max(room, 0))
                if not self._dropping:
                    # Once per episode: a full queue during an outage would log per request.
                    self._dropping = True
                    logger.error("Call log queue full: records are being dropped")
                records = records[: max(room, 0)]
            self._queue.extend(records)
            self._queued += len(records)
            # Wake the writer only when it waits for work or a batch is full: a notify per
            # request would cost a thread switch per request. All waiters, since a flush()
            # may be waiting too and must not take the writer's wake-up.
            if self._idle or self._queued >= BATCH_ROWS:
                self._cond.notify_all()

    def flush(self, timeout: float) -> bool:
        """Wait until every queued record is written; False if ``timeout`` passed first.

        False at once when the thread is stopped: nothing would write what is queued.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stopping or not self._thread.is_alive():
                    return False
                self._cond.wait(remaining)
        return True

    def drain(self) -> bool:
        """Flush as the process exits; False if the records could not all be written.

        The server's shutdown hook, ``atexit`` and a worker process's finalizers may each ask:
        together they wait at most ``EXIT_FLUSH_SECONDS`` (a database outage at exit costs
        that once, not once per hook).
        """
        with self._cond:
            if self._exit_deadline is None:
                self._exit_deadline = time.monotonic() + EXIT_FLUSH_SECONDS
            deadline = self._exit_deadline
        return self.flush(deadline - time.monotonic())

    def stop(self) -> None:
        """Drain the queue, then end the thread (records queued after this are not written)."""
        self.drain()
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    def _run(self) -> None:
        delay = RETRY_FIRST_SECONDS
        batch: list[PendingCall] = []
        rows: list[Row] = []
        while True:
            if not rows:
                items = self._next_batch()
                if not items:
                    return
                batch = self._built(items)
                if not batch:
                    self._done()
                    continue
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
                        self._queued += len(batch)
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
            self._done()

    def _done(self) -> None:
        with self._cond:
            self._busy = False
            self._dropping = False
            self._cond.notify_all()

    @staticmethod
    def _built(items: Sequence[Queued]) -> list[PendingCall]:
        """The records of ``items``: deferred requests built here, off the event loop."""
        batch: list[PendingCall] = []
        for item in items:
            if isinstance(item, PendingCall):
                batch.append(item)
                continue
            deferred, records = item
            try:
                batch.extend(deferred.build())
            except Exception:
                # A recording bug is logged and its records counted as dropped.
                logger.exception("Call log record dropped")
                metrics.CALL_LOG_DROPPED.inc(records)
        return batch

    def _next_batch(self) -> list[Queued]:
        """Wait for records, then up to ``COALESCE_SECONDS`` for a full batch; [] to stop."""
        with self._cond:
            self._idle = True
            while not self._queue and not self._stopping:
                self._cond.wait()
            self._idle = False
            deadline = time.monotonic() + COALESCE_SECONDS
            while self._queued < BATCH_ROWS and not self._stopping:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            if self._stopping:
                return []
            self._busy = True
            batch: list[Queued] = []
            taken = 0
            while self._queue and taken < BATCH_ROWS:
                item = self._queue.popleft()
                batch.append(item)
                taken += 1 if isinstance(item, PendingCall) else item[1]
            self._queued -= taken
            metrics.CALL_LOG_QUEUE.set(self._queued)
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
                _client_columns(pending)
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
            metrics.CALL_LOG_WRITTEN.inc(len(rows))
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
                metrics.CALL_LOG_WRITTEN.inc()
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
            metrics.CALL_LOG_WRITTEN.inc()
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
        secrets = pending.secrets
        if secrets:
            _scrub_row(pending)
        try:
            arguments, result = capture_call(
                pending.arguments, pending.result, policy, secret_fields, secrets
            )
        except orjson.JSONEncodeError:  # a lone surrogate, which no JSON text can carry
            arguments, result = capture_call(
                safe_json(pending.arguments),
                safe_json(pending.result),
                policy,
                secret_fields,
                secrets,
            )
        captured = arguments.size is not None or result.size is not None
        return (
            *self._bare_values(pending),
            policy.mode if captured else "",
            json_text(arguments.value),
            json_text(result.value),
            arguments.size,
            result.size,
            arguments.truncated or result.truncated,
            None,
        )

    @staticmethod
    def _bare_values(pending: PendingCall) -> list[Any]:
        # One pass in C for the lookups (map calls row.get(key, default) per column).
        return [
            safe_text(value) if type(value) is str else value
            for value in map(pending.row.get, _ROW_KEYS, _ROW_DEFAULTS)
        ]

    def _bare_row(self, pending: PendingCall) -> Row:
        if pending.secrets:
            _scrub_row(pending)
        return (*self._bare_values(pending), "", None, None, None, None, False, None)


# A declared clientInfo is kept whole up to this size; past it, only its short strings.
CLIENT_INFO_BYTES = 2048
_CLIENT_NAME_CHARS = _BY_ATTNAME["client_name"].max_length or 200
_CLIENT_VERSION_CHARS = _BY_ATTNAME["client_version"].max_length or 100


def _client_columns(pending: PendingCall) -> None:
    """Fill the client columns: from the declared clientInfo, else the User-Agent.

    The declaration is kept as sent (its title, description, website...), unless it is
    larger than ``CLIENT_INFO_BYTES`` (icons as data URIs): then only its strings of up to
    200 characters, marked ``"truncated": true``.
    """
    row, info = pending.row, pending.client_info
    if isinstance(info, Mapping) and info:
        name, version = info.get("name"), info.get("version")
        row["client_name"] = name[:_CLIENT_NAME_CHARS] if isinstance(name, str) else ""
        row["client_version"] = version[:_CLIENT_VERSION_CHARS] if isinstance(version, str) else ""
        text = json_text(info)
        if text is not None and len(text) > CLIENT_INFO_BYTES:
            short = {k: v for k, v in info.items() if isinstance(v, str) and len(v) <= 200}
            text = json_text({**short, "truncated": True})
        row["client_info"] = text
        return
    row["client_name"], row["client_version"] = user_agent_product(row.get("user_agent") or "")
    row["client_info"] = None


def user_agent_product(user_agent: str) -> tuple[str, str]:
    """The first product token of a User-Agent (RFC 9110 10.1.5) as (name, version)."""
    token = user_agent.strip().split(" ", 1)[0]
    name, _, version = token.partition("/")
    return name[:_CLIENT_NAME_CHARS], version[:_CLIENT_VERSION_CHARS]


def _scrub_row(pending: PendingCall) -> None:
    # The columns a client's text reaches besides the payloads: an error naming what it sent.
    for key in ("error_message", "target"):
        if value := pending.row.get(key):
            pending.row[key] = scrub(value, pending.secrets)


def _reduced(row: Row) -> Row:
    """The metadata of a refused row: no payloads, every string ASCII-escaped, and a marker."""
    values = []
    for field, value in zip(_FIELDS, row, strict=True):
        if field.attname in {
            "arguments",
            "result",
            "progress",
            "client_info",
            "error_code",
            "policy_decisions",
        }:
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


def writer() -> _Writer:
    """This process's writer, started on first use (and again in a forked child)."""
    global _writer_instance
    if _writer_instance is None:
        with _writer_lock:
            if _writer_instance is None:
                writer = _Writer()
                # A multiprocessing child (uvicorn --workers) leaves with os._exit, which
                # skips atexit but runs these finalizers: its queued rows are written too.
                # Priority 10: after the recorder's (20), which queues the rows of the
                # requests cut short.
                multiprocessing.util.Finalize(writer, writer.stop, exitpriority=10)
                _writer_instance = writer
    return _writer_instance


def _stop_at_exit() -> None:
    if _writer_instance is not None:
        _writer_instance.stop()


# Registered when this module is imported, not when the thread starts: atexit runs its
# handlers last registered first, and the recorder's (which queues the rows of the requests
# cut short) must run before the thread is stopped. The recorder imports this module, so its
# handler is registered later and runs first.
atexit.register(_stop_at_exit)


def _forget_writer() -> None:
    # A forked child (a Celery pool process) has no writer thread: it starts its own. Told by
    # the fork rather than asked of getpid() per request, which is a system call.
    global _writer_instance
    _writer_instance = None


os.register_at_fork(after_in_child=_forget_writer)


def call_log_flush(*, timeout: float = 10.0) -> bool:
    """Block until this process's queued records are written; False if ``timeout`` passed."""
    return writer().flush(timeout)


def call_log_drain() -> bool:
    """Block until this process's queued records are written, as it exits (``_Writer.drain``).

    Starts no writer: a process that never had one has nothing to write.
    """
    return _writer_instance.drain() if _writer_instance is not None else True
