"""Opt-in forwarding of the client's request headers to an upstream.

The upstream is the official SDK's server (``tests/support/mcp_upstream_server.py``), whose
``headers`` tool writes every header its request carried to a marker file. Our endpoint runs
in a live Daphne process; the SDK client calls it in both eras with headers of its own.
"""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_app.models import Credential, Prompt, Resource, Tool, Upstream
from mcp_app.services.credentials import credential_create
from tests.support.catalog import make_endpoint
from tests.support.live import SECRET_KEY, asgi_server, flush_database, wait_until_idle
from tests.support.mcp_upstream_server import RunningUpstream, run_mcp_upstream

pytestmark = pytest.mark.django_db
MODES = ["legacy", "2026-07-28"]
# What the client sends besides its MCP headers.
CLIENT_HEADERS = {
    "X-Tenant": "acme",
    "X-Trace-Id": "trace-1",
    "X-Not-Listed": "stays-here",
    "Cookie": "sessionid=client-cookie",
    "X-Api-Key": "client-chosen-key",
}


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: Any) -> Iterator[RunningUpstream]:
    # extras: a resource template and a prompt that echo the X-Api-Key they received.
    with run_mcp_upstream(tmp_path_factory.mktemp("e2e-forward-headers"), extras=True) as running:
        yield running


@pytest.fixture(scope="module")
def url(upstream: RunningUpstream, django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    # Encrypted with the key the live server derives its own from.
    with django_db_blocker.unblock(), override_settings(SECRET_KEY=SECRET_KEY, MCP_SECRET_KEYS=""):
        key = credential_create(
            name="fwd-key",
            kind=Credential.Kind.API_KEY_HEADER,
            header_name="X-API-Key",
            secret="operator-key",
        )
        forwarding = Upstream(
            name="fwd",
            url=upstream.url,
            allow_networks="127.0.0.1/32",
            credential=key,
            # X-Api-Key is the credential's header: the client's value never replaces it.
            forward_headers="X-Tenant\nx-trace-id, X-Api-Key",
        )
        forwarding.full_clean()
        forwarding.save()
        # Saved without validation (as a raw write could): denied names are still not sent.
        raw = Upstream.objects.create(
            name="fwd-raw",
            url=upstream.url,
            allow_networks="127.0.0.1/32",
            forward_headers="Cookie\nMcp-Session-Id\nX-Tenant\nX-Api-Key",
        )
        endpoint = make_endpoint("e2e-fwd")
        # Reads and prompts of an upstream forward the listed headers too.
        resource = Resource(uri="ours://echo", name="echo", upstream=raw)
        resource.remote_uri = "up://leak/read"
        resource.full_clean()
        resource.save()
        prompt = Prompt(name="echo_prompt", description="Echoes.", upstream=raw)
        prompt.remote_name = "leak_prompt"
        prompt.full_clean()
        prompt.save()
        endpoint.resources.add(resource)
        endpoint.prompts.add(prompt)
        for name, upstream_name in (("fwd_headers", "fwd"), ("raw_headers", "fwd-raw")):
            tool = Tool(
                name=name,
                description="The headers the upstream received.",
                kind=Tool.Kind.MCP_UPSTREAM,
                config={"upstream": upstream_name, "tool": "headers"},
                input_schema={"type": "object"},
            )
            tool.full_clean()
            tool.save()
            endpoint.tools.add(tool)
    with asgi_server("daphne", {"CELERY_BROKER_URL": "memory://"}) as base:
        yield f"{base}/mcp/e2e-fwd"
        wait_until_idle(base)
    flush_database(django_db_blocker)


async def received(url: str, mode: str, tool: str, upstream: RunningUpstream) -> dict[str, str]:
    async with (
        asyncio.timeout(20),
        httpx2.AsyncClient(headers=CLIENT_HEADERS, timeout=20) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        result = await client.call_tool(tool, {})
    assert not result.is_error, result.content
    return dict(ast.literal_eval((upstream.markers / "headers").read_text()))


@pytest.mark.parametrize("mode", MODES)
async def test_listed_headers_reach_the_upstream_and_no_others(url, upstream, mode):
    seen = await received(url, mode, "fwd_headers", upstream)
    assert (seen["x-tenant"], seen["x-trace-id"]) == ("acme", "trace-1")
    assert seen["x-api-key"] == "operator-key"
    assert "x-not-listed" not in seen
    assert "cookie" not in seen


@pytest.mark.parametrize("mode", MODES)
async def test_denied_headers_are_never_forwarded_even_if_listed(url, upstream, mode):
    seen = await received(url, mode, "raw_headers", upstream)
    assert seen["x-tenant"] == "acme"
    assert "cookie" not in seen


@pytest.mark.parametrize("mode", MODES)
async def test_reads_and_prompts_forward_the_listed_headers(url, mode):
    async with (
        asyncio.timeout(20),
        httpx2.AsyncClient(headers=CLIENT_HEADERS, timeout=20) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        read = await client.read_resource("ours://echo")
        prompt = await client.get_prompt("echo_prompt", {})
    assert "x-api-key=client-chosen-key" in read.contents[0].text
    assert "x-api-key=client-chosen-key" in prompt.messages[0].content.text


@pytest.mark.parametrize(
    "names",
    ["Authorization", "cookie", "Mcp-Session-Id", "MCP-Protocol-Version", "Proxy-Authorization",
     "Host", "X-Tenant\nSet-Cookie", "Bad Header"],
)  # fmt: skip
def test_an_upstream_refuses_to_forward_a_denied_header(names):
    upstream = Upstream(name="denied", url="https://up.example/mcp", forward_headers=names)
    with pytest.raises(ValidationError) as refused:
        upstream.full_clean()
    assert "forward_headers" in refused.value.message_dict
