"""Per-request context handed to handlers, and the narrower one handed to a running tool.

The transport builds a ``RequestContext`` per JSON-RPC request: the negotiated revision, the
endpoint's catalog snapshot, the ports, and ``send``, which writes one JSON-RPC notification on
this request's own response stream (the transport switches that response to SSE on the first
frame). Without ``send`` the request cannot stream and notifications are dropped.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from mcp_app.protocol.catalog import CatalogItem, CatalogSnapshot
from mcp_app.protocol.errors import MissingClientCapability
from mcp_app.protocol.policies import TOOLS_CALL, PolicyCall, PolicyRecord
from mcp_app.protocol.ports import (
    ClientRequester,
    Completer,
    HeldQuestions,
    PromptSource,
    ResourceReader,
    ResourceWatcher,
    SessionStore,
    TaskStore,
    ToolRunner,
)
from mcp_app.protocol.results import ContinueAsTask, InputRequired, ToolError
from mcp_app.protocol.schemas import SchemaCache
from mcp_app.protocol.uritemplate import TemplateCache
from mcp_app.protocol.versions import Era, Feature, era_of, supports

Send = Callable[[Mapping[str, Any]], Awaitable[None]]

# RFC 5424 severities in increasing order, as MCP's LoggingLevel names them.
LOG_LEVELS: tuple[str, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)


@dataclass(slots=True)
class LegacySession:
    """The state of one handshake-era session, as loaded for this request."""

    id: str
    protocol_version: str
    client_capabilities: Mapping[str, Any] = field(default_factory=dict)
    client_info: Mapping[str, Any] = field(default_factory=dict)
    log_level: str | None = None
    subscriptions: frozenset[str] = frozenset()


@dataclass(slots=True)
class RequestContext:
    version: str
    catalog: CatalogSnapshot
    tools: ToolRunner
    resources: ResourceReader
    server_info: Mapping[str, Any]
    # Prompts served from elsewhere (an upstream's); None renders every prompt from its def.
    prompts: PromptSource | None = None
    # Completions of arguments served from elsewhere; None completes from the defs alone.
    completions: Completer | None = None
    # Subscriptions to resources served from elsewhere; None: the catalog's own only.
    watcher: ResourceWatcher | None = None
    client_capabilities: Mapping[str, Any] = field(default_factory=dict)
    client_info: Mapping[str, Any] | None = None
    request_id: Any = None
    progress_token: str | int | None = None
    # Minimum level for notifications/message on this request, as built (a 2026-07-28
    # request's ``_meta``, a legacy session's ``LegacySession.log_level``); None sends none.
    log_level: str | None = None
    session: LegacySession | None = None
    sessions: SessionStore | None = None
    send: Send | None = None
    # Key that makes pagination cursors tamper-evident, and the page size of list results.
    cursor_secret: bytes = b""
    page_size: int = 100
    # Legacy calls: sends server-to-client requests (elicitation, sampling, roots) on the
    # call's stream and waits for the answer. None when the call cannot stream.
    client_requests: ClientRequester | None = None
    # 2026-07-28 calls: the key sealing requestState, and who is asking.
    state_secret: bytes = b""
    principal: str = ""
    # Who the call is for, as sessions with upstream MCP servers are kept (services/context_factory:
    # "user:<id>", "session:<id>", or "once:<random>" for a caller known for one call only);
    # "" is no one in particular and shares the upstream's one session.
    caller: str = ""
    # The client's HTTP request headers (lower-cased names, every value), of which an upstream
    # gets those its operator lists (Upstream.forward_headers); empty off the wire (a worker).
    request_headers: Mapping[str, Sequence[str]] = field(default_factory=dict)
    # MCP tasks (2025-11-25 core, 2026-07-28 extension); None serves no task methods.
    tasks: TaskStore | None = None
    # What the handlers derive from the catalog's definitions and keep: compiled schemas,
    # parsed URI templates (the serving process's, from services/context_factory.py; by default
    # this context's own).
    schemas: SchemaCache = field(default_factory=SchemaCache)
    # The catalog item the request names (a tools/call's tool, a prompts/get's prompt, a
    # resources/read's resource or first matching template), as inbound classification
    # found it in ``catalog`` (inbound.Resolved.item); None: the handler looks it up (a
    # worker, try-it, an unknown name).
    named_item: CatalogItem | None = None
    # A resources/read's URI as ``named_item`` (its first matching template) matched it.
    named_variables: Mapping[str, str] | None = None
    templates: TemplateCache = field(default_factory=TemplateCache)

    # Decided once, from the version, when the context is built (not on every reading).
    era: Era = field(init=False)

    def __post_init__(self) -> None:
        self.era = era_of(self.version)

    def supports(self, feature: Feature) -> bool:
        return supports(self.version, feature)


@dataclass(frozen=True, slots=True)
class CallInputs:
    """What a ``tools/call`` hands its running tool besides the arguments.

    Decided by the handler from the request before the tool runs (a worker rebuilds it from
    the call's row), and passed to ``ToolCallContext``; the ``RequestContext`` never carries
    it, so nothing downstream reads a value some earlier step wrote there.
    """

    # 2026-07-28: the answers gathered so far (earlier rounds' from requestState, plus this
    # retry's inputResponses); a worker's are those its row keeps.
    answers: Mapping[str, Any] = field(default_factory=dict)
    # A 2026-07-28 retry of a call whose run is held open between rounds: that run's name,
    # from requestState (services/continuations.py resumes it instead of running the tool).
    continuation: str = ""
    # An inline tool may still turn the call into a task (``continue_as_task``); never on a
    # worker.
    may_become_task: bool = False


NO_INPUTS = CallInputs()


class ToolCallContext:
    """What an executor may do while it runs: report progress and log, and ask the client.

    Asking works in every era with the same code: a legacy call sends the request on its own
    stream and waits for the answer; a 2026-07-28 call raises ``InputRequired`` for the first
    unanswered question, and the client retries the whole call with the answers, so a tool
    that asks should ask before it changes anything (each round runs it again from the start).
    A run held open between rounds (``held``, for executors that relay another server's
    questions) waits for the retry's answers instead, and runs once.
    """

    def __init__(
        self,
        request: RequestContext,
        tool_name: str,
        inputs: CallInputs = NO_INPUTS,
        record: PolicyRecord | None = None,
    ) -> None:
        self.request = request
        self.tool_name = tool_name
        self.inputs = inputs
        # Where the endpoint's policies note what they did while the tool runs (a masked
        # notification, a confirmation): the call's own record, from ``run_tool``.
        self.record = record if record is not None else PolicyRecord()
        self._last_progress: float | None = None
        self._asked = 0
        self.held: HeldQuestions | None = None

    @property
    def can_stream(self) -> bool:
        return self.request.send is not None

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> bool:
        """Send ``notifications/progress`` if the caller asked for it; return whether sent.

        Values must strictly increase (all revisions, basic/utilities/progress); a value that
        does not is dropped rather than sent out of order.
        """
        req = self.request
        if req.progress_token is None or req.send is None:
            return False
        if self._last_progress is not None and progress <= self._last_progress:
            return False
        self._last_progress = progress
        params: dict[str, Any] = {"progressToken": req.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None and req.supports(Feature.PROGRESS_MESSAGE):
            params.update(self._guarded({"message": message}))
        await req.send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
        return True

    async def log(self, level: str, data: Any, logger: str | None = None) -> bool:
        """Send ``notifications/message`` at ``level`` if the caller's minimum allows it."""
        req = self.request
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}")
        if req.log_level is None or req.send is None:
            return False
        if LOG_LEVELS.index(level) < LOG_LEVELS.index(req.log_level):
            return False
        content: dict[str, Any] = {"data": data}
        if logger is not None:
            content["logger"] = logger
        params = {"level": level, **self._guarded(content)}
        await req.send({"jsonrpc": "2.0", "method": "notifications/message", "params": params})
        return True

    def _guarded(self, content: dict[str, Any]) -> dict[str, Any]:
        """``content`` as the endpoint's policies let the client see it (a mask rewrites a
        secret in a progress message or a log line as it does in the result)."""
        policies = self.request.catalog.policies
        if policies is None:
            return content
        call = PolicyCall(TOOLS_CALL, self.tool_name)
        return policies.notification(call, content, self.record.decisions)

    def continue_as_task(self) -> None:
        """Hand the rest of this call to a worker as an MCP task, when the request allows it.

        A tool that asks its questions first and then does long work calls this between the
        two: in a 2026-07-28 request that declared the tasks extension, the questions are
        settled by retries (input_required) and the call then answers with a task that runs
        the tool again, from the start, on a worker with the answers (ext-tasks "Task
        Creation": MRTR exchanges are resolved before the task is created). Everywhere else,
        a worker included, it returns and the tool just carries on.

        Raises:
            ContinueAsTask: the call becomes a task (the tools/call handler catches it).
        """
        if self.inputs.may_become_task:
            raise ContinueAsTask()

    def form_question(self, message: str, requested_schema: Mapping[str, Any]) -> Question:
        """An ``elicitation/create`` form: the user fills in ``requested_schema``."""
        params: dict[str, Any] = {
            "mode": "form",
            "message": message,
            "requestedSchema": dict(requested_schema),
        }
        if not self.request.supports(Feature.ELICITATION_URL):
            del params["mode"]  # before 2025-11-25 form was the only mode and had no field
        return Question("elicitation/create", params, "elicitation", "form")

    def url_question(self, message: str, url: str) -> Question:
        """An ``elicitation/create`` in URL mode: the user goes to ``url`` (sensitive input)."""
        params: dict[str, Any] = {"mode": "url", "message": message, "url": url}
        if self.request.era is Era.LEGACY:
            # 2025-11-25 correlates URL elicitations by id; 2026-07-28 removed it (MRTR state).
            params["elicitationId"] = secrets.token_urlsafe(16)
        return Question("elicitation/create", params, "elicitation", "url")

    def sampling_question(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
    ) -> Question:
        """A ``sampling/createMessage``: the client's model completes ``messages``."""
        params: dict[str, Any] = {"messages": [dict(m) for m in messages], "maxTokens": max_tokens}
        if system_prompt is not None:
            params["systemPrompt"] = system_prompt
        return Question("sampling/createMessage", params, "sampling")

    def roots_question(self) -> Question:
        """A ``roots/list``: the client names its roots."""
        return Question("roots/list", {}, "roots")

    def can_ask(self, capability: str, mode: str | None = None) -> bool:
        """Whether this request's client declared ``capability`` (and elicitation ``mode``)."""
        return _declares(self.request.client_capabilities, capability, mode)

    async def elicit(
        self, message: str, requested_schema: Mapping[str, Any], *, key: str | None = None
    ) -> dict[str, Any]:
        """Ask the user to fill in a form; return the ``ElicitResult`` (action, content)."""
        return await self._ask_one(self.form_question(message, requested_schema), key)

    async def elicit_url(self, message: str, url: str, *, key: str | None = None) -> dict[str, Any]:
        """Send the user to ``url`` (for anything sensitive); return the ``ElicitResult``."""
        return await self._ask_one(self.url_question(message, url), key)

    async def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        key: str | None = None,
    ) -> dict[str, Any]:
        """Ask the client's model for a completion; return the ``CreateMessageResult``."""
        question = self.sampling_question(
            messages, max_tokens=max_tokens, system_prompt=system_prompt
        )
        return await self._ask_one(question, key)

    async def list_roots(self, *, key: str | None = None) -> dict[str, Any]:
        """Ask the client for its roots; return the ``ListRootsResult``."""
        return await self._ask_one(self.roots_question(), key)

    async def ask(self, questions: Mapping[str, Question]) -> dict[str, dict[str, Any]]:
        """Ask several questions at once; return the answers by key.

        A 2026-07-28 call puts every unanswered question in one ``input_required`` round; a
        legacy call asks them one after another on its stream. Keys must be stable across
        the rounds of one call (the same question keeps its key).
        """
        req = self.request
        for question in questions.values():
            self._check_can_ask(question)
        if req.era is Era.MODERN:
            given = self.inputs.answers
            answers = {
                key: dict(given[key])
                for key, question in questions.items()
                if valid_answer(question.method, given.get(key))
            }
            missing = {
                key: {"method": q.method, "params": dict(q.params)}
                for key, q in questions.items()
                if key not in answers
            }
            held = self.held
            if missing and held is None:
                raise InputRequired(missing)
            while missing and held is not None:
                # Held open: the next round's answers come back here; unusable ones are
                # asked again (basic/patterns/mrtr: SHOULD re-request).
                responses = await held.ask(missing)
                for key in list(missing):
                    if valid_answer(questions[key].method, responses.get(key)):
                        answers[key] = dict(responses[key])
                        del missing[key]
            return answers
        if req.client_requests is None:
            raise ToolError("This call cannot ask the client: it needs an event-stream response.")
        return {
            key: dict(await req.client_requests.request(question.method, question.params))
            for key, question in questions.items()
        }

    async def _ask_one(self, question: Question, key: str | None) -> dict[str, Any]:
        self._asked += 1
        # The n-th question of a call keeps its key across rounds unless the tool names it.
        key = key or f"{question.method.split('/')[0]}-{self._asked}"
        return (await self.ask({key: question}))[key]

    def _check_can_ask(self, question: Question) -> None:
        req = self.request
        if question.capability == "elicitation" and not req.supports(Feature.ELICITATION):
            raise ToolError(f"Protocol {req.version} has no elicitation: this tool needs it.")
        if self.can_ask(question.capability, question.mode):
            return
        mode = question.mode
        if req.era is Era.MODERN:
            needed: dict[str, dict[str, Any]] = {question.capability: {mode: {}} if mode else {}}
            raise MissingClientCapability(
                f"This tool needs the {question.capability} capability", needed
            )
        raise ToolError(
            f"This tool needs the client's {question.capability} capability"
            f"{f' ({mode} mode)' if mode else ''}, which this client did not declare."
        )


@dataclass(frozen=True, slots=True)
class Question:
    """One thing a tool asks the client: a server-to-client request and what it needs."""

    method: str
    params: Mapping[str, Any]
    capability: str
    mode: str | None = None


# What a usable answer to each question must contain; anything else is asked again
# (2026-07-28 basic/patterns/mrtr: missing or invalid answers SHOULD be re-requested).
_ANSWER_SHAPES: Final[Mapping[str, tuple[str, ...]]] = {
    "elicitation/create": ("action",),
    "sampling/createMessage": ("content",),
    "roots/list": ("roots",),
}


def valid_answer(method: str, answer: Any) -> bool:
    """Whether ``answer`` can be the response to a ``method`` request (else it is asked again)."""
    if not isinstance(answer, Mapping):
        return False
    if method == "elicitation/create" and answer.get("action") not in (
        "accept",
        "decline",
        "cancel",
    ):
        return False
    return all(key in answer for key in _ANSWER_SHAPES.get(method, ()))


def _declares(capabilities: Mapping[str, Any], capability: str, mode: str | None) -> bool:
    """Whether the client declared ``capability`` (and, for elicitation, ``mode``).

    An empty elicitation object means form mode only (2025-11-25 client/elicitation).
    """
    declared = capabilities.get(capability)
    if not isinstance(declared, Mapping):
        return False
    if mode is None:
        return True
    if not declared:
        return mode == "form"
    return mode in declared
