"""Replay: recorded calls of a tool run against both its live version and a draft's.

From an open draft and a tool it changes (or creates), ``replay_plan`` picks recorded
``tools/call`` rows from the call log by a filter (endpoint, client, status, time range),
newest first, up to ``sample`` calls. Only calls whose arguments the capture policy kept
whole can be replayed; those passed over are counted: arguments not recorded (metadata or
nothing kept, or cut at the byte cap) and arguments holding a redacted value, which counts
the values a mask policy replaced in the log (``[masked:email]``, or the replacement a mask
policy of the endpoint is configured with): a masked value replayed would run the call with
other arguments than the client sent.

``replay_run`` then checks each call against the draft's input schema (the protocol layer's
own validator: a call it refuses is reported, and not run against the draft), runs it
against both versions through ``services.try_it`` (the protocol layer's ``tools/call``,
recorded as an admin test call, never as client traffic) and compares: the outcome, a
structural diff of the results (JSON paths changed, added, removed), the error messages and
the durations. Both versions run inline, each call bounded by ``CALL_SECONDS`` and the whole
run by ``RUN_SECONDS`` (calls past it are counted as not run), so a replay fits a request.

Tools whose kind reaches another system (``Executor.reaches_outside``: HTTP, MCP upstream)
and whose annotations say neither read-only nor idempotent, in either version, may repeat a
side effect there: they run only when ``confirm`` is ``"<tool>:<number of calls>"``.

Secrets stay redacted: what is kept of arguments, results and error messages passes the
call log's redaction (``calllog.capture``: secret-looking keys, the tools' listed fields and
secret input fields, their values scrubbed from every other string), then its byte cap. The
run is stored as a ``ReplayRun``; ``replay_results`` gives what a viewer may see of it.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from mcp_app.executors import get_executors
from mcp_app.models import CallLog, Draft, Endpoint, Policy, ReplayRun, Tool
from mcp_app.models.call_log import STATUS_CHOICES
from mcp_app.protocol.errors import McpError
from mcp_app.protocol.schemas import describe_error, first_error
from mcp_app.services import teams
from mcp_app.services.calllog.capture import (
    REDACTED,
    Capture,
    CapturePolicy,
    capture_call,
    parse_redact_names,
    redact,
    scrub,
    secret_fields_of_schema,
)
from mcp_app.services.calllog.recorder import ADMIN_TEST_HTTP_METHOD
from mcp_app.services.catalog_io import TOOL_FIELDS
from mcp_app.services.catalog_writes import tool_values
from mcp_app.services.drafts import draft_merged_entry, drafts_visible
from mcp_app.services.policies.builtin import MASKED_MARKER, mask_markers
from mcp_app.services.try_it import TryOutcome, tool_try

# A replay runs in the request that asks for it: at most this many calls, ...
MAX_SAMPLE = 50
DEFAULT_SAMPLE = 20
# ... each version of each call stopped after this many seconds (a timed-out tool error) ...
CALL_SECONDS = 10.0
# ... and no call started once the run has taken this long.
RUN_SECONDS = 60.0
# Rows looked at, newest first, to find the sample's replayable calls.
MAX_SCANNED = 2000
# What is kept of each payload (arguments, each result), after redaction.
PAYLOAD_BYTES = 2048
# A call's diff lists at most this many paths, each value shown up to this many characters.
MAX_DIFF_PATHS = 40
PREVIEW_CHARS = 200
ERROR_CHARS = 500
DIFF_DEPTH = 32
# The status filter's "any failure" (as /audit/'s): every status but ok and running.
ANY_FAILURE = "failed"
FAILURE_STATUSES = tuple(
    value for value, _ in STATUS_CHOICES if value not in (CallLog.Status.OK, CallLog.Status.RUNNING)
)
STATUSES = {value for value, _ in STATUS_CHOICES} | {ANY_FAILURE}

# Each version's outcome of a call.
OK, ERROR, REFUSED, MISSING = "ok", "error", "refused", "missing"
# A call's verdict.
IDENTICAL, CHANGED = "identical", "changed"


class ReplayError(Exception):
    """The replay cannot run as asked (bad input); nothing ran. ``errors``: field -> message."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors = dict(errors)
        super().__init__(" ".join(f"{name}: {message}" for name, message in self.errors.items()))


class ReplayConfirmationRequired(ReplayError):
    """The tool may have side effects elsewhere: the replay needs ``confirm == expected``."""

    def __init__(self, tool: str, count: int, given: str) -> None:
        self.tool = tool
        self.count = count
        self.expected = confirmation(tool, count)
        problem = "does not match" if given else "is required"
        super().__init__(
            {
                "confirm": (
                    f"The tool {tool} may change things elsewhere (its kind sends requests out "
                    "and its annotations say neither read-only nor idempotent): replaying "
                    f"{count} call{'s' if count != 1 else ''} needs the confirmation "
                    f"{self.expected!r}; it {problem}. Nothing was run."
                )
            }
        )


def confirmation(tool: str, count: int) -> str:
    """The ``confirm`` value a replay of ``count`` calls of ``tool`` with side effects takes."""
    return f"{tool}:{count}"


@dataclass(frozen=True)
class ReplayFilter:
    """Which recorded calls to replay, all optional but the sample size."""

    endpoint: str = ""  # an endpoint's slug
    client_name: str = ""
    status: str = ""  # a CallLog status, or "failed": any failure
    since: datetime | None = None
    until: datetime | None = None
    sample: int = DEFAULT_SAMPLE

    def as_dict(self) -> dict[str, Any]:
        return {
            "endpoint": self.endpoint,
            "client_name": self.client_name,
            "status": self.status,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "sample": self.sample,
        }


def replay_filter(data: Mapping[str, Any]) -> ReplayFilter:
    """Parse a filter given as plain values (a form's or a JSON body's).

    Raises:
        ReplayError: a value is not what it should be, by field.
    """
    errors: dict[str, str] = {}
    texts = {}
    for name in ("endpoint", "client_name", "status"):
        value = data.get(name) or ""
        if not isinstance(value, str) or "\x00" in value or len(value) > 200:
            errors[name] = "Expected a short text."
            value = ""
        texts[name] = value.strip()
    if texts["status"] and texts["status"] not in STATUSES:
        errors["status"] = f"Expected one of: {', '.join(sorted(STATUSES))}."
    times: dict[str, datetime | None] = {}
    for name in ("since", "until"):
        value = data.get(name)
        if isinstance(value, datetime):
            times[name] = value
        elif value in (None, ""):
            times[name] = None
        else:
            parsed = parse_datetime(value) if isinstance(value, str) and len(value) < 64 else None
            if parsed is None:
                errors[name] = "Expected a date and time (ISO 8601)."
            elif timezone.is_naive(parsed):
                parsed = timezone.make_aware(parsed)
            times[name] = parsed
    since, until = times.get("since"), times.get("until")
    if since and until and since >= until:
        errors["until"] = "The range ends before it starts."
    sample = data.get("sample", DEFAULT_SAMPLE)
    if isinstance(sample, str) and sample.strip().isdigit() and len(sample) < 6:
        sample = int(sample)
    if sample in (None, ""):
        sample = DEFAULT_SAMPLE
    if isinstance(sample, bool) or not isinstance(sample, int) or not 1 <= sample <= MAX_SAMPLE:
        errors["sample"] = f"Expected a number of calls from 1 to {MAX_SAMPLE}."
        sample = DEFAULT_SAMPLE
    if errors:
        raise ReplayError(errors)
    return ReplayFilter(
        endpoint=texts["endpoint"],
        client_name=texts["client_name"],
        status=texts["status"],
        since=since,
        until=until,
        sample=sample,
    )


@dataclass
class ReplayPlan:
    """The calls a replay would run, and what it needs to run them."""

    draft: Draft
    tool: str
    filters: ReplayFilter
    live: Tool | None  # None: the draft creates the tool
    drafted: Tool
    calls: list[CallLog] = field(default_factory=list)
    skipped_unrecorded: int = 0
    skipped_redacted: int = 0

    @property
    def needs_confirmation(self) -> bool:
        """Whether a version may have side effects elsewhere (and there is a call to run)."""
        return bool(self.calls) and any(
            side_effects(tool) for tool in (self.live, self.drafted) if tool is not None
        )

    @property
    def expected_confirmation(self) -> str:
        return confirmation(self.tool, len(self.calls)) if self.needs_confirmation else ""


def side_effects(tool: Tool) -> bool:
    """Whether running ``tool`` again may change things elsewhere: its kind reaches another
    system (an unknown kind is assumed to) and its annotations say neither read-only nor
    idempotent."""
    executor = get_executors().get(tool.kind)
    reaches = executor.reaches_outside if executor is not None else True
    return reaches and not (tool.read_only_hint or tool.idempotent_hint)


def replay_tools(draft: Draft) -> list[str]:
    """The names of the tools ``draft`` changes or creates, which a replay may run."""
    return sorted(
        str(entry["name"])
        for entry in draft.document.get("tools") or []
        if isinstance(entry, Mapping) and isinstance(entry.get("name"), str)
    )


def replay_plan(draft: Draft, *, tool: str, filters: ReplayFilter, user: Any) -> ReplayPlan:
    """Pick the calls a replay of ``draft``'s ``tool`` would run; nothing runs.

    Raises:
        ReplayError: the draft is not open or not seen by ``user``, does not change ``tool``,
            or the filter names an endpoint ``user`` does not see.
    """
    if not drafts_visible(user).filter(pk=draft.pk).exists():
        raise ReplayError({"draft": "No such draft."})
    if draft.status != Draft.Status.OPEN:
        raise ReplayError({"draft": f"The draft is {draft.status}: only an open draft replays."})
    if tool not in replay_tools(draft):
        names = ", ".join(replay_tools(draft)) or "none"
        raise ReplayError(
            {"tool": f"The draft does not change a tool named {tool!r} (it changes: {names})."}
        )
    entry = draft_merged_entry(draft, "tools", tool, user=user)
    if entry is None:
        raise ReplayError({"tool": f"The draft's {tool} cannot be built as it would publish."})
    slugs = set(entry.get("endpoints") or ())
    live = _live_tool(tool, slugs, user)
    if live is not None:
        slugs |= set(live.endpoints.values_list("slug", flat=True))
    endpoints = teams.visible(Endpoint.objects.filter(slug__in=slugs), user)
    if filters.endpoint:
        if filters.endpoint not in slugs:
            raise ReplayError(
                {"endpoint": f"The tool {tool} is not on an endpoint {filters.endpoint!r}."}
            )
        endpoints = endpoints.filter(slug=filters.endpoint)
    plan = ReplayPlan(
        draft=draft, tool=tool, filters=filters, live=live, drafted=_draft_tool(tool, entry)
    )
    endpoint_ids = list(endpoints.values_list("pk", flat=True))
    markers = _mask_markers(endpoint_ids)
    for row in _recorded(tool, endpoint_ids, filters, user):
        replayable = _replayable(row, markers.get(row.endpoint_id, frozenset()))
        if replayable == "unrecorded":
            plan.skipped_unrecorded += 1
        elif replayable == "redacted":
            plan.skipped_redacted += 1
        else:
            plan.calls.append(row)
            if len(plan.calls) >= filters.sample:
                break
    return plan


def replay_run(
    draft: Draft, *, tool: str, filters: ReplayFilter, user: Any, confirm: str = ""
) -> ReplayRun:
    """Replay the calls ``replay_plan`` picks against the live tool and the draft's; store
    and return the run.

    Raises:
        ReplayConfirmationRequired: the tool may have side effects elsewhere and ``confirm``
            is not ``"<tool>:<number of calls>"``; nothing ran.
        ReplayError: as ``replay_plan``.
    """
    plan = replay_plan(draft, tool=tool, filters=filters, user=user)
    if plan.needs_confirmation and (confirm or "").strip() != plan.expected_confirmation:
        raise ReplayConfirmationRequired(tool, len(plan.calls), (confirm or "").strip())
    user_id = user.pk if user is not None and getattr(user, "is_authenticated", False) else None
    live = _inline(plan.live) if plan.live is not None else None
    drafted = _inline(plan.drafted)
    run = ReplayRun(
        draft=draft,
        tool=tool,
        filter=filters.as_dict(),
        sample=filters.sample,
        created_by_id=user_id,
        confirmed=plan.needs_confirmation,
        skipped_unrecorded=plan.skipped_unrecorded,
        skipped_redacted=plan.skipped_redacted,
    )
    started = time.monotonic()
    results = []
    for row in plan.calls:
        if time.monotonic() - started > RUN_SECONDS:
            run.not_run += 1
            continue
        comparison = _compare(row, live, drafted, user_id)
        results.append(comparison)
        run.calls += 1
        if comparison["verdict"] == REFUSED:
            run.refused += 1
        elif comparison["verdict"] == CHANGED:
            run.changed += 1
        else:
            run.identical += 1
    run.results = results
    run.save()
    return run


def replay_runs_visible(user: Any) -> Any:
    """The stored runs ``user`` sees: those of the drafts they see."""
    return ReplayRun.objects.filter(draft__in=drafts_visible(user)).select_related("draft")


def replay_summary(run: ReplayRun) -> str:
    """One sentence: "of 40 calls: 3 refused by the draft's schema, 2 results changed, 35
    identical", with what was passed over."""
    plural = "s" if run.calls != 1 else ""
    text = (
        f"of {run.calls} call{plural}: {run.refused} refused by the draft's schema, "
        f"{run.changed} result{'s' if run.changed != 1 else ''} changed, {run.identical} identical"
    )
    passed = []
    if run.skipped_unrecorded:
        passed.append(f"{run.skipped_unrecorded} skipped (arguments not recorded)")
    if run.skipped_redacted:
        passed.append(f"{run.skipped_redacted} skipped (arguments redacted, or masked by a policy)")
    if run.not_run:
        passed.append(f"{run.not_run} not run (the {RUN_SECONDS:.0f} s budget ran out)")
    return text + (f"; {', '.join(passed)}" if passed else "")


def replay_results(run: ReplayRun, *, payloads: bool) -> list[dict[str, Any]]:
    """Each call's comparison as a viewer may see it: without ``payloads`` (the permission
    to see recorded arguments and results), its outcomes, verdict and durations only."""
    if payloads:
        return list(run.results)
    kept = []
    for item in run.results:
        kept.append(
            {
                **{key: item.get(key) for key in ("call", "at", "endpoint", "status", "verdict")},
                **{
                    side: {
                        key: (item.get(side) or {}).get(key) for key in ("outcome", "duration_ms")
                    }
                    for side in ("live", "draft")
                },
            }
        )
    return kept


# ------------------------------------------------------------------------------- picking


def _live_tool(name: str, slugs: Iterable[str], user: Any) -> Tool | None:
    rows = list(teams.visible(Tool.objects.filter(name=name), user))
    if len(rows) > 1:  # names are unique per endpoint: the one on the draft's endpoints
        rows = [row for row in rows if row.endpoints.filter(slug__in=list(slugs)).exists()]
    return rows[0] if len(rows) == 1 else None


def _draft_tool(name: str, entry: Mapping[str, Any]) -> Tool:
    """The draft's version of the tool as an unsaved row, with the defaults a save applies."""
    tool = Tool(name=name)
    values = tool_values(tool=tool, data={key: entry[key] for key in TOOL_FIELDS if key in entry})
    for key, value in values.items():
        setattr(tool, key, value)
    return tool


def _inline(tool: Tool) -> Tool:
    """A copy of ``tool`` that runs inline (under the replay's bound), never on a worker."""
    twin = copy.copy(tool)
    twin.execution_mode = Tool.Execution.INLINE
    return twin


def _recorded(
    tool: str, endpoint_ids: Sequence[int], filters: ReplayFilter, user: Any
) -> Iterable[CallLog]:
    calls = teams.visible(CallLog.objects.all(), user).filter(
        rpc_method="tools/call",
        target=tool,
        message_type=CallLog.MessageType.REQUEST,
        endpoint_id__in=endpoint_ids,
    )
    # Client traffic only: an admin test call (try-it, an earlier replay) is not replayed.
    calls = calls.exclude(http_method=ADMIN_TEST_HTTP_METHOD)
    if filters.client_name:
        calls = calls.filter(client_name=filters.client_name)
    if filters.status == ANY_FAILURE:
        calls = calls.filter(status__in=FAILURE_STATUSES)
    elif filters.status:
        calls = calls.filter(status=filters.status)
    if filters.since is not None:
        calls = calls.filter(created_at__gte=filters.since)
    if filters.until is not None:
        calls = calls.filter(created_at__lt=filters.until)
    return calls.order_by("-id")[:MAX_SCANNED].iterator(chunk_size=200)


def _mask_markers(endpoint_ids: Sequence[int]) -> dict[int | None, frozenset[str]]:
    """By endpoint, the texts its mask policies (not off) write in place of masked values."""
    markers: dict[int | None, frozenset[str]] = {}
    policies = Policy.objects.filter(endpoint_id__in=endpoint_ids, kind="mask").exclude(
        mode=Policy.Mode.OFF
    )
    for endpoint_id, config in policies.values_list("endpoint_id", "config"):
        found = mask_markers(config) if isinstance(config, Mapping) else frozenset()
        markers[endpoint_id] = markers.get(endpoint_id, frozenset()) | found
    return markers


def _replayable(row: CallLog, markers: frozenset[str] = frozenset()) -> str:
    """ "": the row's arguments were kept whole; else why not ("unrecorded", "redacted":
    a value redacted by the capture policy or masked by a policy, ``markers`` its texts)."""
    if row.capture != Capture.FULL:
        return "unrecorded"
    arguments = row.arguments
    if arguments is None:
        # Kept in full with no arguments: a call that sent none (a cut would leave a marker).
        return ""
    if not isinstance(arguments, Mapping) or _is_cut(arguments):
        return "unrecorded"
    return "redacted" if _holds_redaction(arguments, markers, 0) else ""


def _is_cut(arguments: Mapping[str, Any]) -> bool:
    # capture._fit's marker in place of a payload over the byte cap.
    return arguments.get("truncated") is True and {"bytes", "kept_bytes", "head"} <= set(arguments)


def _holds_redaction(value: Any, markers: frozenset[str], depth: int) -> bool:
    if isinstance(value, str):
        return (
            REDACTED in value
            or MASKED_MARKER.search(value) is not None
            or any(marker in value for marker in markers)
        )
    if depth > DIFF_DEPTH:
        return True
    if isinstance(value, Mapping):
        return any(_holds_redaction(item, markers, depth + 1) for item in value.values())
    if isinstance(value, list):
        return any(_holds_redaction(item, markers, depth + 1) for item in value)
    return False


# ----------------------------------------------------------------------------- comparing


@dataclass
class _Side:
    outcome: str
    result: Any = None
    error: str = ""
    duration_ms: float | None = None


def _run(tool: Tool | None, arguments: Mapping[str, Any], user_id: int | None) -> _Side:
    if tool is None:
        return _Side(MISSING, error="The tool does not exist live.")
    try:
        refused = first_error(tool.input_schema or {}, arguments)
    except McpError as exc:  # a schema that cannot be evaluated refuses every call
        return _Side(REFUSED, error=exc.message)
    if refused is not None:
        return _Side(REFUSED, error=f"Invalid arguments: {describe_error(refused)}")
    outcome: TryOutcome = tool_try(
        tool=tool, arguments=arguments, user_id=user_id, timeout_seconds=CALL_SECONDS
    )
    error = outcome.error_message
    if not error and outcome.result is not None and outcome.result.get("isError"):
        error = _first_text(outcome.result.get("content"))
    return _Side(
        ERROR if outcome.is_error else OK,
        result=outcome.result,
        error=error,
        duration_ms=round(outcome.duration_ms, 3),
    )


def _compare(row: CallLog, live: Tool | None, drafted: Tool, user_id: int | None) -> dict[str, Any]:
    arguments = dict(row.arguments or {})
    draft_side = _run(drafted, arguments, user_id)
    live_side = _run(live, arguments, user_id)
    names, secret_fields = _redaction(live, drafted)
    found: set[str] = set()
    cleaned = [
        redact(value, names | secret_fields, found)
        for value in (arguments, live_side.result, draft_side.result)
    ]
    errors = [live_side.error, draft_side.error]
    if found:
        cleaned = [scrub(value, found) for value in cleaned]
        errors = [scrub(error, found) for error in errors]
    clean_arguments, live_result, draft_result = cleaned
    # A version that did not run (refused, missing) has nothing to compare, only an outcome.
    both = live_result is not None and draft_result is not None
    diff, more = json_diff(live_result, draft_result) if both else ([], 0)
    if draft_side.outcome == REFUSED:
        verdict = REFUSED
    elif (
        live_side.outcome == draft_side.outcome
        and live_result == draft_result
        and errors[0] == errors[1]
    ):
        verdict = IDENTICAL
    else:
        verdict = CHANGED
    return {
        "call": row.pk,
        "at": row.created_at.isoformat(),
        "endpoint": row.endpoint_slug,
        "client": row.client_name,
        "status": row.status,
        "arguments": _fit(clean_arguments),
        "verdict": verdict,
        "live": _side(live_side, live_result, errors[0]),
        "draft": _side(draft_side, draft_result, errors[1]),
        "diff": diff,
        "diff_more": more,
    }


def _redaction(*tools: Tool | None) -> tuple[frozenset[str], frozenset[str]]:
    """The field names either version's capture policy redacts, and their secret inputs."""
    names: set[str] = set()
    secret_fields: set[str] = set()
    for tool in tools:
        if tool is not None:
            names |= parse_redact_names(tool.capture_redact or "")
            secret_fields |= secret_fields_of_schema(tool.input_schema)
    return frozenset(names), frozenset(secret_fields)


def _side(side: _Side, result: Any, error: str) -> dict[str, Any]:
    if len(error) > ERROR_CHARS:
        error = error[: ERROR_CHARS - 1] + "…"
    return {
        "outcome": side.outcome,
        "duration_ms": side.duration_ms,
        "error": error,
        "result": _fit(result),
    }


def _fit(value: Any) -> Any:
    """``value`` (already redacted) cut to ``PAYLOAD_BYTES`` by the call log's own rule."""
    kept, _ = capture_call(value, None, CapturePolicy(Capture.FULL, PAYLOAD_BYTES), frozenset())
    return kept.value


def _first_text(content: Any) -> str:
    if isinstance(content, list):
        for block in content:
            if isinstance(block, Mapping) and isinstance(block.get("text"), str):
                return str(block["text"])
    return ""


_ABSENT = object()


def json_diff(
    live: Any, draft: Any, *, limit: int = MAX_DIFF_PATHS
) -> tuple[list[dict[str, Any]], int]:
    """The JSON paths where ``draft`` differs from ``live``: each ``{"path", "change"
    ("changed", "added", "removed"), "live", "draft"}`` with values previewed; at most
    ``limit`` of them, and how many more there are."""
    changes: list[dict[str, Any]] = []
    more = 0

    def note(path: str, change: str, before: Any, after: Any) -> None:
        nonlocal more
        if len(changes) >= limit:
            more += 1
            return
        changes.append(
            {"path": path, "change": change, "live": _preview(before), "draft": _preview(after)}
        )

    def walk(before: Any, after: Any, path: str, depth: int) -> None:
        if before == after:
            return
        if depth < DIFF_DEPTH and isinstance(before, Mapping) and isinstance(after, Mapping):
            for key, value in before.items():
                if key in after:
                    walk(value, after[key], _key_path(path, str(key)), depth + 1)
                else:
                    note(_key_path(path, str(key)), "removed", value, _ABSENT)
            for key, value in after.items():
                if key not in before:
                    note(_key_path(path, str(key)), "added", _ABSENT, value)
        elif depth < DIFF_DEPTH and isinstance(before, list) and isinstance(after, list):
            for index in range(max(len(before), len(after))):
                item = f"{path}[{index}]"
                if index >= len(after):
                    note(item, "removed", before[index], _ABSENT)
                elif index >= len(before):
                    note(item, "added", _ABSENT, after[index])
                else:
                    walk(before[index], after[index], item, depth + 1)
        else:
            note(path, "changed", before, after)

    walk(live, draft, "$", 0)
    return changes, more


def _key_path(path: str, key: str) -> str:
    if key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{orjson.dumps(key).decode()}]"


def _preview(value: Any) -> str | None:
    if value is _ABSENT:
        return None
    text = orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
