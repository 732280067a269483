"""Rate limits, concurrency caps and quotas: which apply to a call, and counting them in Redis.

The transport asks ``aadmit`` before it dispatches a call (``tools/call``, ``resources/read``,
``prompts/get``; nothing else is ever limited). The endpoint's limits (``models.RateLimit``)
travel with its cached state (``services.endpoint_directory.EndpointState.limits``): read with the
endpoint row, dropped with it when any process changes a limit (``limits_changed``,
``services/invalidation.py``). A call no limit matches costs no query and no Redis round
trip; one that some limit matches costs one (``_ADMIT``, a Lua script: every matching limit
is checked and, only if all pass, counted, atomically across every process), plus one more at
its end to give back its concurrency slots when a cap applies.

Counts live under ``redis_key("rl:...")``: a token bucket per limit and subject (a hash), a
sorted set of held concurrency slots (score: when the slot expires if its holder died), and
a counter per quota period. The subject of a per-caller limit is the OAuth user, or on a public
endpoint the client address (``auth.addresses.client_address``), never the MCP session: a new
session does not buy a new budget.

When Redis cannot be reached within ``MCP_RATE_LIMIT_TIMEOUT_SECONDS``, a call goes through
unless a matching limit says fail closed (``on_redis_down``); either way it is logged and
counted (``mcphost_rate_limit_redis_errors_total``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from django.conf import settings
from redis.exceptions import RedisError

from mcp_app.conf import get_conf, redis_key
from mcp_app.models import RateLimit
from mcp_app.models.limits import WINDOW_SECONDS
from mcp_app.services import invalidation, metrics, redis_sentinel, resp
from mcp_app.services.resp import RespError

logger = logging.getLogger(__name__)

# Which kind of item each limited method acts on; other methods are never limited.
LIMITED_METHODS: Final = {
    "tools/call": "tool",
    "resources/read": "resource",
    "prompts/get": "prompt",
}
# What a client is told to wait when a concurrency cap is full (a slot may free any moment),
# and when Redis is down for a fail-closed limit.
CONCURRENCY_RETRY_SECONDS: Final = 1
REDIS_DOWN_RETRY_SECONDS: Final = 5
# While Redis is unreachable, the warning is logged at most this often per process (every
# such call is counted in the metrics).
OUTAGE_LOG_SECONDS: Final = 10.0
_last_outage_log = [float("-inf")]
# Slots being given back for callers that went away (a reference keeps each task alive).
_giving_back: set[asyncio.Future[None]] = set()
# The key of a refusal's data in a tool error result's ``_meta``.
META_KEY: Final = "mcphost/rateLimit"

# KEYS: one per check. ARGV: the slot member, the slot lifetime (s), then 3 values per check:
# its kind ("r" rate, "c" concurrency, "q" quota) and two numbers: a rate's bucket size and
# refill per second; a cap's size; a quota's size and when its period ends (Unix time; a
# fixed number for the whole period, so a limit's arguments are encoded once, not per call).
# Returns {0} when every check passed (all counted), else {i, wait}: check i refused and
# the longest wait among the refusals, in seconds (a string: Lua numbers lose their fraction).
_ADMIT: Final = resp.Script("""
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local worst, wait = 0, 0
local tokens = {}
for i = 1, #KEYS do
  local kind, a, b = ARGV[3 * i], tonumber(ARGV[3 * i + 1]), tonumber(ARGV[3 * i + 2])
  local need = 0
  if kind == 'r' then
    local held = redis.call('HMGET', KEYS[i], 'tokens', 'at')
    local have = tonumber(held[1]) or a
    local at = tonumber(held[2]) or now
    have = math.min(a, have + math.max(0, now - at) * b)
    tokens[i] = have
    if have < 1 then need = (1 - have) / b end
  elseif kind == 'c' then
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
    if redis.call('ZCARD', KEYS[i]) >= a then need = tonumber(ARGV[2 + 3 * #KEYS + 1]) end
  else
    if tonumber(redis.call('GET', KEYS[i]) or '0') >= a then need = math.max(1, b - now) end
  end
  if need > wait then worst, wait = i, need end
end
if worst > 0 then return {worst, tostring(wait)} end
for i = 1, #KEYS do
  local kind, a, b = ARGV[3 * i], tonumber(ARGV[3 * i + 1]), tonumber(ARGV[3 * i + 2])
  if kind == 'r' then
    redis.call('HSET', KEYS[i], 'tokens', tostring(tokens[i] - 1), 'at', tostring(now))
    redis.call('EXPIRE', KEYS[i], math.ceil(a / b) + 1)
  elseif kind == 'c' then
    redis.call('ZADD', KEYS[i], now + tonumber(ARGV[2]), ARGV[1])
    redis.call('EXPIRE', KEYS[i], tonumber(ARGV[2]))
  else
    redis.call('INCR', KEYS[i])
    redis.call('EXPIRE', KEYS[i], math.ceil(math.max(1, b - now)) + 3600)
  end
end
return {0}
""")


# A call that became an MCP task hands its slots over to the task. KEYS: the slots' sorted
# sets, then the task's set of them, then the task's "ended" mark. ARGV: the call's member,
# the task's member, the slot lifetime (s). A task that already ended frees the slots instead.
_HAND_OVER: Final = resp.Script("""
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local ended = redis.call('EXISTS', KEYS[#KEYS]) == 1
for i = 1, #KEYS - 2 do
  redis.call('ZREM', KEYS[i], ARGV[1])
  if not ended then
    redis.call('ZADD', KEYS[i], now + tonumber(ARGV[3]), ARGV[2])
    redis.call('EXPIRE', KEYS[i], tonumber(ARGV[3]))
    redis.call('SADD', KEYS[#KEYS - 1], KEYS[i])
  end
end
if not ended then redis.call('EXPIRE', KEYS[#KEYS - 1], tonumber(ARGV[3])) end
return 0
""")

# A background call ended: free the slots handed to it. KEYS: its set of slots, its "ended"
# mark, then the slots' sorted sets as last read from that set; ARGV: its member, how long the
# mark stays (a hand-over arriving later frees instead). Every key it touches is among KEYS
# (Redis Cluster and ACLs require it), so when the set names a slot not passed (a hand-over
# came between the read and the run) it changes nothing and returns 1: read the set again.
_TASK_ENDED: Final = resp.Script("""
local passed = {}
for i = 3, #KEYS do passed[KEYS[i]] = true end
for _, key in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if not passed[key] then return 1 end
end
for i = 3, #KEYS do redis.call('ZREM', KEYS[i], ARGV[1]) end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[2], '1', 'EX', tonumber(ARGV[2]))
return 0
""")
# Reads of a task's slots before its end is recorded: a call hands its slots over once, so
# a second read always matches.
TASK_ENDED_ATTEMPTS: Final = 3
# How long a background call's "ended" mark stays: longer than a task handle takes to reach
# the process that hands the slots over.
TASK_ENDED_MARK_SECONDS: Final = 600
DAY_SECONDS: Final = 86400


@dataclass(frozen=True, slots=True)
class Rule:
    """One enabled ``RateLimit`` row, as the hot path reads it."""

    id: int
    per_caller: bool
    target_kind: str
    target_name: str
    label: str
    fail_closed: bool
    # A token bucket: its size and refill per second (None: no rate).
    bucket: tuple[int, float] | None
    max_concurrent: int | None
    quota: int | None
    quota_period: str
    # Where its counts live: ``<namespace>:rl:<id>:`` (read once, not per call).
    prefix: str = ""
    # Its checks' fixed ``_ADMIT`` arguments, encoded once (a quota's period end is added
    # per call).
    rate_args: resp.Bulks | None = None
    cap_args: resp.Bulks | None = None
    quota_args: resp.Bulks | None = None

    @classmethod
    def of(cls, row: RateLimit) -> Rule:
        bucket = None
        if row.rate is not None:
            bucket = (row.burst or row.rate, row.rate / WINDOW_SECONDS[row.window])
        return cls(
            id=row.pk,
            per_caller=row.scope == RateLimit.Scope.CALLER,
            target_kind=row.target_kind,
            target_name=row.target_name,
            label=row.label,
            fail_closed=row.on_redis_down == RateLimit.RedisDown.CLOSED,
            bucket=bucket,
            max_concurrent=row.max_concurrent,
            quota=row.quota,
            quota_period=row.quota_period,
            prefix=redis_key(f"rl:{row.pk}:"),
            rate_args=resp.Bulks(["r", *bucket]) if bucket is not None else None,
            cap_args=(
                resp.Bulks(["c", row.max_concurrent, 0]) if row.max_concurrent is not None else None
            ),
            quota_args=resp.Bulks(["q", row.quota]) if row.quota is not None else None,
        )

    def matches(self, kind: str, target: str | None) -> bool:
        return not self.target_kind or (self.target_kind == kind and self.target_name == target)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a call may not run now: the limit, what about it refused, when to retry."""

    rule: Rule
    reason: str  # "rate", "concurrency", "quota" or "unavailable" (Redis down, fail closed)
    retry_after: int

    @property
    def message(self) -> str:
        what = {
            "rate": "Rate limit reached",
            "concurrency": "Too many calls running at once",
            "quota": "Quota used up",
            "unavailable": "The rate limiter is unavailable",
        }[self.reason]
        return f"{what} ({self.rule.label}); retry after {self.retry_after} s."

    @property
    def data(self) -> dict[str, Any]:
        """The machine-readable part, in a JSON-RPC error's ``data`` and a tool error's
        ``_meta`` (``retryAfterSeconds`` as ToolHive sends it)."""
        return {
            "retryAfterSeconds": self.retry_after,
            "limit": {
                "id": self.rule.id,
                "reason": self.reason,
                "scope": "caller" if self.rule.per_caller else "endpoint",
                "target": (
                    {"kind": self.rule.target_kind, "name": self.rule.target_name}
                    if self.rule.target_kind
                    else None
                ),
                "description": self.rule.label,
            },
        }


@dataclass(slots=True)
class Lease:
    """The concurrency slots one admitted call holds; ``arelease`` gives them back."""

    keys: tuple[str, ...] = ()
    member: str = ""

    async def arelease(self) -> None:
        if not self.keys:
            return
        try:
            await _client().pipeline([[b"ZREM", key, self.member] for key in self.keys])
        except (RespError, OSError, TimeoutError):
            # The slot expires by itself (MCP_RATE_LIMIT_SLOT_SECONDS).
            logger.warning("Could not give back a concurrency slot; it expires in time")

    async def ahand_over(self, call_id: str) -> None:
        """Keep the slots until background call ``call_id`` (an MCP task) ends, when
        ``abackground_call_ended`` frees them."""
        if not self.keys:
            return
        task = _task_keys(call_id)
        slot_seconds = get_conf().MCP_RATE_LIMIT_SLOT_SECONDS
        args: list[resp.Arg] = [self.member, _task_member(call_id), slot_seconds]
        try:
            await _client().evalsha(_HAND_OVER, [*self.keys, *task], args)
        except (RespError, OSError, TimeoutError):
            logger.warning("Could not hand concurrency slots to a task; they expire in time")


NO_LEASE: Final = Lease()


def _task_keys(call_id: str) -> list[str]:
    return [redis_key(f"rl:task:{call_id}:slots"), redis_key(f"rl:task:{call_id}:ended")]


def _task_member(call_id: str) -> str:
    return f"task:{call_id}"


async def abackground_call_ended(call_id: str) -> None:
    """Free the concurrency slots a background call held (the worker, a cancellation or the
    settling of a lost call says it ended); best effort, bounded by the limiter's timeout."""
    if not _url():
        return
    args: list[resp.Arg] = [_task_member(call_id), TASK_ENDED_MARK_SECONDS]
    # A connection of its own, closed at once: a Celery worker runs each call in an event
    # loop of its own (asyncio.run), which would leave a shared one open behind it.
    client = resp.Client(_url(), get_conf().MCP_RATE_LIMIT_TIMEOUT_SECONDS)
    task = _task_keys(call_id)
    try:
        for _attempt in range(TASK_ENDED_ATTEMPTS):
            slots = (await client.pipeline([[b"SMEMBERS", task[0]]]))[0]
            if await client.evalsha(_TASK_ENDED, [*task, *slots], args) == 0:
                return
        logger.warning("A background call's slots kept changing; they expire in time")
    except (RespError, OSError, TimeoutError):
        logger.warning("Could not free a background call's concurrency slots; they expire in time")
    finally:
        client.drop()


# -- which limits apply -----------------------------------------------------------------------


def rules_load(endpoint_id: int) -> tuple[Rule, ...]:
    """The endpoint's enabled limits, read from the database (with its endpoint state)."""
    rows = RateLimit.objects.filter(endpoint_id=endpoint_id, enabled=True).order_by("id")
    return tuple(Rule.of(row) for row in rows)


def limits_changed(*, endpoint_id: int) -> None:
    """Make every process re-read the endpoint's limits (after the change commits)."""
    invalidation.invalidate(endpoint_ids=[endpoint_id])


# -- counting ---------------------------------------------------------------------------------


def caller_subject(*, user_id: int | None, client_id: str, address: str) -> str:
    """The subject of a per-caller limit: the OAuth user (or a user-less OAuth client), else
    the client address; never the MCP session."""
    if user_id is not None:
        return f"user:{user_id}"
    return f"client:{client_id}" if client_id else f"addr:{address}"


def _period(period: str, now: datetime) -> tuple[str, float]:
    """The quota period containing ``now`` (UTC): its stamp and the seconds left in it."""
    stamp, end = _period_of_day(period, int(now.timestamp() // DAY_SECONDS))
    return stamp, max(1.0, end - now.timestamp())


@functools.lru_cache(maxsize=8)
def _period_of_day(period: str, day: int) -> tuple[str, int]:
    """The quota period holding UTC day ``day`` (days since 1970): its stamp and when it ends
    (Unix time). Cached: a call asks for today's, which changes once a day."""
    start = datetime.fromtimestamp(day * DAY_SECONDS, UTC)
    if period == RateLimit.Period.MONTH:
        year, month = (start.year + 1, 1) if start.month == 12 else (start.year, start.month + 1)
        return start.strftime("%Y%m"), int(datetime(year, month, 1, tzinfo=UTC).timestamp())
    return start.strftime("%Y%m%d"), (day + 1) * DAY_SECONDS


def quota_key(rule_id: int, period: str, subject: str, now: datetime | None = None) -> str:
    stamp, _left = _period(period, now or datetime.now(UTC))
    return redis_key(f"rl:{rule_id}:q:{stamp}:{subject}")


@dataclass(slots=True)
class _Checks:
    """What one ``_ADMIT`` run checks: its keys and arguments, and which limit each key is."""

    keys: list[str]
    args: list[resp.Arg]
    which: list[tuple[Rule, str]]
    # The concurrency caps' keys: the slots the call holds if admitted.
    slots: tuple[str, ...]


def _checks(rules: Sequence[Rule], subject: str) -> _Checks:
    keys: list[str] = []
    args: list[resp.Arg] = []
    which: list[tuple[Rule, str]] = []
    slots: list[str] = []
    day = None
    for rule in rules:
        who = subject if rule.per_caller else "*"
        if rule.rate_args is not None:
            keys.append(f"{rule.prefix}r:{who}")
            args.append(rule.rate_args)
            which.append((rule, "rate"))
        if rule.cap_args is not None:
            key = f"{rule.prefix}c:{who}"
            keys.append(key)
            slots.append(key)
            args.append(rule.cap_args)
            which.append((rule, "concurrency"))
        if rule.quota_args is not None:
            day = day if day is not None else int(time.time() // DAY_SECONDS)
            stamp, end = _period_of_day(rule.quota_period, day)
            keys.append(f"{rule.prefix}q:{stamp}:{who}")
            args += [rule.quota_args, end]
            which.append((rule, "quota"))
    return _Checks(keys, args, which, tuple(slots))


async def aadmit(
    *, limits: Sequence[Rule], method: str, target: str | None, subject: Callable[[], str]
) -> Lease | Refusal:
    """Count a call against every one of the endpoint's ``limits`` that matches it, or refuse
    it.

    ``subject`` gives ``caller_subject(...)``, asked only when a per-caller limit matches.
    Returns the call's ``Lease`` (its concurrency slots, to give back with ``arelease`` when it
    ends) or the ``Refusal`` to answer instead.
    """
    kind = LIMITED_METHODS.get(method)
    if kind is None:
        return NO_LEASE
    rules = [rule for rule in limits if rule.matches(kind, target)]
    if not rules:
        return NO_LEASE
    who = subject() if any(rule.per_caller for rule in rules) else "*"
    checks = _checks(rules, who)
    conf = get_conf()
    url = _url()
    if not url:
        return _redis_down(rules)
    slots = checks.slots
    # The slots' holder: only a cap's sorted set keeps it.
    member = secrets.token_hex(8) if slots else ""
    try:
        answer = await resp.client(url, conf.MCP_RATE_LIMIT_TIMEOUT_SECONDS).evalsha(
            _ADMIT,
            checks.keys,
            [member, conf.MCP_RATE_LIMIT_SLOT_SECONDS, *checks.args, CONCURRENCY_RETRY_SECONDS],
        )
    except TimeoutError:
        # The script may have run and taken slots nobody will give back.
        _give_back_soon(slots, member)
        return _redis_down(rules)
    except (RespError, OSError):
        return _redis_down(rules)
    except asyncio.CancelledError:
        # The client went away during the round trip: the script was sent and takes the
        # slots. Give them back on the same connection, after it, or they stay taken for
        # MCP_RATE_LIMIT_SLOT_SECONDS and a cap of n is full after n such goodbyes.
        _give_back_soon(slots, member)
        raise
    index = int(answer[0])
    if index == 0:
        return Lease(slots, member) if slots else NO_LEASE
    rule, reason = checks.which[index - 1]
    wait = float(answer[1].decode() if isinstance(answer[1], bytes) else answer[1])
    refusal = Refusal(rule, reason, max(1, math.ceil(wait)))
    metrics.RATE_LIMIT_REJECTIONS.labels(str(rule.id), reason).inc()
    return refusal


def _give_back_soon(slots: tuple[str, ...], member: str) -> None:
    """Free ``member``'s slots from a task of their own: the caller is cancelled or gave up.
    Freeing a slot never taken changes nothing."""
    if not slots:
        return
    task = asyncio.ensure_future(_free(slots, member))
    _giving_back.add(task)
    task.add_done_callback(_giving_back.discard)


async def _free(slots: tuple[str, ...], member: str) -> None:
    # Quietly: during an outage this runs for every timed-out call, and the slots expire.
    with contextlib.suppress(RespError, OSError, TimeoutError):
        await _client().pipeline([[b"ZREM", key, member] for key in slots])


def _redis_down(rules: Sequence[Rule]) -> Lease | Refusal:
    closed = next((rule for rule in rules if rule.fail_closed), None)
    result = "closed" if closed is not None else "open"
    metrics.RATE_LIMIT_REDIS_ERRORS.labels(result).inc()
    now = time.monotonic()
    if now - _last_outage_log[0] >= OUTAGE_LOG_SECONDS:
        # Once per interval, not once per call: an outage under load would flood the log.
        _last_outage_log[0] = now
        logger.warning("Rate limits unchecked: Redis unreachable; failing %s", result)
    if closed is None:
        return NO_LEASE
    metrics.RATE_LIMIT_REJECTIONS.labels(str(closed.id), "unavailable").inc()
    return Refusal(closed, "unavailable", REDIS_DOWN_RETRY_SECONDS)


def _url() -> str:
    """The limiter's Redis; "" when there is none (limits then act as if it were down)."""
    return get_conf().MCP_RATE_LIMIT_REDIS_URL or settings.REDIS_URL or ""


def _client() -> resp.Client:
    # No retries: an unreachable Redis must cost a call at most the timeout.
    return resp.client(_url(), get_conf().MCP_RATE_LIMIT_TIMEOUT_SECONDS)


# -- what the operator sees -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Usage:
    subject: str
    used: int


def quota_usage(limit: RateLimit, *, top: int = 50) -> list[Usage] | None:
    """The current quota period's use of ``limit`` by subject, most used first (``top`` of
    them); None when Redis cannot be read. Empty for a limit without a quota."""
    if limit.quota is None or limit.pk is None:
        return []
    prefix = quota_key(limit.pk, limit.quota_period, "")
    if not _url():
        return None
    client = redis_sentinel.sync_client(_url(), socket_timeout=2.0, socket_connect_timeout=2.0)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=500))
        values = client.mget(keys) if keys else []
    except (RedisError, OSError):
        return None
    finally:
        client.close()
    usage = [
        Usage(key.decode()[len(prefix) :], int(value))
        for key, value in zip(keys, values, strict=True)
        if value is not None
    ]
    usage.sort(key=lambda item: (-item.used, item.subject))
    return usage[:top]
