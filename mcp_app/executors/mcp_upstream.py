"""The ``mcp_upstream`` tool kind: a tool of another MCP server, called over Streamable HTTP.

Config (as the operator stores it on the tool)::

    {
      "upstream": "search-server",   name of an Upstream row
      "tool": "web_search"           the tool's name on the upstream (default: our tool's name)
    }

Before a call ``resolve`` asks the services (``Resolvers.upstream``) for the upstream as an
``UpstreamTarget`` (URL, credential headers, timeouts, allow-list, a hook reporting how the
call went): this module never reads rows. It speaks the client side of Streamable HTTP
itself, over httpx, because it needs what a generic client session hides: sessions per
upstream and caller (``RequestContext.caller``; one shared by all for a ``stateless``
upstream) per event loop, kept across calls within an idle time and a cap, and reopened when
the upstream forgets them (404), each hop checked by the SSRF guard
(``netguard.send``, no redirects followed), and the upstream's notifications
handed to our caller as they arrive (progress, log) on the call's own response stream, and
its questions (elicitation, sampling) relayed to our caller through ``ctx.ask``. A session
also follows the upstream's own stream (``_listen``): ``list_changed``, the updates of the
resources subscribed in it (``subscribe_resource``; delivered through the services' hooks),
and requests related to no call (a ping answered, anything else refused at once).

The client's arguments are forwarded as they are and the upstream's result comes back as it
is (content blocks, structuredContent, isError, _meta). Failures to reach or understand the
upstream raise ``UpstreamUnavailable`` (a ``ToolError``), which the service counts for the
circuit breaker; a tool call past the call timeout on an upstream that still answers a ping
raises ``UpstreamToolSlow`` (a timeout, not counted); a JSON-RPC error of the upstream is a
plain ``ToolError``. Nothing of our client's request (its token, its headers) is sent
upstream but the headers its operator chose to forward (in ``UpstreamTarget.headers``, built
by the services) and, for a per-user upstream, the caller's own token there
(``CallerAuth``, read before every request). The credential's secrets are redacted from
every message of the upstream as it is decoded (``_decode``), before anything reads it;
errors meant for our caller name the upstream, never its URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import itertools
import logging
import weakref
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Hashable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import orjson
from django import forms

from mcp_app.executors import netguard
from mcp_app.executors.base import (
    ConfigError,
    ConfigFormError,
    ConfigReference,
    Executor,
    PreparedConfig,
    Resolvers,
    UpstreamTarget,
)
from mcp_app.executors.netguard import BlockedAddressError, NetworkPolicy, safe_url
from mcp_app.executors.redaction import redactor_for
from mcp_app.protocol.context import LOG_LEVELS, Question, ToolCallContext
from mcp_app.protocol.errors import INVALID_REQUEST, METHOD_NOT_FOUND, MissingClientCapability
from mcp_app.protocol.results import (
    NO_STRUCTURED,
    InputRequired,
    Outcome,
    ToolError,
    ToolResult,
    ToolTimeout,
)

logger = logging.getLogger(__name__)
# How long a response's stream is read past its answer so its connection is kept (_drain).
DRAIN_SECONDS = 0.1

# What we offer at initialize, newest first; an upstream answering anything else is refused.
CLIENT_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26")
CLIENT_INFO = {"name": "mcphost-upstream-client", "version": "1"}
# Bytes of one response (JSON body or the whole SSE stream) before the call is failed.
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
# Longest wait for the ping that tells a slow tool from an upstream that is down.
PING_SECONDS = 5.0
# Seconds a best-effort notifications/cancelled may take after our call was cancelled.
CANCEL_NOTICE_SECONDS = 2.0
_CONFIG_KEYS = frozenset({"upstream", "tool"})
RELAYED_CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}}
# Upstream requests relayed to our caller, with the capability each needs.
_RELAYED = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling"}


class UpstreamUnavailable(ToolError):
    """The upstream could not be reached or answered something that is not MCP.

    ``message`` is for our caller and names the upstream by its name only; ``detail`` (the
    same by default) may say more for the operator (where it is, what the network said),
    never a secret. The call log records it as ``upstream_error``, not a tool error.
    """

    outcome = Outcome.UPSTREAM_ERROR

    def __init__(self, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.detail = detail if detail is not None else message


class UpstreamToolSlow(ToolTimeout):
    """A tool call ran past the upstream's call timeout while the upstream itself still
    answered (a ping in the same session): the tool is slow, the upstream is up.

    Recorded as timed out; not a failure for the circuit breaker, which would otherwise shut
    every tool of a healthy upstream because one of them is slow.
    """


class UpstreamRefused(ToolError):
    """The upstream answered the request with a JSON-RPC error (its code and message kept)."""

    def __init__(self, message: str, code: Any = None, upstream_message: str = "") -> None:
        super().__init__(message)
        self.code = code if isinstance(code, int) and not isinstance(code, bool) else None
        self.upstream_message = upstream_message


class UpstreamUnauthorized(ToolError):
    """The upstream refused the caller's own token (HTTP 401) on a per-user upstream.

    Not a failure of the upstream (it answered): ``request`` asks ``CallerAuth.rejected``
    for a fresh token and sends the request once more.
    """

    def __init__(self, message: str, authorization: str) -> None:
        super().__init__(message)
        self.authorization = authorization


class UpstreamAuthRequired(UpstreamUnavailable):
    """The upstream asked for authorization this request did not carry (HTTP 401): a failure
    like any other to a call with a credential, but a sign of life to a probe of a per-user
    upstream made without a user."""


@dataclass(frozen=True, slots=True)
class UpstreamConfig(PreparedConfig):
    """``{"upstream": name, "tool": remote name}``; ``target`` is filled per call (resolve)."""

    upstream: str
    tool: str | None = None
    target: UpstreamTarget | None = None


class UpstreamConfigForm(forms.Form):
    upstream_name = forms.CharField(
        required=False,
        help_text="MCP upstream tools: the name of the upstream MCP server (Upstreams).",
    )
    upstream_tool = forms.CharField(
        required=False,
        help_text="The tool's name on the upstream, when it differs from this tool's name.",
    )


@dataclass(slots=True)
class _Session:
    """One upstream session in one event loop: the HTTP client and what initialize set up."""

    client: httpx.AsyncClient
    # The UpstreamTarget.key it belongs to, and when (loop time) a request last ended in it.
    upstream: str = ""
    last_used: float = 0.0
    # Requests running in it now: a busy session is never closed for idleness or the cap.
    busy: int = 0
    session_id: str | None = None
    protocol_version: str | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    closer: AsyncGenerator[None, None] | None = None
    listener: asyncio.Task[None] | None = None
    # Whether the upstream's own stream (GET) is open right now.
    listening: bool = False
    target: UpstreamTarget | None = None
    # Resources subscribed to upstream in this session: URI there -> who wants its updates
    # (the services' subscribers, opaque here). A session with any is never closed as idle.
    subscriptions: dict[str, set[Hashable]] = field(default_factory=dict)
    # notifications/cancelled on their way: the session is closed only after them.
    notices: set[asyncio.Task[None]] = field(default_factory=set)


# Per event loop (a web process has one; tests and workers may run several in turn), per
# session key (``_session_key``: the upstream and the caller): the session. Weak on the loop
# so a closed loop's clients go with it.
_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _Session]] = (
    weakref.WeakKeyDictionary()
)
# Last revision each upstream negotiated in this process, for the health fields.
_revisions: dict[str, str] = {}
_ids = itertools.count(1)
# Connected by services.upstream_subscriptions from AppConfig.ready (this module reads and
# writes no rows): told the subscribers of a resource the upstream says changed; and asked
# which of some subscribers still want updates (the others are dropped, and the upstream told
# once a resource has none left).
ResourceUpdated = Callable[[frozenset[Hashable]], Awaitable[None]]
SubscribersLive = Callable[[frozenset[Hashable]], Awaitable[frozenset[Hashable]]]
resource_updated_handlers: list[ResourceUpdated] = []
subscribers_live_handlers: list[SubscribersLive] = []
# Seconds between attempts to reopen an upstream's notification stream, doubling to the cap.
LISTEN_RETRY_SECONDS = (0.5, 30.0)
_pending_notices: set[asyncio.Task[None]] = set()


def negotiated_revision(key: str) -> str | None:
    """Return the revision the upstream ``key`` negotiated last in this process."""
    return _revisions.get(key)


async def close_sessions() -> None:
    """Close this event loop's upstream clients (tests, shutdown)."""
    loop = asyncio.get_running_loop()
    sweeper = _sweepers.pop(loop, None)
    if sweeper is not None:
        sweeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sweeper
    sessions = _sessions.pop(loop, {})
    for session in sessions.values():
        if session.listener is not None:
            session.listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await session.listener
        await session.client.aclose()


# A caller key starting with this has no identity that outlives its call (an anonymous
# 2026-07-28 caller): its upstream session is opened for the call and closed after it.
ONE_CALL_PREFIX = "once:"
# Seconds the DELETE ending a closed session may take (best effort).
SESSION_CLOSE_SECONDS = 2.0
# Longest pause between two looks for idle sessions (a shorter idle time looks more often).
SWEEP_SECONDS = 30.0
# Per event loop: the task closing its idle sessions, while it has any.
_sweepers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[None]] = (
    weakref.WeakKeyDictionary()
)


def _session_key(target: UpstreamTarget, caller: str) -> str:
    """Which session a request of ``caller`` goes to.

    ``caller`` is the identity the services put on the call's context (``"user:<id>"``,
    ``"session:<id>"``, or ``ONE_CALL_PREFIX`` + a random id); "" is no one in particular
    (discovery, resource reads, prompts), which shares the upstream's own session, as every
    caller of a ``stateless`` upstream does. Per-caller keys never equal the shared one, so
    what one user's session holds upstream (a login, a cart, a toggle) no other caller sees.
    """
    if target.stateless or not caller:
        return target.key
    return f"{target.key}#{caller}"


def _close_idle(loop: asyncio.AbstractEventLoop, keep: str = "") -> None:
    """Close the sessions unused for longer than their upstream's idle time (never ``keep``)."""
    sessions = _sessions.get(loop, {})
    now = loop.time()
    for key, session in list(sessions.items()):
        idle = session.target.session_idle_seconds if session.target else SWEEP_SECONDS
        if (
            key != keep
            and not session.busy
            and not session.subscriptions
            and now - session.last_used > idle
        ):
            _close_later(loop, sessions.pop(key))


async def _sweep(loop: asyncio.AbstractEventLoop) -> None:
    """Close this loop's idle sessions as their time passes, and end the subscriptions no
    one wants any more; end once it has no sessions left."""
    while sessions := _sessions.get(loop):
        idle = [s.target.session_idle_seconds / 2 for s in sessions.values() if s.target]
        await asyncio.sleep(min([SWEEP_SECONDS, *idle]))
        for session in list(sessions.values()):
            if session.subscriptions and session.target is not None:
                try:
                    await _prune(session.target, session)
                except Exception:  # noqa: BLE001  (the services could not tell: next time)
                    logger.warning("Could not check upstream subscriptions", exc_info=True)
        _close_idle(loop)


def _evict(loop: asyncio.AbstractEventLoop, target: UpstreamTarget, keep: str) -> None:
    """Close idle sessions, then, while ``target``'s upstream is at its cap, its least
    recently used idle ones (never ``keep``); make sure the loop sweeps idle ones later."""
    sessions = _sessions.get(loop, {})
    _close_idle(loop, keep)
    sweeper = _sweepers.get(loop)
    if sweeper is None or sweeper.done():
        _sweepers[loop] = loop.create_task(_sweep(loop), name="mcp-upstream-session-sweep")
    mine = sorted(
        ((session.last_used, key) for key, session in sessions.items()
         if session.upstream == target.key and key != keep and not session.busy
         and not session.subscriptions),
    )  # fmt: skip
    count = sum(1 for session in sessions.values() if session.upstream == target.key)
    for _last_used, key in mine:
        if count < target.max_sessions:  # room for the one ``keep`` opens
            break
        _close_later(loop, sessions.pop(key))
        count -= 1


def _close_later(loop: asyncio.AbstractEventLoop, session: _Session) -> None:
    """End ``session`` upstream (DELETE) and close its client, without holding up the caller."""

    async def close() -> None:
        if session.listener is not None:
            session.listener.cancel()
        if session.notices:
            # A call cancelled just now (a one-call session closes as its call ends): its
            # cancellation must reach the upstream before the session and client go.
            await asyncio.wait(set(session.notices), timeout=CANCEL_NOTICE_SECONDS)
        try:
            if session.session_id and session.target is not None:
                async with (
                    asyncio.timeout(SESSION_CLOSE_SECONDS),
                    _send(session.target, session, None, method="DELETE") as response,
                ):
                    await response.aread()
        except Exception as exc:  # noqa: BLE001  (best effort: the upstream expires it anyway)
            logger.debug("Could not end an upstream session: %s", type(exc).__name__)
        finally:
            session.session_id = session.protocol_version = None
            if session.closer is not None:
                await session.closer.aclose()
            else:
                await session.client.aclose()

    task = loop.create_task(close())
    _pending_notices.add(task)
    task.add_done_callback(_pending_notices.discard)


class McpUpstreamExecutor(Executor[UpstreamConfig]):
    kind = "mcp_upstream"
    label = "MCP upstream tool"
    config_form = UpstreamConfigForm
    # The upstream's question is answered within its one tools/call request.
    holds_questions = True
    reaches_outside = True

    def prepare(self, config: Mapping[str, Any]) -> UpstreamConfig:
        unknown = set(config) - _CONFIG_KEYS
        if unknown:
            raise ConfigError(f"Unknown config keys: {', '.join(sorted(unknown))}.")
        upstream = config.get("upstream")
        if not isinstance(upstream, str) or not upstream:
            raise ConfigError("upstream must be the name of an upstream MCP server.")
        tool = config.get("tool")
        if tool is not None and (not isinstance(tool, str) or not tool):
            raise ConfigError("tool must be the tool's name on the upstream.")
        return UpstreamConfig(upstream=upstream, tool=tool)

    async def resolve(self, prepared: UpstreamConfig, resolvers: Resolvers) -> UpstreamConfig:
        return replace(prepared, target=await resolvers.upstream(prepared.upstream))

    async def run(
        self, prepared: UpstreamConfig, arguments: Mapping[str, Any], ctx: ToolCallContext
    ) -> ToolResult:
        target = prepared.target
        if target is None:
            raise ToolError(f"The upstream {prepared.upstream!r} was not resolved.")
        name = prepared.tool or ctx.tool_name
        try:
            result = await call_tool(target, name, arguments, ctx)
        except UpstreamUnavailable as exc:
            if target.report is not None:
                await target.report(exc.detail)
            raise
        except UpstreamToolSlow:
            # The upstream answered its ping: reached, so healthy, whatever its tool does.
            if target.report is not None:
                await target.report(None)
            raise
        if target.report is not None:
            await target.report(None)
        # Everything the upstream sent was redacted as it was decoded (``_decode``).
        meta = result.get("_meta")
        return ToolResult(
            content=result["content"],
            structured=result.get("structuredContent", NO_STRUCTURED),
            is_error=result.get("isError") is True,
            meta=meta if isinstance(meta, Mapping) else None,
        )

    def form_initial(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return {"upstream_name": config.get("upstream", ""), "upstream_tool": config.get("tool")}

    def config_references(self, config: Mapping[str, Any]) -> Sequence[ConfigReference]:
        upstream = config.get("upstream")
        if not isinstance(upstream, str) or not upstream:
            return ()
        return (ConfigReference("upstream", "upstream", upstream),)

    def form_field_of(self, key: str) -> str | None:
        return {"upstream": "upstream_name", "tool": "upstream_tool"}.get(key)

    def config_from_form(
        self, data: Mapping[str, Any], input_schema: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        config: dict[str, Any] = {"upstream": data.get("upstream_name") or ""}
        if data.get("upstream_tool"):
            config["tool"] = data["upstream_tool"]
        try:
            self.prepare(config)
        except ConfigError as exc:
            raise ConfigFormError({"upstream_name": exc.message}) from None
        return config


async def call_tool(
    target: UpstreamTarget, name: str, arguments: Mapping[str, Any], ctx: ToolCallContext
) -> dict[str, Any]:
    """Call ``name`` on the upstream and return its ``CallToolResult`` (checked for shape).

    Raises:
        UpstreamUnavailable: unreachable, timed out, refused by the SSRF guard, or not MCP.
        UpstreamToolSlow: timed out while the upstream still answers a ping.
        UpstreamRefused: the upstream answered the call with a JSON-RPC error.
    """
    params: dict[str, Any] = {"name": name, "arguments": dict(arguments)}
    result = await request(target, "tools/call", params, ctx)
    content = result.get("content")
    if not isinstance(content, list) or not all(isinstance(block, dict) for block in content):
        raise UpstreamUnavailable(f"The upstream {target.name!r} sent a malformed tool result.")
    return result


async def list_tools(target: UpstreamTarget) -> list[dict[str, Any]]:
    """Return every tool the upstream offers, following ``nextCursor`` (bounded to 100 pages).

    Raises:
        UpstreamUnavailable, ToolError: as ``request``.
    """
    return await _list_all(target, "tools/list", "tools")


async def list_resources(target: UpstreamTarget) -> list[dict[str, Any]]:
    """Return every resource the upstream offers (every page, as ``list_tools``)."""
    return await _list_all(target, "resources/list", "resources")


async def list_resource_templates(target: UpstreamTarget) -> list[dict[str, Any]]:
    """Return every resource template the upstream offers (every page, as ``list_tools``)."""
    return await _list_all(target, "resources/templates/list", "resourceTemplates")


async def list_prompts(target: UpstreamTarget) -> list[dict[str, Any]]:
    """Return every prompt the upstream offers (every page, as ``list_tools``)."""
    return await _list_all(target, "prompts/list", "prompts")


async def _list_all(target: UpstreamTarget, method: str, key: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    for _page in range(100):
        params = {"cursor": cursor} if cursor else {}
        result = await request(target, method, params, None)
        page = result.get(key)
        if not isinstance(page, list) or not all(isinstance(item, dict) for item in page):
            raise UpstreamUnavailable(f"The upstream {target.name!r} sent a malformed {method}.")
        items.extend(page)
        cursor = result.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            break
    return items


async def read_resource(
    target: UpstreamTarget, uri: str, *, caller: str = ""
) -> list[dict[str, Any]]:
    """Read ``uri`` on the upstream, in ``caller``'s session, and return its contents (checked
    for shape).

    Raises:
        UpstreamUnavailable, UpstreamRefused: as ``request``.
    """
    result = await request(target, "resources/read", {"uri": uri}, None, caller=caller)
    contents = result.get("contents")
    if not isinstance(contents, list) or not all(
        isinstance(item, dict) and isinstance(item.get("uri"), str) for item in contents
    ):
        raise UpstreamUnavailable(f"The upstream {target.name!r} sent malformed contents.")
    return contents


async def get_prompt(
    target: UpstreamTarget, name: str, arguments: Mapping[str, str], *, caller: str = ""
) -> dict[str, Any]:
    """Get prompt ``name`` from the upstream with ``arguments``, in ``caller``'s session; its
    ``GetPromptResult``.

    Raises:
        UpstreamUnavailable, UpstreamRefused: as ``request``.
    """
    params: dict[str, Any] = {"name": name}
    if arguments:
        params["arguments"] = dict(arguments)
    result = await request(target, "prompts/get", params, None, caller=caller)
    messages = result.get("messages")
    if not isinstance(messages, list) or not all(
        isinstance(m, dict)
        and isinstance(m.get("role"), str)
        and isinstance(m.get("content"), dict)
        for m in messages
    ):
        raise UpstreamUnavailable(f"The upstream {target.name!r} sent a malformed prompt.")
    return result


async def complete(
    target: UpstreamTarget,
    ref: Mapping[str, str],
    argument: str,
    value: str,
    context_arguments: Mapping[str, str],
    *,
    caller: str = "",
) -> dict[str, Any]:
    """Ask the upstream to complete ``argument`` of ``ref``, in ``caller``'s session; its
    ``completion`` object.

    Values are strings, at most 100 of them (the schema's limit); ``total`` and ``hasMore``
    are passed on when the upstream sent them well-formed.

    Raises:
        UpstreamUnavailable, UpstreamRefused: as ``request``.
    """
    params: dict[str, Any] = {"ref": dict(ref), "argument": {"name": argument, "value": value}}
    if context_arguments:
        params["context"] = {"arguments": dict(context_arguments)}
    result = await request(target, "completion/complete", params, None, caller=caller)
    completion = result.get("completion")
    values = completion.get("values") if isinstance(completion, dict) else None
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise UpstreamUnavailable(f"The upstream {target.name!r} sent a malformed completion.")
    assert isinstance(completion, dict)
    answer: dict[str, Any] = {"values": values[:100]}
    total, more = completion.get("total"), completion.get("hasMore")
    if isinstance(total, int) and not isinstance(total, bool) and total >= 0:
        answer["total"] = total
    if isinstance(more, bool) or len(values) > 100:
        answer["hasMore"] = more is True or len(values) > 100
    return answer


async def request(
    target: UpstreamTarget,
    method: str,
    params: Mapping[str, Any],
    ctx: ToolCallContext | None,
    *,
    caller: str | None = None,
) -> dict[str, Any]:
    """Send one request in the session of the caller (``caller``, else ``ctx``'s; none: the
    upstream's shared session), opened or reopened as needed.

    A ``tools/call`` that times out (no answer within the call timeout, or no byte for as
    long) is followed by a ``ping``: an upstream that answers it is up and its tool slow.

    Raises:
        UpstreamUnavailable: see ``call_tool``.
        UpstreamToolSlow: a ``tools/call`` timed out, and the upstream answered a ping.
        UpstreamRefused: the upstream answered with a JSON-RPC error.
    """
    if caller is None:
        caller = ctx.request.caller if ctx is not None else ""
    try:
        try:
            return await _request(target, method, params, ctx, caller)
        except UpstreamUnauthorized as refused:
            # The caller's token was refused (revoked, or expired early): once more with a
            # fresh one, which the upstream may echo like the first, so redacted too.
            assert target.caller_auth is not None
            await target.caller_auth.rejected(refused.authorization)
            target = replace(target, secrets=target.secrets + target.caller_auth.secrets())
            return await _request(target, method, params, ctx, caller)
    except UpstreamUnauthorized:
        raise ToolError(
            f"The upstream {target.name!r} refused your authorization even after a refresh."
        ) from None
    except (TimeoutError, httpx.ReadTimeout):
        if method == "tools/call" and await _answers_ping(target, caller):
            raise UpstreamToolSlow(
                f"The upstream {target.name!r} did not finish the call within "
                f"{target.call_timeout:g} s (the upstream is up: the tool is slow)."
            ) from None
        raise UpstreamUnavailable(
            f"The upstream {target.name!r} did not answer within {target.call_timeout:g} s."
        ) from None
    except httpx.HTTPError as exc:
        raise _unreachable(target, exc) from None


async def _answers_ping(target: UpstreamTarget, caller: str) -> bool:
    """Whether the upstream answers a ``ping`` in ``caller``'s session, within PING_SECONDS
    (or its call timeout, if shorter). An error answer is an answer."""
    quick = replace(target, call_timeout=min(target.call_timeout, PING_SECONDS))
    try:
        await _request(quick, "ping", {}, None, caller)
    except UpstreamRefused:
        return True
    except (TimeoutError, httpx.HTTPError, ToolError):
        return False
    return True


def _unreachable(target: UpstreamTarget, exc: httpx.HTTPError) -> UpstreamUnavailable:
    detail = redact(
        target,
        f"Could not reach the upstream {target.name!r} at {safe_url(target.url)} "
        f"({type(exc).__name__}: {exc}).",
    )
    logger.warning("%s", detail)
    return UpstreamUnavailable(
        f"Could not reach the upstream {target.name!r} ({type(exc).__name__}).", detail
    )


async def _request(
    target: UpstreamTarget,
    method: str,
    params: Mapping[str, Any],
    ctx: ToolCallContext | None,
    caller: str,
) -> dict[str, Any]:
    """``request`` without telling timeouts apart: TimeoutError and httpx errors pass.

    Raises:
        TimeoutError, httpx.HTTPError: no answer in time, or the network failed.
        UpstreamUnavailable, UpstreamRefused: as ``request``.
    """
    key = _session_key(target, caller)
    one_call = key != target.key and caller.startswith(ONE_CALL_PREFIX)
    try:
        async with asyncio.timeout(target.call_timeout):
            for attempt in range(2):
                session = await _session(target, key, one_call=one_call)
                expired = session.session_id
                try:
                    return await _send_request(target, session, method, params, ctx)
                except _SessionExpired:
                    # The upstream forgot the session (restart, idle expiry): open a new one
                    # once and send the request again; it never ran on the old one.
                    await _expire(session, expired)
                    if attempt:
                        raise UpstreamUnavailable(
                            f"The upstream {target.name!r} keeps refusing its new session."
                        ) from None
                finally:
                    _release(key, session, one_call=one_call)
    except BlockedAddressError as exc:
        # Where the upstream is stays with the operator: the caller learns only its name.
        detail = redact(target, f"{exc} (upstream {target.name!r} at {safe_url(target.url)})")
        logger.warning("Upstream %s refused by the network policy: %s", target.name, detail)
        raise UpstreamUnavailable(
            f"Requests to the upstream {target.name!r} are not allowed: its address is not "
            "public. An operator can allow-list its network.",
            detail,
        ) from None
    raise AssertionError("unreachable")  # pragma: no cover


class _SessionExpired(Exception):
    pass


async def _session(target: UpstreamTarget, key: str, *, one_call: bool = False) -> _Session:
    """The session ``key`` of this loop, opened if needed and marked busy (``_release``).

    A ``one_call`` session does not follow the upstream's own stream: it ends with its call.
    """
    loop = asyncio.get_running_loop()
    sessions = _sessions.setdefault(loop, {})
    session = sessions.get(key)
    if session is None:
        _evict(loop, target, keep=key)
        timeout = httpx.Timeout(
            target.call_timeout, connect=target.connect_timeout, pool=target.connect_timeout
        )
        # Its pool keeps the upstream's connections from call to call (``_drain``); its TLS
        # context is the one every guarded client shares.
        client = netguard.guarded_client(timeout)
        session = sessions[key] = _Session(
            client=client, upstream=target.key, target=target, last_used=loop.time()
        )
    # Busy before the first await: eviction never takes a session someone is about to use.
    session.busy += 1
    try:
        if session.closer is None:
            session.closer = _close_with_loop(session.client)
            await anext(session.closer)
        if session.protocol_version is None:
            async with session.lock:
                if session.protocol_version is None:
                    await _initialize(target, session, listen=not one_call)
    except BaseException:
        _release(key, session, one_call=one_call)
        raise
    return session


def _release(key: str, session: _Session, *, one_call: bool) -> None:
    """A request in ``session`` ended: note when, and close a one-call session."""
    loop = asyncio.get_running_loop()
    session.busy -= 1
    session.last_used = loop.time()
    sessions = _sessions.get(loop, {})
    if one_call and not session.busy and sessions.get(key) is session:
        _close_later(loop, sessions.pop(key))


async def _close_with_loop(client: httpx.AsyncClient) -> AsyncGenerator[None, None]:
    """Close ``client`` when its event loop shuts down.

    A Celery worker runs each background call in ``asyncio.run``, a loop of its own: that
    loop's sessions live for one call, and ``asyncio.run`` closes every unfinished async
    generator on the way out (``loop.shutdown_asyncgens``), which runs this ``finally``. A web
    process's loop never ends, so its sessions stay.
    """
    try:
        yield
    finally:
        await client.aclose()


async def _expire(session: _Session, expired: str | None) -> None:
    # Calls running concurrently in the same session may all see the 404: the first resets
    # it and the next _session() initializes again, on the same HTTP client (whose
    # connections other calls may be using).
    async with session.lock:
        if session.session_id == expired:
            session.session_id = None
            session.protocol_version = None


async def _initialize(target: UpstreamTarget, session: _Session, *, listen: bool = True) -> None:
    session.session_id = None
    params = {
        "protocolVersion": CLIENT_VERSIONS[0],
        # Questions are relayed to whichever client made the call (a shared session serves
        # several), and refused (an error to the upstream) when that client cannot answer.
        "capabilities": RELAYED_CAPABILITIES,
        "clientInfo": CLIENT_INFO,
    }
    result = await _send_request(target, session, "initialize", params, None)
    version = result.get("protocolVersion")
    if version not in CLIENT_VERSIONS:
        raise UpstreamUnavailable(
            f"The upstream {target.name!r} speaks MCP revision {version!r}, which this "
            "client does not."
        )
    session.protocol_version = version
    _revisions[target.key] = version
    notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    async with _post(target, session, notice) as response:
        await response.aread()
    await _resubscribe(target, session)
    # One stream per upstream suffices to hear its list_changed: the first session opened
    # follows it, and another takes over once that one is closed. A session with
    # subscriptions follows its own (subscribe_resource), where its updates arrive.
    loop = asyncio.get_running_loop()
    followed = any(
        other.upstream == target.key and other.listener is not None and not other.listener.done()
        for other in _sessions.get(loop, {}).values()
    )
    if listen and session.session_id and not followed:
        _follow(target, session)


def _follow(target: UpstreamTarget, session: _Session) -> None:
    """Have ``session`` follow the upstream's own stream, unless it does already."""
    if session.listener is None or session.listener.done():
        session.listener = asyncio.get_running_loop().create_task(
            _listen(target, session), name=f"mcp-upstream-listen-{target.name}"
        )


async def _listen(target: UpstreamTarget, session: _Session) -> None:
    """Follow the upstream's own stream (GET): its ``list_changed``, the updates of the
    resources subscribed in the session, and requests related to no call of ours.

    Runs as long as the session's event loop (a worker's per-call loop cancels it at its
    end), or until the session is closed; reopened after a failure, with a growing pause. A
    session the upstream no longer knows (404: it restarted, or expired the session) is
    initialized again at once, so what the upstream sends next is heard, and the session's
    subscriptions made again. An upstream that offers no such stream (405) is not asked
    again.
    """
    pause = LISTEN_RETRY_SECONDS[0]
    while True:
        fresh = False
        try:
            if session.protocol_version is None:
                async with session.lock:
                    if session.protocol_version is None:
                        await _initialize(target, session, listen=False)
                        fresh = True
            session_id = session.session_id
            if session_id is None:
                return  # the upstream keeps no sessions: it has no stream of its own either
            async with _get(target, session) as response:
                if response.status_code == 405:
                    return
                if response.status_code == 404 and not fresh:
                    await _expire(session, session_id)
                    continue
                if response.status_code == 200:
                    pause = LISTEN_RETRY_SECONDS[0]
                    session.listening = True
                    async for message in _sse_messages(target, response):
                        if "id" in message and "method" in message:
                            await _answer_unrelated(target, session, message)
                        else:
                            await _notice(target, message, session)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001  (any failure: wait and open it again)
            logger.debug(
                "Upstream %s: notification stream failed: %s",
                target.name,
                redact(target, repr(exc)),
            )
        finally:
            session.listening = False
        await asyncio.sleep(pause)
        pause = min(pause * 2, LISTEN_RETRY_SECONDS[1])


async def _answer_unrelated(
    target: UpstreamTarget, session: _Session, message: Mapping[str, Any]
) -> None:
    """Answer a request the upstream sent on its own stream, related to no call of ours.

    ``ping`` is answered. A question (elicitation, sampling) has no caller to relay it to
    outside a call, and anything else is not ours to answer: each is refused at once, with
    a reason the upstream can read, rather than left to time out there.
    """
    method = message.get("method")
    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
    if method == "ping":
        reply["result"] = {}
    elif method in _RELAYED:
        reply["error"] = {
            "code": INVALID_REQUEST,
            "message": f"{method} is relayed to a client only within a tool call it made "
            "through this gateway; this request is related to no call, so no one can answer it.",
        }
    else:
        reply["error"] = {
            "code": METHOD_NOT_FOUND,
            "message": "This client does not answer that request.",
        }
    async with _post(target, session, reply) as response:
        await response.aread()


async def _notice(
    target: UpstreamTarget, message: Mapping[str, Any], session: _Session | None = None
) -> None:
    method = message.get("method")
    if method == "notifications/tools/list_changed":
        if target.tools_changed is not None:
            await target.tools_changed()
    elif method == "notifications/resources/updated" and session is not None:
        params = message.get("params")
        uri = params.get("uri") if isinstance(params, Mapping) else None
        if isinstance(uri, str) and uri in session.subscriptions:
            live = await _prune(target, session, uri)
            if live:
                for deliver in resource_updated_handlers:
                    await deliver(live)


# --- resource subscriptions ----------------------------------------------------------------


async def subscribe_resource(
    target: UpstreamTarget, uri: str, subscriber: Hashable, *, caller: str = ""
) -> None:
    """Have ``subscriber`` told (``resource_updated_handlers``) when the upstream says the
    resource ``uri`` changed; the first subscriber of ``uri`` in ``caller``'s session
    subscribes there.

    The session then follows the upstream's own stream, where the updates arrive, and is
    kept open however long it is idle; it subscribes again whenever it is initialized again
    (an upstream restart).

    Raises:
        UpstreamUnavailable, UpstreamRefused: as ``request``.
    """
    key = _session_key(target, caller)
    sessions = _sessions.setdefault(asyncio.get_running_loop(), {})
    session = sessions.get(key)
    if session is None or uri not in session.subscriptions:
        await request(target, "resources/subscribe", {"uri": uri}, None, caller=caller)
        session = sessions.get(key)
        if session is None:  # closed meanwhile (the cap): the subscription went with it
            raise UpstreamUnavailable(f"The upstream {target.name!r} closed the session.")
    session.subscriptions.setdefault(uri, set()).add(subscriber)
    _follow(target, session)


async def unsubscribe_resource(
    target: UpstreamTarget, uri: str, subscriber: Hashable, *, caller: str = ""
) -> None:
    """Stop telling ``subscriber`` of changes to ``uri``; the upstream is told once no one
    in ``caller``'s session wants them (a no-op when this event loop holds no such
    subscription).

    Raises:
        UpstreamUnavailable, UpstreamRefused: as ``request``.
    """
    session = _sessions.get(asyncio.get_running_loop(), {}).get(_session_key(target, caller))
    if session is None or subscriber not in session.subscriptions.get(uri, ()):
        return
    session.subscriptions[uri].discard(subscriber)
    if not session.subscriptions[uri]:
        del session.subscriptions[uri]
        await request(target, "resources/unsubscribe", {"uri": uri}, None, caller=caller)


async def _prune(
    target: UpstreamTarget, session: _Session, uri: str | None = None
) -> frozenset[Hashable]:
    """Drop the subscribers (of ``uri``, else of every resource) the services say no longer
    want updates, unsubscribing upstream where none is left; return those that still do."""
    uris = [uri] if uri is not None else list(session.subscriptions)
    wanted = frozenset(s for each in uris for s in session.subscriptions.get(each, ()))
    live = wanted
    for handler in subscribers_live_handlers:
        live = live & await handler(wanted)
    for each in uris:
        subscribers = session.subscriptions.get(each)
        if subscribers is None:
            continue
        subscribers &= live
        if subscribers:
            continue
        del session.subscriptions[each]
        try:
            async with asyncio.timeout(SESSION_CLOSE_SECONDS):
                await _send_request(target, session, "resources/unsubscribe", {"uri": each}, None)
        except Exception as exc:  # noqa: BLE001  (best effort: the session may be gone too)
            logger.debug("Could not unsubscribe upstream: %s", redact(target, repr(exc)))
    return live


async def _resubscribe(target: UpstreamTarget, session: _Session) -> None:
    """Subscribe the freshly initialized ``session`` again to what it was subscribed to.

    Raises:
        UpstreamUnavailable, TimeoutError, httpx.HTTPError: the session is then initialized
            again at its next use, and tries again.
    """
    for uri in list(session.subscriptions):
        try:
            await _send_request(target, session, "resources/subscribe", {"uri": uri}, None)
        except UpstreamRefused as exc:
            logger.warning(
                "Upstream %s refused a subscription again: %s", target.name, exc.upstream_message
            )
        except BaseException:
            session.protocol_version = None
            raise


async def _sse_messages(
    target: UpstreamTarget, response: httpx.Response
) -> AsyncIterator[dict[str, Any]]:
    """Yield the JSON-RPC messages of an SSE response (events without data skipped)."""
    data: list[str] = []
    async for line in _bounded_lines(response):
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
            continue
        if line or not data:
            continue  # event:, id:, retry:, comments; or a blank line closing no data
        text, data = "\n".join(data), []
        if not text.strip():
            continue  # a priming event (2025-11-25: an id and empty data, for resumption)
        message = _decode(target, text)
        if not isinstance(message, dict):
            raise UpstreamUnavailable(f"The upstream {target.name!r} sent a non-object message.")
        yield message


def _get(
    target: UpstreamTarget, session: _Session
) -> contextlib.AbstractAsyncContextManager[httpx.Response]:
    """Open the upstream's own SSE stream (GET) in the session, at a vetted address."""
    return _send(target, session, None)


def _post(
    target: UpstreamTarget, session: _Session, message: Mapping[str, Any]
) -> contextlib.AbstractAsyncContextManager[httpx.Response]:
    """POST one message to the upstream, at a vetted address, and yield the open response."""
    return _send(target, session, message)


@contextlib.asynccontextmanager
async def _send(
    target: UpstreamTarget,
    session: _Session,
    message: Mapping[str, Any] | None,
    method: str | None = None,
) -> AsyncIterator[httpx.Response]:
    url = httpx.URL(target.url)
    if target.query:
        url = url.copy_merge_params(dict(target.query))
    headers = {
        **target.headers,
        "Accept": "application/json, text/event-stream" if message else "text/event-stream",
    }
    if target.caller_auth is not None:
        headers.update(await target.caller_auth.headers())
    if message is not None:
        headers["Content-Type"] = "application/json"
    if session.session_id:
        headers["Mcp-Session-Id"] = session.session_id
    if session.protocol_version:
        headers["MCP-Protocol-Version"] = session.protocol_version
    response = await netguard.send(
        session.client,
        method or ("POST" if message is not None else "GET"),
        url,
        _policy(target.allow_hosts, target.allow_networks),
        headers=headers,
        content=orjson.dumps(message) if message is not None else None,
    )
    try:
        yield response
    finally:
        await response.aclose()


@functools.lru_cache(maxsize=64)
def _policy(hosts: tuple[str, ...], networks: tuple[str, ...]) -> NetworkPolicy:
    """The upstream's allow-list (the services merged MCP_HTTP_ALLOWED_NETWORKS into it)."""
    return NetworkPolicy.build(hosts=hosts, networks=networks)


async def _send_request(
    target: UpstreamTarget,
    session: _Session,
    method: str,
    params: Mapping[str, Any],
    ctx: ToolCallContext | None,
) -> dict[str, Any]:
    request_id = next(_ids)
    sent_params = dict(params)
    if ctx is not None and method == "tools/call":
        # Ask for progress always: ctx.progress drops it when our own caller did not.
        sent_params["_meta"] = {"progressToken": f"mcphost-{request_id}"}
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": sent_params}
    try:
        async with _post(target, session, message) as response:
            # The session the request named, not the session's id now: the listener may have
            # seen the same 404 on its stream and reset the session meanwhile.
            named = response.request.headers.get("mcp-session-id")
            if response.status_code == 404 and named and method != "initialize":
                raise _SessionExpired
            if response.status_code == 401 and target.caller_auth is not None:
                raise UpstreamUnauthorized(
                    f"The upstream {target.name!r} refused the caller's authorization.",
                    response.request.headers.get("authorization", ""),
                )
            if response.status_code == 401:
                raise UpstreamAuthRequired(
                    f"The upstream {target.name!r} answered HTTP 401 to {method}."
                )
            if response.status_code != 200:
                raise UpstreamUnavailable(
                    f"The upstream {target.name!r} answered HTTP {response.status_code} "
                    f"to {method}."
                )
            if method == "initialize":
                session.session_id = response.headers.get("mcp-session-id") or None
            content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
            if content_type == "application/json":
                body = await _read_capped(response)
                return _response_result(target, _decode(target, body), request_id)
            if content_type == "text/event-stream":
                return await _read_stream(target, session, response, request_id, ctx)
            raise UpstreamUnavailable(
                f"The upstream {target.name!r} answered {method} with {content_type or 'no'} "
                "content type, not JSON or an event stream."
            )
    except (asyncio.CancelledError, InputRequired, MissingClientCapability):
        # Our call ends without the upstream's answer (cancelled, timed out, or a 2026 caller
        # must answer a relayed question first and will run the call again): stop its run.
        if method == "tools/call":
            _notify_cancelled(target, session, request_id)
        raise


def _notify_cancelled(target: UpstreamTarget, session: _Session, request_id: int) -> None:
    """Tell the upstream our caller gave up, without holding up the cancellation."""

    async def send() -> None:
        notice = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "The caller cancelled the call."},
        }
        try:
            async with asyncio.timeout(CANCEL_NOTICE_SECONDS), _post(target, session, notice) as r:
                await r.aread()
        except Exception as exc:  # noqa: BLE001  (best effort: the call is over either way)
            logger.info(
                "Could not pass a cancellation to upstream %s: %s",
                target.name,
                redact(target, repr(exc)),
            )

    task = asyncio.get_running_loop().create_task(send())
    _pending_notices.add(task)
    task.add_done_callback(_pending_notices.discard)
    session.notices.add(task)
    task.add_done_callback(session.notices.discard)


async def _bounded_lines(response: httpx.Response) -> AsyncIterator[str]:
    """Yield the lines of a streamed body, failing once it passes MAX_RESPONSE_BYTES.

    httpx's own line iterator buffers a line without end as long as it grows; an upstream
    sending one must not take the process's memory with it.
    """
    size = 0
    pending = b""
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise UpstreamUnavailable("The upstream's response is larger than the limit.")
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.removesuffix(b"\r").decode("utf-8", "replace")
    if pending:
        yield pending.removesuffix(b"\r").decode("utf-8", "replace")


async def _read_capped(response: httpx.Response) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise UpstreamUnavailable("The upstream's response is larger than the limit.")
        chunks.append(chunk)
    return b"".join(chunks)


def _decode(target: UpstreamTarget, data: bytes | str) -> Any:
    """Parse one message of the upstream, its credential's secrets redacted.

    The one place everything the upstream sends passes (JSON bodies and SSE events alike):
    notifications, questions, results, errors, contents, prompts and completions all reach
    our caller, the call log and our own log lines without the secrets, whatever it echoes.
    """
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise UpstreamUnavailable(f"The upstream {target.name!r} sent invalid JSON.") from None
    return redactor_for(target.secrets).message(message) if target.secrets else message


def redact(target: UpstreamTarget, text: str) -> str:
    """``text`` without the upstream credential's secrets (for errors and log lines)."""
    return redactor_for(target.secrets)(text) if target.secrets else text


def _response_result(target: UpstreamTarget, message: Any, request_id: int) -> dict[str, Any]:
    if not isinstance(message, dict) or message.get("id") != request_id:
        raise UpstreamUnavailable(f"The upstream {target.name!r} sent no response to the request.")
    error = message.get("error")
    if isinstance(error, dict):
        text = error.get("message")
        text = text if isinstance(text, str) else ""
        raise UpstreamRefused(
            f"The upstream {target.name!r} refused the request: {text} ({error.get('code')}).",
            error.get("code"),
            text,
        )
    result = message.get("result")
    if not isinstance(result, dict):
        raise UpstreamUnavailable(f"The upstream {target.name!r} sent a response without result.")
    return result


async def _read_stream(
    target: UpstreamTarget,
    session: _Session,
    response: httpx.Response,
    request_id: int,
    ctx: ToolCallContext | None,
) -> dict[str, Any]:
    """Read SSE events until the response to ``request_id``, relaying notifications."""
    messages = _sse_messages(target, response)
    async for message in messages:
        if "method" not in message:
            result = _response_result(target, message, request_id)
            await _drain(messages)
            return result
        if "id" in message:
            await _answer_server_request(target, session, message, ctx)
        else:
            await _notice(target, message, session)
            if ctx is not None:
                await _relay_notification(message, ctx)
    raise UpstreamUnavailable(f"The upstream {target.name!r} closed the stream before answering.")


async def _drain(messages: AsyncIterator[dict[str, Any]]) -> None:
    """Read a response's stream to its end, briefly, once its answer came.

    A server ends the stream after the answer (the spec says it should); reading to that end
    lets httpx put the connection back in the pool, where closing the response early would
    drop it, and every call would open a connection of its own. A server that keeps the
    stream open costs at most ``DRAIN_SECONDS``; what comes after the answer is not ours.
    """
    with contextlib.suppress(TimeoutError, httpx.HTTPError, UpstreamUnavailable):
        async with asyncio.timeout(DRAIN_SECONDS):
            async for _ in messages:
                pass


async def _relay_notification(message: Mapping[str, Any], ctx: ToolCallContext) -> None:
    params = message.get("params")
    if not isinstance(params, Mapping):
        return
    method = message.get("method")
    if method == "notifications/progress":
        progress, total = params.get("progress"), params.get("total")
        if isinstance(progress, int | float) and not isinstance(progress, bool):
            total = total if isinstance(total, int | float) else None
            text = params.get("message")
            await ctx.progress(progress, total, text if isinstance(text, str) else None)
    elif method == "notifications/message":
        level = params.get("level")
        if level in LOG_LEVELS:
            name = params.get("logger")
            await ctx.log(level, params.get("data"), name if isinstance(name, str) else None)


async def _answer_server_request(
    target: UpstreamTarget,
    session: _Session,
    message: Mapping[str, Any],
    ctx: ToolCallContext | None,
) -> None:
    """Answer a request the upstream sent on the call's stream.

    ``ping`` is answered here. Elicitation and sampling go to our caller through ``ctx.ask``
    (its stream in a legacy call; in a 2026 call, ``input_required`` while this request stays
    open, the run held between rounds (``holds_questions``; an MCP task's waits for
    ``tasks/update`` on its worker), so the answer returns here whatever the question's
    wording; the key, a digest of the question, only names it within the run). Anything
    else, or a caller that cannot answer, gets an error the upstream reports as it sees fit.
    """
    method = message.get("method")
    raw_params = message.get("params")
    params: Mapping[str, Any] = raw_params if isinstance(raw_params, Mapping) else {}
    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
    if method == "ping":
        reply["result"] = {}
    elif method in _RELAYED and ctx is not None:
        question = Question(
            method=method,
            params=dict(params),
            capability=_RELAYED[method],
            mode=(params.get("mode") or "form") if method == "elicitation/create" else None,
        )
        key = (
            "upstream-"
            + hashlib.sha256(
                orjson.dumps([method, params], option=orjson.OPT_SORT_KEYS)
            ).hexdigest()[:24]
        )
        try:
            reply["result"] = (await ctx.ask({key: question}))[key]
        except ToolError as exc:
            reply["error"] = {"code": -32603, "message": exc.message}
    else:
        reply["error"] = {"code": -32601, "message": "This client does not answer that request."}
    async with _post(target, session, reply) as response:
        await response.aread()
