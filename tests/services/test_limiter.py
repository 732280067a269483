"""The limiter itself against the real Redis and database (issue #27): which limits a call
meets, all-or-nothing counting, the token bucket, and limits travelling with the endpoint."""

from __future__ import annotations

import asyncio
import secrets
import socket
from datetime import UTC, datetime

import pytest
import redis
from django.conf import settings

from mcp_app.models import RateLimit
from mcp_app.services import limits, resp
from mcp_app.services.catalog_writes import endpoint_create
from mcp_app.services.endpoint_directory import get_endpoint_state
from tests.support.waiting import await_until

pytestmark = pytest.mark.django_db


def _rule(**fields: object) -> limits.Rule:
    # Unsaved rows with ids of their own: the counts live under the id, fresh for each test.
    row = RateLimit(**fields)
    row.pk = secrets.randbelow(10**9) + 10**6
    return limits.Rule.of(row)


async def _admit(rules: list[limits.Rule], method: str = "tools/call", target: str = "echo"):
    return await limits.aadmit(
        limits=rules, method=method, target=target, subject=lambda: "addr:10.0.0.1"
    )


async def test_a_burst_passes_then_the_sustained_rate_refuses_with_a_wait():
    rule = _rule(rate=1, window="minute", burst=3)
    answers = [await _admit([rule]) for _ in range(4)]
    assert [isinstance(answer, limits.Refusal) for answer in answers] == [False] * 3 + [True]
    refusal = answers[3]
    assert refusal.reason == "rate"
    # One token comes back per minute.
    assert 1 <= refusal.retry_after <= 60


async def test_a_refused_call_is_counted_by_no_limit():
    rate = _rule(rate=2, window="hour")
    quota = _rule(quota=1, quota_period="day")
    assert not isinstance(await _admit([rate, quota]), limits.Refusal)
    refused = await _admit([rate, quota])
    assert isinstance(refused, limits.Refusal) and refused.reason == "quota"
    # The rate's second token was not spent on the refused call.
    assert not isinstance(await _admit([rate]), limits.Refusal)
    assert isinstance(await _admit([rate]), limits.Refusal)


async def test_the_longest_wait_among_the_refusals_is_the_answer():
    rate = _rule(rate=1, window="minute")
    quota = _rule(quota=1, quota_period="month")
    await _admit([rate, quota])
    refused = await _admit([rate, quota])
    assert refused.reason == "quota"
    assert refused.retry_after > 60


async def test_only_limits_naming_the_call_apply():
    tool_limit = _rule(rate=1, window="hour", target_kind="tool", target_name="echo")
    await _admit([tool_limit])
    assert isinstance(await _admit([tool_limit]), limits.Refusal)
    assert await _admit([tool_limit], target="add") is limits.NO_LEASE
    # Lists, pings and the rest are never limited.
    assert await _admit([tool_limit], method="tools/list") is limits.NO_LEASE


async def test_a_concurrency_slot_is_held_until_released():
    cap = _rule(max_concurrent=1)
    lease = await _admit([cap])
    assert isinstance(lease, limits.Lease) and lease.keys
    refused = await _admit([cap])
    assert refused.reason == "concurrency"
    await lease.arelease()
    assert not isinstance(await _admit([cap]), limits.Refusal)


async def test_a_caller_gone_during_admission_gives_its_slot_back():
    cap = _rule(max_concurrent=1)
    # A warm connection: the admission's script goes out on the next loop turn.
    await _admit([_rule(rate=100, window="minute")])
    admitting = asyncio.ensure_future(_admit([cap]))
    await asyncio.sleep(0)
    connection = limits._client()._connection
    assert connection is not None and connection.waiters, "the script is not on its way"
    admitting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await admitting

    async def admitted() -> bool:
        return not isinstance(await _admit([cap]), limits.Refusal)

    # The script ran and took the slot; the cancelled caller's slot is freed after it.
    await await_until(admitted, "the slot of the cancelled admission to be free again")


def test_the_endpoint_state_carries_its_enabled_limits():
    endpoint = endpoint_create(slug="stateful", auth_mode="public")
    assert get_endpoint_state("stateful").limits == ()
    row = RateLimit(endpoint=endpoint, rate=5)
    row.full_clean()
    row.save()
    # The save dropped the cached state: the next read has the limit.
    assert [rule.id for rule in get_endpoint_state("stateful").limits] == [row.pk]
    row.enabled = False
    row.save()
    assert get_endpoint_state("stateful").limits == ()


def test_the_caller_is_the_user_then_the_client_then_the_address():
    assert limits.caller_subject(user_id=7, client_id="c", address="1.2.3.4") == "user:7"
    assert limits.caller_subject(user_id=None, client_id="c", address="1.2.3.4") == "client:c"
    assert limits.caller_subject(user_id=None, client_id="", address="::1") == "addr:::1"


async def test_a_script_redis_forgot_is_sent_again():
    rule = _rule(rate=5, window="minute")
    await _admit([rule])
    redis.Redis.from_url(settings.REDIS_URL).script_flush()
    assert not isinstance(await _admit([rule]), limits.Refusal)


async def test_replies_split_across_reads_are_parsed_in_order():
    connection = resp._Connection()
    connection.connection_made(_Wire())
    futures = connection.send(resp.encode([b"PING"]) * 3, 3)
    wire = b"*2\r\n:3\r\n$4\r\n1.25\r\n-NOSCRIPT No matching script\r\n$-1\r\n"
    for i in range(len(wire)):
        connection.data_received(wire[i : i + 1])
    assert futures[0].result() == [3, b"1.25"]
    with pytest.raises(resp.RespError, match="NOSCRIPT"):
        futures[1].result()
    assert futures[2].result() is None
    assert not connection.buffer


class _Wire(asyncio.Transport):
    """A transport that keeps what is written to it (Redis's side is played by the test)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))


async def test_commands_sent_while_a_batch_awaits_its_replies_go_out_together_after_it():
    connection = resp._Connection()
    wire = _Wire()
    connection.connection_made(wire)
    ping = resp.encode([b"PING"])
    first = connection.send(ping, 1)
    await asyncio.sleep(0)
    # Alone: out at the end of the turn, waiting for no one.
    assert wire.writes == [ping]
    second, third = connection.send(ping, 1), connection.send(ping, 1)
    await asyncio.sleep(0)
    assert len(wire.writes) == 1, "sent while the first batch was in flight"
    connection.data_received(b"+PONG\r\n")
    assert first[0].result() == b"PONG"
    # The first batch's last reply sends the next batch: both commands in one write.
    assert wire.writes[1:] == [ping + ping]
    connection.data_received(b"+PONG\r\n+PONG\r\n")
    assert [second[0].result(), third[0].result()] == [b"PONG", b"PONG"]
    fourth = connection.send(ping, 1)
    await asyncio.sleep(0)
    assert wire.writes[2:] == [ping]
    connection.connection_lost(None)
    with pytest.raises(ConnectionError):
        fourth[0].result()


async def test_a_batch_queued_behind_one_in_flight_fails_when_the_connection_is_lost():
    connection = resp._Connection()
    connection.connection_made(_Wire())
    in_flight = connection.send(resp.encode([b"PING"]), 1)
    await asyncio.sleep(0)
    queued = connection.send(resp.encode([b"PING"]), 1)
    connection.connection_lost(ConnectionResetError())
    for future in (*in_flight, *queued):
        with pytest.raises(ConnectionError):
            future.result()


def test_pre_encoded_arguments_encode_as_the_same_command():
    fixed = resp.Bulks(["r", 10, 0.5])
    assert resp.encode([b"EVALSHA", "k", 3, fixed, "z"]) == resp.encode(
        [b"EVALSHA", "k", 3, "r", 10, 0.5, "z"]
    )


@pytest.mark.parametrize(
    ("period", "moment", "stamp", "end"),
    [
        ("day", "2026-12-31T23:59:59+00:00", "20261231", "2027-01-01T00:00:00+00:00"),
        ("day", "2026-03-01T00:00:00+00:00", "20260301", "2026-03-02T00:00:00+00:00"),
        ("month", "2026-12-31T23:59:59+00:00", "202612", "2027-01-01T00:00:00+00:00"),
        ("month", "2028-02-29T12:00:00+00:00", "202802", "2028-03-01T00:00:00+00:00"),
    ],
)
def test_a_quota_period_has_its_stamp_and_ends_at_the_next_one(period, moment, stamp, end):
    now = datetime.fromisoformat(moment)
    day = int(now.timestamp() // limits.DAY_SECONDS)
    assert limits._period_of_day(period, day) == (stamp, datetime.fromisoformat(end).timestamp())
    assert limits._period(period, now) == (
        stamp,
        max(1.0, datetime.fromisoformat(end).timestamp() - now.timestamp()),
    )


async def test_a_quota_counts_under_the_key_the_operator_reads_and_refuses_until_its_end():
    rule = _rule(quota=1, quota_period="day")
    assert not isinstance(await _admit([rule]), limits.Refusal)
    key = limits.quota_key(rule.id, "day", "addr:10.0.0.1")
    assert redis.Redis.from_url(settings.REDIS_URL).get(key) == b"1"
    refused = await _admit([rule])
    assert isinstance(refused, limits.Refusal) and refused.reason == "quota"
    left = limits._period("day", datetime.now(UTC))[1]
    assert left - 5 <= refused.retry_after <= left + 5


async def test_calls_to_a_redis_that_never_answers_fail_at_their_deadline():
    """One timer per connection, not per call: every call waiting on a silent server fails
    with TimeoutError (the limiter's "may have run" case), and the connection is dropped."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # connections complete in the backlog and are never read
        client = resp.Client(f"redis://127.0.0.1:{silent.getsockname()[1]}/0", timeout=0.3)
        first = asyncio.ensure_future(client.pipeline([[b"PING"]]))
        await asyncio.sleep(0.1)
        # Queued behind the first batch, which never gets its reply.
        later = [asyncio.ensure_future(client.pipeline([[b"PING"]])) for _ in range(3)]
        await asyncio.wait([first])
        # Failed together at the first one's deadline, not each at its own.
        assert all(task.done() for task in later)
        outcomes = await asyncio.gather(first, *later, return_exceptions=True)
        assert all(isinstance(outcome, TimeoutError) for outcome in outcomes), outcomes
        assert client._connection is None
