"""Failed authentications are throttled per client address, and the address cannot be spoofed.

Issue #25: made-up API tokens were looked up in PostgreSQL however many came, and the
anonymous throttle keyed on ``X-Forwarded-For`` as the client sent it. Each test uses
addresses of its own (documentation ranges), since the counters live in the session's Redis
and outlast a test. The failure budget is per day here, so a window never ends mid-test.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from rest_framework.test import APIClient

from mcp_app.auth import addresses
from mcp_app.auth.addresses import client_address
from mcp_app.services.api_tokens import api_token_create
from tests.api.conftest import make_user
from tests.support.live import free_port

LIMIT = 3


def new_address(prefix: str = "2001:db8:25") -> str:
    """An address no earlier test (or run, within the day) failed from."""
    return f"{prefix}::{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}"


def get(path: str, token: str = "", **meta: str) -> Any:
    client = APIClient()
    if token:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client.get(path, **meta)


def made_up() -> str:
    return "mcpk_" + uuid.uuid4().hex


@pytest.fixture
def low_budget() -> Any:
    with override_settings(API_THROTTLE_AUTH_FAILURES=f"{LIMIT}/day"):
        yield


@pytest.mark.django_db
def test_an_address_past_its_failed_authentications_gets_429_before_any_query(
    low_budget: None, django_assert_num_queries: Any
) -> None:
    address = new_address()
    user = make_user("robot", ["mcp_app.view_endpoint"])
    _token, key = api_token_create(user=user, name="ci")

    refused = [
        get("/api/v1/endpoints/", made_up(), REMOTE_ADDR=address).status_code for _ in range(LIMIT)
    ]
    with django_assert_num_queries(0):
        throttled = get("/api/v1/endpoints/", made_up(), REMOTE_ADDR=address)
        oauth_like = get("/api/v1/endpoints/", "not-an-api-token", REMOTE_ADDR=address)
        valid_there = get("/api/v1/endpoints/", key, REMOTE_ADDR=address)
    valid_elsewhere = get("/api/v1/endpoints/", key, REMOTE_ADDR=new_address())

    assert refused == [401] * LIMIT
    assert throttled.status_code == 429
    assert 0 < int(throttled["Retry-After"]) <= 24 * 3600
    body = throttled.json()
    assert (body["type"], body["errors"]) == ("throttled", [])
    assert body["detail"].startswith("Too many failed authentications from this address.")
    assert "WWW-Authenticate" not in throttled
    assert (oauth_like.status_code, valid_there.status_code) == (429, 429)
    assert valid_elsewhere.status_code == 200


@pytest.mark.django_db
def test_valid_tokens_never_count_as_failures(low_budget: None) -> None:
    address = new_address()
    user = make_user("robot", ["mcp_app.view_endpoint"])
    _token, key = api_token_create(user=user, name="ci")

    statuses = [
        get("/api/v1/endpoints/", key, REMOTE_ADDR=address).status_code for _ in range(LIMIT + 2)
    ]

    assert statuses == [200] * (LIMIT + 2)


@pytest.mark.django_db
def test_a_client_spoofing_x_forwarded_for_is_throttled_by_its_own_address(
    low_budget: None,
) -> None:
    address = new_address()

    statuses = [
        get(
            "/api/v1/endpoints/",
            made_up(),
            REMOTE_ADDR=address,
            HTTP_X_FORWARDED_FOR=new_address(),
        ).status_code
        for _ in range(LIMIT + 1)
    ]

    assert statuses == [401] * LIMIT + [429]


@pytest.mark.django_db
def test_behind_a_trusted_proxy_each_forwarded_client_has_its_own_budget(
    low_budget: None,
) -> None:
    proxy = "10.20.30.40"
    client, neighbour = new_address(), new_address()
    with override_settings(TRUSTED_PROXIES=["10.0.0.0/8"]):
        statuses = [
            get(
                "/api/v1/endpoints/",
                made_up(),
                REMOTE_ADDR=proxy,
                # What the client wrote itself (left of its own address) changes nothing.
                HTTP_X_FORWARDED_FOR=f"{new_address()}, {client}",
            ).status_code
            for _ in range(LIMIT + 1)
        ]
        other = get(
            "/api/v1/endpoints/", made_up(), REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR=neighbour
        )

    assert statuses == [401] * LIMIT + [429]
    assert other.status_code == 401


@pytest.mark.django_db
def test_the_anonymous_throttle_keys_on_the_real_address() -> None:
    address = new_address()
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "anon": "2/day"}
    with override_settings(
        REST_FRAMEWORK={**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    ):
        statuses = [
            get("/api/schema/", REMOTE_ADDR=address, HTTP_X_FORWARDED_FOR=new_address()).status_code
            for _ in range(3)
        ]

    assert statuses == [200, 200, 429]


@pytest.mark.parametrize(
    ("remote", "forwarded", "trusted", "expected"),
    [
        ("203.0.113.9", "198.51.100.1", [], "203.0.113.9"),
        ("203.0.113.9", "198.51.100.1", ["10.0.0.0/8"], "203.0.113.9"),
        ("10.0.0.2", "198.51.100.1", ["10.0.0.0/8"], "198.51.100.1"),
        # Two proxies of ours: the right-most untrusted hop is the client.
        ("10.0.0.2", "1.2.3.4, 198.51.100.1, 10.0.0.7", ["10.0.0.0/8"], "198.51.100.1"),
        # A hop that is no address stops the walk at the proxy that added it.
        ("10.0.0.2", "198.51.100.1, junk", ["10.0.0.0/8"], "10.0.0.2"),
        ("10.0.0.2", "", ["10.0.0.0/8"], "10.0.0.2"),
        ("::ffff:10.0.0.2", "2001:DB8::1", ["::ffff:10.0.0.0/104"], "2001:db8::1"),
    ],
)
def test_client_address_believes_x_forwarded_for_only_from_trusted_proxies(
    remote: str, forwarded: str, trusted: list[str], expected: str
) -> None:
    with override_settings(TRUSTED_PROXIES=trusted):
        assert (
            client_address({"REMOTE_ADDR": remote, "HTTP_X_FORWARDED_FOR": forwarded}) == expected
        )


@pytest.mark.django_db
def test_throttles_count_per_process_while_redis_is_unreachable(
    low_budget: None, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing listens on the cache's port: the API answers, and still throttles."""
    address = new_address()
    user = make_user("robot", ["mcp_app.view_endpoint"])
    _token, key = api_token_create(user=user, name="ci")
    unreachable = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/0",
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }
    caplog.set_level(logging.WARNING, logger="mcp_app.api.throttling")
    with override_settings(CACHES=unreachable):
        served = [get("/api/v1/endpoints/", key, REMOTE_ADDR=address).status_code for _ in range(3)]
        schema = get("/api/schema/", REMOTE_ADDR=address)
        failures = [
            get("/api/v1/endpoints/", made_up(), REMOTE_ADDR=address).status_code
            for _ in range(LIMIT + 1)
        ]

    assert served == [200, 200, 200]
    assert schema.status_code == 200
    assert failures == [401] * LIMIT + [429]
    assert [r.getMessage() for r in caplog.records if r.name == "mcp_app.api.throttling"] == [
        "API throttles count per process: Redis unavailable"
    ]


def test_remembered_addresses_stay_bounded_under_a_flood_of_forwarded_headers() -> None:
    remembered = addresses._client_address
    remembered.cache_clear()
    with override_settings(TRUSTED_PROXIES=["10.0.0.0/8"]):
        for n in range(3000):
            forwarded = f"198.51.{n // 250}.{n % 250}"
            assert (
                client_address({"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": forwarded})
                == forwarded
            )
        assert remembered.cache_info().currsize <= 1024
        # A long header is answered, and not kept; a short one is.
        remembered.cache_clear()
        long = ", ".join(["198.51.100.1"] * 100)
        assert len(long) > addresses.CACHED_FORWARDED_CHARS
        assert client_address({"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": long}) == (
            "198.51.100.1"
        )
        assert remembered.cache_info().currsize == 0
        client_address({"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "198.51.100.1"})
        assert remembered.cache_info().currsize == 1
