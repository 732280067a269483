"""Fixtures for HTTP-level tests of the MCP endpoint against a real Daphne process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.catalog import echo_schema, make_endpoint, make_python_tool
from tests.support.live import flush_database, live_server_url  # noqa: F401  (fixture)

SLUG = "transport"


@pytest.fixture(scope="module")
def endpoint_url(live_server_url: str, django_db_blocker: Any) -> Iterator[str]:  # noqa: F811
    with django_db_blocker.unblock():
        endpoint = make_endpoint(
            SLUG, allowed_origins="https://app.example.com", instructions="Use echo."
        )
        endpoint.tools.add(make_python_tool("echo", "echo", input_schema=echo_schema()))
        make_endpoint("transport-off", enabled=False)
        make_endpoint("transport-other")
    yield f"{live_server_url}/mcp/{SLUG}"
    flush_database(django_db_blocker)


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as c:
        yield c
