"""bench/capacity.py's counting against a real server and Redis (issue #30).

The capacity model's Redis figures are counts (``INFO commandstats`` deltas divided by the
requests): a limited endpoint's call must count its limiter script once per call, whatever the
number of calls, and a plain call none. The server gets a Redis of its own, so no other test's
traffic is counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench import capacity, compare
from mcp_app.models import RateLimit
from scripts import services
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.live import asgi_server, flush_database

pytestmark = pytest.mark.django_db

LIMITED, PLAIN = "capacity-limited", "capacity-plain"


@pytest.fixture(scope="module")
def endpoints(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    with django_db_blocker.unblock():
        echo = make_python_tool("echo", "echo")
        limited, plain = make_endpoint(LIMITED), make_endpoint(PLAIN)
        limited.tools.add(echo)
        plain.tools.add(echo)
        # Counted on every call, never reached.
        RateLimit.objects.create(endpoint=limited, scope="endpoint", rate=2_000_000_000)
    yield
    flush_database(django_db_blocker)


def test_redis_commands_per_request_are_counted_exactly(endpoints: None) -> None:
    call = compare.modern("tools/call", compare._echo_params(), {}, "echo")
    with (
        services.redis() as redis_url,
        asgi_server("uvicorn", extra_env={"REDIS_URL": redis_url}) as base,
    ):
        limited, plain = f"{base}/mcp/{LIMITED}", f"{base}/mcp/{PLAIN}"
        for url in (limited, plain):  # loads, script registration, connections
            assert capacity.send_one_by_one(url, call, 2) == 2
        counter = capacity.RedisCounter(redis_url)
        with counter.count() as three:
            assert capacity.send_one_by_one(limited, call, 3) == 3
        with counter.count() as six:
            assert capacity.send_one_by_one(limited, call, 6) == 6
        with counter.count() as none_limited:
            assert capacity.send_one_by_one(plain, call, 3) == 3
    # One limiter script per limited call, however many calls; none for a plain call. (The
    # server's other commands, such as a periodic PING, may land in either window.)
    for counted, calls in ((three, 3), (six, 6)):
        figures = capacity.per(counted, calls)
        assert figures["redis_by_command_per"]["evalsha"] == 1.0
        assert figures["redis_per"] >= 1.0
    assert "evalsha" not in capacity.per(none_limited, 3)["redis_by_command_per"]
    # Our own INFO commands are never counted.
    assert "info" not in six["by_command"]
