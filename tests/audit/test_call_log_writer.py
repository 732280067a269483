"""The call-log writer: what no record can slip past (characters PostgreSQL refuses, records
it rejects, an outage), what a steady state costs, and records of requests refused before
their body was decoded.

The writer is this process's own thread here (records pushed as the recorder would push
them), written to the committed test database; the outage runs a live Daphne whose database
connection goes through a proxy the test cuts and restores.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from mcp_app.models import CallLog, Endpoint
from mcp_app.protocol import jsonrpc
from mcp_app.protocol.errors import InternalError
from mcp_app.services import metrics
from mcp_app.services.calllog import writer as call_log_writer
from mcp_app.services.calllog.recorder import CallRecorder
from mcp_app.services.calllog.writer import WRITER_THREAD, PendingCall, call_log_flush
from tests.audit.conftest import wait_for
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.live import asgi_server, database_url, free_port

FFFD = "\ufffd"


def pending(**row: Any) -> PendingCall:
    """A finished request's record as the recorder queues it."""
    values = {
        "created_at": timezone.now(),
        "duration_ms": 1.0,
        "endpoint_id": None,
        "endpoint_slug": "",
        "era": "modern",
        "protocol_version": "2026-07-28",
        "session_id": "",
        "http_method": "POST",
        "http_status": 200,
        "message_type": "request",
        "rpc_method": "tools/call",
        "rpc_id": "1",
        "target": "echo",
        "principal_id": None,
        "client_id": "",
        "remote_addr": "127.0.0.1",
        "user_agent": f"writer-test-{uuid.uuid4()}",
        "status": "ok",
        "error_code": None,
        "error_message": "",
        "task_id": "",
        "worker": "",
    }
    arguments = row.pop("arguments", None)
    result = row.pop("result", None)
    tool_pk = row.pop("tool_pk", None)
    policy_tag = row.pop("policy_tag", None)
    return PendingCall({**values, **row}, arguments, result, tool_pk, None, policy_tag)


def write(*records: PendingCall) -> list[CallLog]:
    call_log_writer.writer().put(list(records))
    assert call_log_flush(timeout=10)
    agents = [record.row["user_agent"] for record in records]
    rows = {row.user_agent: row for row in CallLog.objects.filter(user_agent__in=agents)}
    return [rows.get(agent) for agent in agents]


@pytest.mark.django_db(transaction=True)
def test_nul_and_lone_surrogates_are_replaced_in_every_field():
    endpoint = make_endpoint("writer-nul")
    tool = make_python_tool("echo", "echo", capture_mode="full")
    endpoint.tools.add(tool)
    endpoint.refresh_from_db()
    tag = (endpoint.pk, endpoint.catalog_version)
    full, default = write(
        pending(
            target="echo\x00",
            rpc_method="tools/call\x00",
            rpc_id='"id\x00"',
            error_message="bad \x00 \ud800",
            arguments={"message": "a\x00b", "k\x00": ["\udfff"]},
            result={"content": [{"type": "text", "text": "a\x00b"}]},
            tool_pk=tool.pk,
            policy_tag=tag,
        ),
        pending(rpc_method="tools/\x00list", arguments={"key\x00": 1}, result={"x": "\x00"}),
    )
    assert full is not None and default is not None
    assert (full.target, full.rpc_method, full.rpc_id) == (
        f"echo{FFFD}",
        f"tools/call{FFFD}",
        f'"id{FFFD}"',
    )
    assert full.error_message == f"bad {FFFD} {FFFD}"
    assert full.capture == "full"
    assert full.arguments == {"message": f"a{FFFD}b", f"k{FFFD}": [FFFD]}
    assert full.result == {"content": [{"type": "text", "text": f"a{FFFD}b"}]}
    assert default.rpc_method == f"tools/{FFFD}list"
    assert default.capture == "metadata"
    assert default.arguments == {f"key{FFFD}": "<number>"}


@pytest.mark.django_db(transaction=True)
def test_a_record_the_database_refuses_is_kept_as_metadata_not_retried():
    # No client value reaches an integer column unchecked today; an out-of-range one stands
    # in for whatever the database may still refuse.
    refused, fine = write(
        pending(error_code=2**40, rpc_method="tools/call", target="t\u00e9", arguments={"a": 1}),
        pending(rpc_method="ping"),
    )
    assert fine is not None and fine.rpc_method == "ping"
    assert refused is not None
    assert refused.capture == call_log_writer.REJECTED_CAPTURE
    assert (refused.rpc_method, refused.target, refused.error_code) == (
        "tools/call",
        "t\\xe9",
        None,
    )
    assert refused.arguments is None
    # Nothing is left to retry: the queue is empty and the writer idle.
    assert call_log_writer.writer().flush(0.1)


def _counted() -> tuple[float, float, float]:
    return tuple(  # type: ignore[return-value]
        counter._value.get()
        for counter in (
            metrics.CALL_LOG_RECEIVED,
            metrics.CALL_LOG_WRITTEN,
            metrics.CALL_LOG_DROPPED,
        )
    )


@pytest.mark.django_db(transaction=True)
def test_the_backlog_is_received_minus_written_minus_dropped():
    received, written, dropped = _counted()

    rows = write(pending(), pending(error_code=2**40), pending(rpc_method="ping"))

    assert all(row is not None for row in rows)  # the refused one reduced to its metadata
    now_received, now_written, now_dropped = _counted()
    assert (now_received - received, now_written - written, now_dropped - dropped) == (3, 3, 0)


class _WriterQueries:
    """Count the SQL the writer thread runs through Django's cursor (COPY bypasses it)."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    @contextlib.contextmanager
    def watch(self) -> Iterator[list[str]]:
        original = CursorWrapper._execute_with_wrappers

        def counting(cursor: CursorWrapper, sql: str, *args: Any, **kwargs: Any) -> Any:
            if threading.current_thread().name == WRITER_THREAD:
                self.statements.append(sql)
            return original(cursor, sql, *args, **kwargs)

        CursorWrapper._execute_with_wrappers = counting  # type: ignore[method-assign]
        try:
            yield self.statements
        finally:
            CursorWrapper._execute_with_wrappers = original  # type: ignore[method-assign]


@pytest.mark.django_db(transaction=True)
def test_steady_state_batches_query_no_policy():
    endpoint = make_endpoint("writer-steady")
    tool = make_python_tool("echo", "echo", capture_mode="full")
    endpoint.tools.add(tool)
    endpoint.refresh_from_db()
    tag = (endpoint.pk, endpoint.catalog_version)
    gone = tool.pk + 1000  # a tool deleted since its call: cached too

    def batch() -> list[CallLog]:
        return write(
            pending(tool_pk=tool.pk, policy_tag=tag, arguments={"message": "hi"}),
            pending(tool_pk=gone, policy_tag=tag, arguments={"message": "hi"}),
            pending(endpoint_slug="no-such-endpoint", http_status=404, status="rejected"),
        )

    with _WriterQueries().watch() as first:
        rows = batch()
    assert [row.capture for row in rows] == ["full", "metadata", ""]
    assert len(first) == 2  # the policies of both tools, the rejected request's slug
    with _WriterQueries().watch() as steady:
        rows = batch()
    assert steady == []
    assert [row.capture for row in rows] == ["full", "metadata", ""]


def _asgi_scope() -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "path": "/mcp/writer-body",
        "url_route": {"kwargs": {"slug": "writer-body"}},
        "client": ("127.0.0.1", 5000),
    }


@pytest.mark.django_db(transaction=True)
def test_a_request_refused_before_decoding_keeps_method_and_id():
    agent = f"writer-test-{uuid.uuid4()}"
    recorder = CallRecorder(_asgi_scope(), {"user-agent": [agent]}, "req-1")
    recorder.request_body(
        b'{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo"}}'
    )
    # As the transport answers when the endpoint lookup fails (database down).
    recorder.refused(InternalError("Internal error"))
    recorder.submit(500)
    assert call_log_flush(timeout=10)
    row = CallLog.objects.get(user_agent=agent)
    assert (row.rpc_method, row.rpc_id, row.target, row.status, row.http_status) == (
        "tools/call",
        "42",
        "echo",
        CallLog.Status.PROTOCOL_ERROR,
        500,
    )


# -- an outage, against a live server ---------------------------------------------------------


class CuttableProxy:
    """A TCP proxy on loopback to one backend; ``cut()`` drops every connection and refuses
    new ones until ``restore()``, as an unreachable database server would."""

    def __init__(self, host: str, port: int) -> None:
        self.backend = (host, port)
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.restore()

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            backend_reader, backend_writer = await asyncio.open_connection(*self.backend)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, backend_writer}
        await asyncio.gather(self._pipe(reader, backend_writer), self._pipe(backend_reader, writer))

    def restore(self) -> None:
        async def start() -> None:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

        self._call(start())

    def cut(self) -> None:
        async def stop() -> None:
            self.cut_now()

        self._call(stop())

    def cut_now(self) -> None:
        """``cut`` from the proxy's own loop."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in self._writers:
            writer.close()
        self._writers.clear()

    def close(self) -> None:
        async def stop() -> None:
            self.cut_now()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self._call(stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


@pytest.fixture
def proxied_server(django_db_blocker: Any) -> Iterator[tuple[str, CuttableProxy, Path]]:
    """A Daphne whose database connections go through a ``CuttableProxy``; yields its
    endpoint URL, the proxy and the server's log file."""
    url = urlsplit(database_url())
    proxy = CuttableProxy(url.hostname or "127.0.0.1", url.port or 5432)
    netloc = url.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{proxy.port}"
    proxied = urlunsplit(url._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) > 1 else host))
    with django_db_blocker.unblock():
        Endpoint.objects.filter(slug="writer-outage").delete()
        make_endpoint("writer-outage")
    try:
        with asgi_server(
            "daphne",
            {"DATABASE_URL": proxied, "MCPHOST_KEEP_SERVER_LOGS": "1"},
        ) as base:
            port = urlsplit(base).port
            log = Path(tempfile.gettempdir()) / f"mcphost-daphne-{port}.log"
            yield f"{base}/mcp/writer-outage", proxy, log
    finally:
        proxy.close()
        with django_db_blocker.unblock():
            Endpoint.objects.filter(slug="writer-outage").delete()
            CallLog.objects.filter(endpoint_slug="writer-outage").delete()


def ping(url: str, agent: str, n: int) -> int:
    body = {"jsonrpc": "2.0", "id": n, "method": "ping"}
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "user-agent": agent,
    }
    return httpx.post(url, json=body, headers=headers, timeout=10).status_code


@pytest.mark.django_db(transaction=True)
def test_an_outage_keeps_the_writer_backoff_and_loses_no_record(proxied_server):
    url, proxy, log = proxied_server
    agent = f"outage-{uuid.uuid4()}"
    assert ping(url, agent, 0) == 400  # refused (no session), but with the database up
    wait_for(lambda: CallLog.objects.filter(user_agent=agent).exists())
    proxy.cut()
    # Each refused request queues a record and wakes the writer; none may shorten its wait.
    # The endpoint is served from the process's memory, so the refusals go on as before.
    statuses = [ping(url, agent, n) for n in range(1, 41)]
    assert set(statuses) == {400}
    proxy.restore()
    wait_for(lambda: CallLog.objects.filter(user_agent=agent).count() == 41, timeout=30)
    assert CallLog.objects.filter(user_agent=agent, http_status=400).count() == 41
    text = log.read_text(errors="replace")
    log.unlink(missing_ok=True)
    # One line when the database went away, one when it came back; no retry logs a traceback.
    assert len(re.findall("Call log database unreachable", text)) == 1, text[-3000:]
    assert len(re.findall("Call log database reachable again", text)) == 1, text[-3000:]
    assert "Call log write failed" not in text


@pytest.mark.django_db(transaction=True)
def test_a_client_response_with_a_huge_error_code_is_recorded_whole():
    agent = f"writer-test-{uuid.uuid4()}"
    recorder = CallRecorder(_asgi_scope(), {"user-agent": [agent]}, "req-2")
    body = b'{"jsonrpc":"2.0","id":3,"error":{"code":1099511627776,"message":"no"}}'
    recorder.received([jsonrpc.decode(body)], modern=False)
    recorder.submit(202)
    assert call_log_flush(timeout=10)
    row = CallLog.objects.get(user_agent=agent)
    assert (row.message_type, row.rpc_id, row.error_code, row.error_message) == (
        "response",
        "3",
        None,
        "no",
    )
    assert row.capture != call_log_writer.REJECTED_CAPTURE


@pytest.mark.django_db(transaction=True)
def test_the_client_is_the_declared_client_info_else_the_user_agent():
    icon = "data:image/png;base64," + "A" * 4000
    declared, unnamed, oversized, odd = (
        pending(),
        pending(user_agent=f"curl/8.5.0 writer-{uuid.uuid4()}"),
        pending(),
        pending(user_agent=f"writer-{uuid.uuid4()}"),
    )
    declared.client_info = {"name": "Claude\x00 Code", "version": "2.1", "title": "Claude"}
    oversized.client_info = {"name": "big", "version": "1", "icons": [{"src": icon}]}
    odd.client_info = "not an object"
    rows = write(declared, unnamed, oversized, odd)
    assert all(row is not None for row in rows)
    named, by_agent, big, not_object = rows
    assert (named.client_name, named.client_version) == (f"Claude{FFFD} Code", "2.1")
    assert named.client_info == {"name": f"Claude{FFFD} Code", "version": "2.1", "title": "Claude"}
    assert (by_agent.client_name, by_agent.client_version) == ("curl", "8.5.0")
    assert by_agent.client_info is None and by_agent.client_from_user_agent
    assert big.client_info == {"name": "big", "version": "1", "truncated": True}
    # A client_info that is no object declares nothing: the User-Agent names the client.
    assert not_object.client_name.startswith("writer-") and not_object.client_info is None
