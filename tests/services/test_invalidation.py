"""Pushed invalidations: what another process publishes reaches this process's caches."""

from __future__ import annotations

import redis
from django.conf import settings
from pytest_django import DjangoAssertNumQueries

from mcp_app.models import Endpoint
from mcp_app.services import invalidation
from mcp_app.services.endpoint_directory import get_endpoint_state
from tests.support.waiting import wait_until

WAIT_SECONDS = 10.0


def publish_raw(data: bytes) -> None:
    """Publish as another process would, straight to Redis."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        client.publish(invalidation.invalidation_channel(), data)
    finally:
        client.close()


def wait_for_pushes(count: int) -> None:
    wait_until(
        lambda: invalidation.pushes_received() >= count,
        "the push arrived",
        timeout=WAIT_SECONDS,
        interval=0.01,
    )


def test_a_push_from_another_process_drops_the_cached_endpoint(
    endpoint: Endpoint, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    assert invalidation.wait_subscribed(WAIT_SECONDS)
    assert get_endpoint_state("test") is not None
    received = invalidation.pushes_received()

    message = invalidation.Invalidation(endpoint_ids=frozenset({endpoint.pk}))
    publish_raw(message.encode())
    wait_for_pushes(received + 1)

    with django_assert_num_queries(1):
        assert get_endpoint_state("test") is not None


def test_a_malformed_push_is_ignored_and_later_ones_still_apply(
    endpoint: Endpoint, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    assert invalidation.wait_subscribed(WAIT_SECONDS)
    assert get_endpoint_state("test") is not None
    received = invalidation.pushes_received()

    for junk in (b"", b"not json", b"[1, 2]", b'{"e": ["x"]}', b'{"e": 5}', b"\xff\x00"):
        publish_raw(junk)
    publish_raw(invalidation.Invalidation(slugs=frozenset({"test"})).encode())
    wait_for_pushes(received + 1)

    assert invalidation.pushes_received() == received + 1
    with django_assert_num_queries(1):
        assert get_endpoint_state("test") is not None


def test_messages_survive_the_round_trip() -> None:
    message = invalidation.Invalidation(
        endpoint_ids=frozenset({1, 2}),
        slugs=frozenset({"a"}),
        session_ids=frozenset({"s"}),
        everything=True,
    )
    assert invalidation.Invalidation.decode(message.encode()) == message
