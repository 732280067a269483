"""The call-log recorder: what one HTTP request to an MCP endpoint did, one record per message.

The transport creates one ``CallRecorder`` per request and tells it what it learns: the
endpoint, the decoded messages, the session, each request's ``dispatch.Reply``, and the
refusal when the transport answered an HTTP-level error itself. When the request's work ends
the transport calls ``submit()`` with the response status, which hands the recorder itself to
the writer thread (``writer.py``) and returns at once: the rows are built and counted there
(``build()``), and a request costs no query of its own.
Recording never raises into the transport: a failure is logged, never answered.

Also here: ``record_admin_test_call``, the record of a try-it run from the admin.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing.util
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
from django.utils import timezone

from mcp_app.models import CallLog, Tool
from mcp_app.protocol import jsonrpc
from mcp_app.protocol.catalog import CatalogItem, CatalogSnapshot, ToolDef
from mcp_app.protocol.context import LegacySession
from mcp_app.protocol.dispatch import Reply
from mcp_app.protocol.errors import McpError
from mcp_app.protocol.inbound import CLIENT_INFO_KEY, Resolved
from mcp_app.protocol.jsonrpc import Notification, Request, Response
from mcp_app.protocol.methods import target_of
from mcp_app.protocol.results import Outcome
from mcp_app.protocol.uritemplate import TemplateCache, match
from mcp_app.protocol.versions import MODERN_VERSIONS, Era
from mcp_app.services import metrics
from mcp_app.services.calllog.capture import MIN_SCRUB_CHARS
from mcp_app.services.calllog.writer import PendingCall, call_log_drain, writer
from mcp_app.services.endpoint_directory import EndpointState

logger = logging.getLogger(__name__)

ERROR_MESSAGE_CHARS = 1000
USER_AGENT_CHARS = 512
# Whose params.arguments are the call's arguments; other requests keep their params whole.
_ARGUMENT_METHODS = frozenset({"tools/call", "prompts/get"})
# The resource templates this process's call log matches read URIs against, parsed once.
_templates = TemplateCache()


class _Entry:
    """What is known about one JSON-RPC message (or about a request that carried none).

    A plain class whose defaults are class attributes (all immutable): a new entry sets
    nothing until a note does, where a dataclass's ``__init__`` would set all 20 fields.
    """

    message_type: str = ""
    rpc_method: str = ""
    rpc_id: str = ""
    target: str = ""
    # The tool, prompt, resource or template the request names, as inbound classification
    # found it (None: looked up for the row).
    item: CatalogItem | None = None
    # The era the transport served it in, once dispatched ("" until then).
    era: str = ""
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
    # The clientInfo this message declared: a 2026-07-28 request's _meta, an initialize's
    # params (the writer reads name and version from it, off the request's path).
    client_info: Any = None
    # What the endpoint's policies decided (services/policies), as the call log keeps it.
    policy_decisions: Any = None
    # The rate limit that refused the call (outcome rate_limited).
    rate_limit: int | None = None


def _json_id(value: Any) -> str:
    if value is None:
        return ""
    try:
        return orjson.dumps(value).decode()[:200]
    except orjson.JSONEncodeError:  # a lone surrogate: the writer's safe_text replaces it
        return str(value)[:200]


def _json_text(value: Any) -> str | None:
    # The writer passes JSON columns through as text (writer._JSON_INDEXES).
    return None if value is None else orjson.dumps(value).decode()


def _cut(text: str, limit: int = ERROR_MESSAGE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


_MODERN, _LEGACY = Era.MODERN.value, Era.LEGACY.value
# Read once: an enum member looked up on its class costs a descriptor call each time.
_REQUEST = CallLog.MessageType.REQUEST
_NOTIFICATION = CallLog.MessageType.NOTIFICATION
_RESPONSE = CallLog.MessageType.RESPONSE
# Outcomes of a tools/call whose error result's text is the row's error message.
_ERROR_RESULTS = (
    Outcome.TOOL_ERROR,
    Outcome.TIMED_OUT,
    Outcome.UPSTREAM_ERROR,
    Outcome.RATE_LIMITED,
)


def _era(version: str) -> str:
    return _MODERN if version in MODERN_VERSIONS else _LEGACY


class CallRecorder:
    """Collects what one HTTP request to an MCP endpoint did; ``submit()`` queues its records.

    Every method is cheap and never raises for odd input: the transport calls them on the hot
    path, and recording must never turn a served request into an error.
    """

    def __init__(
        self, scope: Mapping[str, Any], headers: Mapping[str, Sequence[str]], request_id: str
    ) -> None:
        # When the request arrived: a plain float here, its datetime made on the writer thread.
        self._created_at = time.time()
        self._t0 = time.monotonic()
        self._http_method = str(scope.get("method", ""))[:8]
        route = scope.get("url_route") or {}
        self._slug = str(route.get("kwargs", {}).get("slug", ""))[:100]
        client = scope.get("client")
        self._remote_addr = client[0] if client else None
        # Read on the writer thread (the user agent, the credentials to scrub, and the session
        # and version headers unless ``session()`` names them): the transport never changes it.
        self._headers = headers
        self._session_id: str | None = None
        self._version: str | None = None
        self._request_id = request_id
        self._era = ""
        self._endpoint_id: int | None = None
        self._snapshot: CatalogSnapshot | None = None
        self._policy_tag: tuple[int, int] | None = None
        self._entries: list[_Entry] = []
        self._by_message: dict[int, _Entry] = {}
        self._refusal: tuple[int | None, str] = (None, "")
        # Why the server cancelled the request, for the rows of calls it cut short.
        self._interruption = ""
        self._submitted = False
        self._principal_id: int | None = None
        self._client_id = ""
        # The clientInfo the legacy session was opened with (no query: the session is loaded).
        self._session_client_info: Any = None
        self._body: bytes | None = None
        # When submitted: (monotonic time, the response's status, whether cancelled).
        self._ended: tuple[float, int | None, bool] = (0.0, None, False)

    def endpoint(self, state: EndpointState | None) -> None:
        # Every note after submit() is ignored: the writer thread reads what it froze.
        if state is not None and not self._submitted:
            self._endpoint_id = state.id
            self._snapshot = state.snapshot
            self._policy_tag = (state.id, state.catalog_version)

    def request_body(self, body: bytes) -> None:
        """Note the request's whole body; it is decoded only if the request ends undecoded.

        A request refused after its body arrived but before the transport decoded it (a 500
        while the database is down, a 415) is then still recorded with its method and id.
        """
        self._body = body
        # From here on the request runs until it submits (the transport makes sure it does).
        if not self._submitted:
            _unsubmitted.add(self)

    def received(
        self,
        messages: Iterable[Any],
        *,
        modern: bool,
        resolved: Resolved | None = None,
        batch: Mapping[int, Resolved] | None = None,
    ) -> None:
        """Note the decoded message(s) of a POST: one record each.

        ``resolved`` is a single request as inbound classification resolved it, ``batch``
        a batch's requests so resolved, by ``id()`` of the request: targets are taken from
        there.
        """
        if self._submitted:
            return
        self._era = _MODERN if modern else _LEGACY
        self._note(messages, resolved, batch)

    def _note(
        self,
        messages: Iterable[Any],
        resolved: Resolved | None = None,
        batch: Mapping[int, Resolved] | None = None,
    ) -> None:
        for message in messages:
            if batch is not None:
                resolved = batch.get(id(message))
            entry = _Entry()
            if isinstance(message, (Request, Notification)):
                entry.message_type = _REQUEST if isinstance(message, Request) else _NOTIFICATION
                entry.rpc_method = message.method[:128]
                params = message.params
                if type(params) is not dict and not isinstance(params, Mapping):
                    params = {}
                if resolved is not None and resolved.request is message:
                    entry.target = (resolved.target or "")[:512]
                    entry.item = resolved.item
                else:
                    entry.target = (target_of(message.method, params) or "")[:512]
                if message.method in _ARGUMENT_METHODS:
                    entry.arguments = params.get("arguments")
                elif params:
                    entry.arguments = {k: v for k, v in params.items() if k != "_meta"} or None
                entry.client_info = _declared_client(message.method, params)
                if isinstance(message, Request):
                    entry.rpc_id = _json_id(message.id)
            elif isinstance(message, Response):
                entry.message_type = _RESPONSE
                entry.rpc_id = _json_id(message.id)
                if message.error is not None:
                    entry.error_code, entry.error_message = _error_fields(message.error)
            self._entries.append(entry)
            self._by_message[id(message)] = entry

    def principal(self, user_id: int | None, client_id: str) -> None:
        """Note who called (an OAuth user and client); anonymous requests never call this."""
        if self._submitted:
            return
        self._principal_id = user_id
        self._client_id = client_id[:200]

    def session(self, session: LegacySession) -> None:
        if self._submitted:
            return
        self._session_id = session.id[:64]
        self._version = session.protocol_version
        self._era = _LEGACY
        self._session_client_info = session.client_info or None

    def dispatched(self, resolved: Resolved, version: str) -> None:
        entry = self._by_message.get(id(resolved.request))
        if entry is not None and not self._submitted:
            entry.version = version
            entry.era = _MODERN if resolved.era is Era.MODERN else _LEGACY
            entry.dispatched = True
            entry.started = time.monotonic()

    def answered(self, request: Request, reply: Reply) -> None:
        """Record the reply to ``request``: how it ended, its result or error, where it ran."""
        entry = self._by_message.get(id(request))
        if entry is None or self._submitted:
            return
        entry.finished = time.monotonic()
        entry.status = reply.outcome
        if reply.target is not None:
            entry.target = reply.target[:512]
        if reply.detail:
            entry.task_id = str(reply.detail.get("task_id") or "")[:64]
            entry.worker = str(reply.detail.get("worker") or "")[:200]
            limit = reply.detail.get("rate_limit")
            entry.rate_limit = limit if isinstance(limit, int) else None
        if reply.decisions:
            entry.policy_decisions = list(reply.decisions)
        if reply.logged_arguments is not None:
            entry.arguments = reply.logged_arguments  # a policy masked them for the log
        if reply.error is not None:
            entry.error_code = _code(reply.error.code)
            entry.error_message = _cut(reply.error.message)
            return
        entry.result = reply.result
        if reply.outcome in _ERROR_RESULTS and isinstance(entry.result, Mapping):
            entry.error_message = _cut(_first_text(entry.result.get("content")))

    def refused(self, error: McpError) -> None:
        """Note the error the transport answered itself (an HTTP 4xx/5xx, not a reply).

        Records of messages that got no reply of their own carry it.
        """
        if self._submitted:
            return
        self._refusal = (_code(error.code), _cut(error.message))

    def interrupted(self, http_status: int | None, reason: str) -> None:
        """Submit now: the server cancelled the request (its shutdown), with ``reason``.

        Calls still running are recorded as cancelled, carrying ``reason``: the process may
        not live to see them end.
        """
        if self._submitted:
            return
        self._interruption = _cut(reason)
        self.submit(http_status, cancelled=True)

    def submit(self, http_status: int | None, *, cancelled: bool = False) -> None:
        """Queue this request's records for the writer; only the first call counts.

        ``http_status`` is the response's status, None when none was sent. What the request
        did is handed over as it stands (its ``_Entry`` notes, frozen from here on: every
        later note is ignored); the writer thread builds the rows and counts them
        (``build``), off the event loop.
        """
        if self._submitted:
            return
        self._submitted = True
        _unsubmitted.discard(self)
        try:
            self._ended = (time.monotonic(), http_status, cancelled)
            if not self._entries:
                if self._body:
                    self._note_undecoded_body()
                if not self._entries:
                    self._entries.append(_Entry())
            writer().put_later(self, len(self._entries))
        except Exception:
            # The boundary between serving and recording: a recording bug is logged, the
            # served answer stands.
            logger.exception("Call log record dropped", extra={"endpoint": self._slug})

    def build(self) -> list[PendingCall]:
        """The records of a submitted request, counted in the metrics (the writer thread).

        Reads only what ``submit`` froze: the loop no longer changes this recorder.
        """
        records = self._records()
        try:
            # The one place MCP traffic is counted (services/metrics.py).
            metrics.record_calls((record.row, record.tool_pk is not None) for record in records)
        except Exception:
            logger.exception("Call log records not counted", extra={"endpoint": self._slug})
        return records

    def _records(self) -> list[PendingCall]:
        now, http_status, cancelled = self._ended
        request_ms = (now - self._t0) * 1000
        headers = self._headers
        session_id = self._session_id
        if session_id is None:
            session_id = _header(headers, "mcp-session-id")[:64]
        session_version = self._version
        if session_version is None:
            session_version = _header(headers, "mcp-protocol-version")[:16]
        user_agent = _cut(_utf8(_header(headers, "user-agent")), USER_AGENT_CHARS)
        credentials = _credentials(headers)
        created_at = datetime.fromtimestamp(self._created_at, UTC)
        records = []
        for entry in self._entries:
            status, code, message = entry.status, entry.error_code, entry.error_message
            if not status:
                if cancelled and entry.dispatched or http_status is None:
                    status = Outcome.CANCELLED
                    message = message or self._interruption
                elif http_status < 400:
                    status = Outcome.OK
                else:
                    status = Outcome.PROTOCOL_ERROR if http_status >= 500 else Outcome.REJECTED
                    if code is None and not message:
                        code, message = self._refusal
            if entry.started is not None:
                duration = ((entry.finished or now) - entry.started) * 1000
            else:
                duration = request_ms
            version = entry.version or session_version
            era = entry.era or (_era(version) if version else self._era)
            item = entry.item
            tool = item if type(item) is ToolDef else None
            if tool is None and entry.rpc_method == "tools/call" and self._snapshot is not None:
                tool = self._snapshot.tool(entry.target)
            records.append(
                PendingCall(
                    row={
                        "created_at": created_at,
                        "duration_ms": round(duration, 3),
                        "endpoint_id": self._endpoint_id,
                        "endpoint_slug": self._slug,
                        "era": era,
                        "protocol_version": version[:16],
                        "session_id": session_id,
                        "http_method": self._http_method,
                        "http_status": http_status,
                        "message_type": entry.message_type,
                        "rpc_method": entry.rpc_method,
                        "rpc_id": entry.rpc_id,
                        "target": entry.target,
                        "principal_id": self._principal_id,
                        "client_id": self._client_id,
                        "remote_addr": self._remote_addr,
                        "user_agent": user_agent,
                        "status": str(status),
                        "error_code": code,
                        "error_message": _cut(message),
                        "upstream": _upstream_of(self._snapshot, entry, tool),
                        "task_id": entry.task_id,
                        "worker": entry.worker,
                        "rate_limit_id": entry.rate_limit,
                        "request_id": self._request_id,
                        # The definitions that answered (services/history.py).
                        "catalog_version": self._policy_tag[1] if self._policy_tag else None,
                        "tool_history_id": tool.binding.history_id if tool is not None else None,
                        "policy_decisions": _json_text(entry.policy_decisions),
                    },
                    arguments=entry.arguments,
                    result=entry.result,
                    tool_pk=tool.binding.pk if tool is not None else None,
                    input_schema=tool.input_schema if tool is not None else None,
                    policy_tag=self._policy_tag,
                    secrets=credentials,
                    client_info=(
                        entry.client_info
                        if entry.client_info is not None
                        else self._session_client_info
                    ),
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


# The requests of this process whose records are not queued yet. As the server stops, those
# still running are recorded as cut short: a server's shutdown may close the event loop without
# resuming the requests it cancelled, and their records would be lost with the process. Held
# strongly: a request's frames may be gone by then. Every request submits once, which removes it.
_unsubmitted: set[CallRecorder] = set()
INTERRUPTED = "The server shut down before the call ended."


def record_cut_short() -> None:
    """Queue the records of every request still running, as cancelled by the shutdown.

    Quick (no I/O): a server's shutdown hook calls it on the event loop's thread, before it
    cancels the requests, so that they are recorded with ``INTERRUPTED`` as their reason.
    """
    for recorder in list(_unsubmitted):
        recorder.interrupted(None, INTERRUPTED)


def submit_cut_short() -> None:
    """Record every request still running as cancelled by the shutdown; write the queue.

    The writer's exit flush (``call_log_drain``) is bounded, and shared with every other exit
    hook of the process.
    """
    record_cut_short()
    call_log_drain()


# The last chance when the server ran no shutdown hook of ours. Registered after the writer's
# own handler (this module imports it), so it runs before the writer's thread is stopped.
atexit.register(submit_cut_short)
# A multiprocessing child (uvicorn --workers) leaves with os._exit, which skips atexit but
# runs these finalizers first.
multiprocessing.util.Finalize(None, submit_cut_short, exitpriority=20)


def _header(headers: Mapping[str, Sequence[str]], name: str) -> str:
    values = headers.get(name)
    return values[0] if values else ""


def _utf8(text: str) -> str:
    """A header value read as UTF-8, as clients send non-ASCII text (RFC 9110 allows any
    octets; the transport decodes them as Latin-1, one character per byte, losslessly)."""
    if text.isascii():
        return text
    try:
        return text.encode("latin-1").decode("utf-8")
    except UnicodeError:  # not UTF-8 (or not from bytes): Latin-1 is the best reading
        return text


def _credentials(headers: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """The credentials of the request's Authorization header(s): scrubbed from its payloads
    wherever they appear, since a caller's own token is a secret under any key or none."""
    found = []
    for value in headers.get("authorization") or ():
        scheme, _, credentials = value.strip().partition(" ")
        if len(credentials := credentials.strip() or scheme) >= MIN_SCRUB_CHARS:
            found.append(credentials)
    return tuple(found)


def _code(code: Any) -> int | None:
    # The column is a 32-bit integer: a larger code (a client's own response) is not kept,
    # rather than having the database refuse the whole record.
    if isinstance(code, int) and not isinstance(code, bool) and -(2**31) <= code < 2**31:
        return code
    return None


def _error_fields(error: Any) -> tuple[int | None, str]:
    """Code and message of a JSON-RPC error object a client sent (any shape)."""
    if not isinstance(error, Mapping):
        return None, ""
    message = error.get("message")
    return _code(error.get("code")), _cut(message) if isinstance(message, str) else ""


def _upstream_of(snapshot: CatalogSnapshot | None, entry: _Entry, tool: ToolDef | None) -> str:
    """The upstream MCP server the request was relayed to, by name; "" when none.

    Read from the definitions that served it: an MCP upstream tool, a resource, prompt or
    resource template read from an upstream (for a URI no resource has, the first template it
    matches, as ``resources/read`` tries them), a completion of one of those.
    """
    if snapshot is None:
        return ""
    method, key = entry.rpc_method, None
    if tool is not None:
        if tool.binding.kind == Tool.Kind.MCP_UPSTREAM:
            return str(tool.binding.config.get("upstream") or "")[:128]
        return ""
    item = entry.item
    if item is not None and method in ("resources/read", "prompts/get"):
        key = item.binding  # as inbound classification found it
    elif method == "resources/read":
        resource = snapshot.resource(entry.target)
        key = resource.binding if resource is not None else _template_key(snapshot, entry.target)
    elif method == "prompts/get":
        prompt = snapshot.prompt(entry.target)
        key = prompt.binding if prompt is not None else None
    elif method == "completion/complete" and isinstance(entry.arguments, Mapping):
        ref = entry.arguments.get("ref")
        ref = ref if isinstance(ref, Mapping) else {}
        if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
            prompt = snapshot.prompt(ref["name"])
            key = prompt.binding if prompt is not None else None
        elif ref.get("type") == "ref/resource" and isinstance(ref.get("uri"), str):
            key = next(
                (t.binding for t in snapshot.resource_templates if t.uri_template == ref["uri"]),
                None,
            )
    upstream = getattr(key, "upstream", None)
    return upstream[:128] if isinstance(upstream, str) else ""


def _template_key(snapshot: CatalogSnapshot, uri: str) -> Any:
    for template in snapshot.resource_templates:
        try:
            if match(template.uri_template, uri, _templates) is not None:
                return template.binding
        except ValueError:
            continue
    return None


def _declared_client(method: str, params: Mapping[str, Any]) -> Any:
    """The clientInfo a message declares: ``params._meta`` (2026-07-28, every request) or an
    initialize's ``params.clientInfo``; None when it declares none. Read as sent: the writer
    keeps only a mapping's name and version."""
    meta = params.get("_meta")
    if meta is not None and isinstance(meta, Mapping) and CLIENT_INFO_KEY in meta:
        return meta[CLIENT_INFO_KEY]
    if method == "initialize":
        return params.get("clientInfo")
    return None


def _first_text(content: Any) -> str:
    if isinstance(content, list):
        for block in content:
            text = block.get("text") if isinstance(block, Mapping) else None
            if isinstance(text, str):
                return text
    return ""


# -- try-it ---------------------------------------------------------------------------------

# Marks rows of calls made from the admin's try-it page rather than over HTTP by a client.
ADMIN_TEST_HTTP_METHOD = "ADMIN"
ADMIN_TEST_USER_AGENT = "mcphost admin test call"
# The client a try-it run declares (services/try_it.py runs the tool as this client).
TRY_IT_CLIENT_INFO = {"name": "mcphost admin try-it"}


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
    is named (the tool ran outside any endpoint); the tool's team is, so its members see the
    run (``services/teams.py``).
    """
    if result is None:
        status, message = Outcome.PROTOCOL_ERROR, error_message
    elif result.get("isError"):
        status, message = Outcome.TOOL_ERROR, _first_text(result.get("content"))
    else:
        status, message = Outcome.OK, ""
    row = {
        "created_at": timezone.now(),
        "duration_ms": round(duration_ms, 3),
        "endpoint_id": None,
        "endpoint_slug": "",
        "tool_team_id": tool.team_id,
        "era": _era(version),
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
        "status": str(status),
        "error_code": error_code,
        "error_message": _cut(message),
        "upstream": str(tool.config.get("upstream") or "")[:128]
        if tool.kind == Tool.Kind.MCP_UPSTREAM
        else "",
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
        client_info=TRY_IT_CLIENT_INFO,
    )
    try:
        writer().put([pending])
    except Exception:
        # As for client calls: a recording bug is logged, the run's answer stands.
        logger.exception("Call log record dropped", extra={"tool": tool.name})
