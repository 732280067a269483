"""The limiter itself against the real Redis and database (issue #27): which limits a call
meets, all-or-nothing counting, the token bucket, and limits travelling with the endpoint."""

from __future__ import annotations

import asyncio
import secrets

import pytest

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
    import redis
    from django.conf import settings

    rule = _rule(rate=5, window="minute")
    await _admit([rule])
    redis.Redis.from_url(settings.REDIS_URL).script_flush()
    assert not isinstance(await _admit([rule]), limits.Refusal)


async def test_replies_split_across_reads_are_parsed_in_order():
    connection = resp._Connection()
    loop = asyncio.get_running_loop()
    futures = [loop.create_future() for _ in range(3)]
    connection.waiters.extend(futures)
    wire = b"*2\r\n:3\r\n$4\r\n1.25\r\n-NOSCRIPT No matching script\r\n$-1\r\n"
    for i in range(len(wire)):
        connection.data_received(wire[i : i + 1])
    assert futures[0].result() == [3, b"1.25"]
    with pytest.raises(resp.RespError, match="NOSCRIPT"):
        futures[1].result()
    assert futures[2].result() is None
    assert not connection.buffer
