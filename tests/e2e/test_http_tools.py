"""HTTP tools end to end: the official SDK client calls a tool of the live Daphne process,
which authenticates with a stored credential to a local upstream reached through its
allow-list.

The credential is encrypted here and decrypted by the server process: both derive the key
from the live server's SECRET_KEY (MCP_SECRET_KEYS is unset in tests).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings
from mcp import Client

from mcp_app.models import Tool
from mcp_app.services.credentials import credential_create
from tests.support.catalog import make_endpoint
from tests.support.live import SECRET_KEY, flush_database
from tests.support.upstream import Upstream, run_upstream

pytestmark = pytest.mark.django_db

SLUG = "http-e2e"
TOKEN = "e2e-bearer-token-9f3a"


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    with run_upstream() as server:
        yield server


@pytest.fixture(scope="module")
def http_url(live_server_url: str, upstream: Upstream, django_db_blocker: Any) -> Iterator[str]:
    with django_db_blocker.unblock(), override_settings(SECRET_KEY=SECRET_KEY, MCP_SECRET_KEYS=""):
        endpoint = make_endpoint(SLUG, title="HTTP tools")
        credential_create(name="upstream", kind="bearer", secret=TOKEN)
        lookup = Tool(
            name="lookup",
            description="Asks the upstream who we are.",
            kind=Tool.Kind.HTTP,
            config={
                "url": upstream.url("/echo/{item}"),
                "query": {"q": "{q}"},
                "credential": "upstream",
                "allow_networks": ["127.0.0.1/32"],
            },
            input_schema={
                "type": "object",
                "properties": {"item": {"type": "string"}, "q": {"type": "string"}},
                "required": ["item"],
            },
        )
        failing = Tool(
            name="failing",
            description="Always fails upstream.",
            kind=Tool.Kind.HTTP,
            config={
                "url": upstream.url("/status/500"),
                "credential": "upstream",
                "allow_networks": ["127.0.0.1/32"],
            },
        )
        for tool in (lookup, failing):
            tool.full_clean()
            tool.save()
        endpoint.tools.add(lookup, failing)
    yield f"{live_server_url}/mcp/{SLUG}"
    flush_database(django_db_blocker)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_an_http_tool_calls_the_upstream_with_its_credential(
    http_url: str, mode: str
) -> None:
    async with asyncio.timeout(20), Client(http_url, mode=mode) as client:
        result = await client.call_tool("lookup", {"item": "a b/c", "q": "x&y"})

    assert not result.is_error
    received = result.structured_content
    assert received["raw_path"] == "/echo/a%20b%2Fc?q=x%26y"
    # The echo is redacted by value (executors/redaction.py): the header held exactly the token.
    assert received["headers"]["authorization"] == "Bearer [redacted]"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_an_upstream_failure_is_an_error_result_without_the_secret(
    http_url: str, mode: str
) -> None:
    async with asyncio.timeout(20), Client(http_url, mode=mode) as client:
        result = await client.call_tool("failing", {})

    assert result.is_error
    (block,) = result.content
    assert block.text.startswith("HTTP 500 Internal Server Error from http://127.0.0.1:")
    assert block.text.endswith("you sent 'Bearer [redacted]'")
    assert TOKEN not in block.text
