"""One guarded send for every outbound request: HTTP tools, the upstream relay, OpenAPI import.

Each user is driven through a name the test's own resolver answers (``Dns``, installed with
``netguard.resolver_used``), so a name can resolve to loopback or a metadata address, and
change its answer between two requests (DNS rebinding), without a lookup leaving the process.
``connections`` records every socket this process connects: a refused request is observed
never to connect, and an allowed one to connect to exactly the address its check approved.
Nothing is sent beyond 127.0.0.1: refused addresses are never contacted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from django.test import override_settings

from mcp_app.executors import get_executor, mcp_upstream, netguard
from mcp_app.executors.base import UpstreamTarget
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.results import ToolError
from mcp_app.services.openapi import OpenApiError, openapi_fetch
from tests.support.mcp_upstream_server import RunningUpstream, run_mcp_upstream
from tests.support.sockets import Dns
from tests.support.upstream import Upstream, run_upstream

http = get_executor("http")
METADATA = "169.254.169.254"


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    with run_upstream() as server:
        yield server


@pytest.fixture(scope="module")
def mcp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningUpstream]:
    with run_mcp_upstream(tmp_path_factory.mktemp("netguard")) as running:
        yield running


@pytest.fixture
def dns() -> Iterator[Dns]:
    resolver = Dns({"internal.test": ["127.0.0.1"], "metadata.test": [METADATA]})
    with netguard.resolver_used(resolver):
        yield resolver


@pytest.fixture
async def fresh_sessions() -> AsyncIterator[None]:
    yield
    await mcp_upstream.close_sessions()


def on(server_url: str, name: str, path: str = "") -> str:
    """``server_url`` (on 127.0.0.1) with ``name`` as its host."""
    return server_url.replace("127.0.0.1", name) + path


async def call_http(ctx: ToolCallContext, **config: Any) -> Any:
    result = await http.run(http.prepare(config), {}, ctx)
    assert not result.is_error, result.content
    return result.structured


# --- HTTP tools


@pytest.mark.parametrize(
    ("name", "allow"),
    [
        ("internal.test", {}),
        # A metadata address is refused within an allow-listed network: only its exact address
        # opens it.
        ("metadata.test", {"allow_networks": ["169.254.0.0/16"]}),
    ],
)
async def test_an_http_tool_refuses_a_name_resolving_to_loopback_or_metadata(
    ctx: ToolCallContext,
    upstream: Upstream,
    dns: Dns,
    connections: list[Any],
    name: str,
    allow: dict[str, Any],
) -> None:
    with pytest.raises(ToolError, match=rf"'{name}' \(.*\) are not allowed"):
        await http.run(
            http.prepare({"url": on(upstream.base_url, name, "/echo"), **allow}), {}, ctx
        )

    assert connections == []
    assert dns.asked == [name]


@pytest.mark.parametrize(
    "allow", [{"allow_networks": ["127.0.0.0/8"]}, {"allow_hosts": ["internal.test"]}]
)
async def test_an_http_tool_reaches_an_allow_listed_name_at_the_address_checked(
    ctx: ToolCallContext, upstream: Upstream, dns: Dns, connections: list[Any], allow: Any
) -> None:
    url = on(upstream.base_url, "internal.test", "/echo")

    echoed = await call_http(ctx, url=url, **allow)

    assert [address[0] for address in connections] == ["127.0.0.1"]
    # The connection went to the address, the request still names the host.
    assert echoed["headers"]["host"] == url.split("/")[2]
    assert dns.asked == ["internal.test"]


@override_settings(MCP_HTTP_ALLOWED_NETWORKS="127.0.0.0/8")
async def test_an_http_tool_honours_the_operators_allow_list(
    ctx: ToolCallContext, upstream: Upstream, dns: Dns, connections: list[Any]
) -> None:
    await call_http(ctx, url=on(upstream.base_url, "internal.test", "/echo"))

    assert [address[0] for address in connections] == ["127.0.0.1"]


async def test_a_name_rebound_to_metadata_after_a_request_is_refused_on_the_next(
    ctx: ToolCallContext, upstream: Upstream, dns: Dns, connections: list[Any]
) -> None:
    config = {
        "url": on(upstream.base_url, "rebind.test", "/echo"),
        "allow_networks": ["127.0.0.0/8"],
    }
    dns.answer("rebind.test", "127.0.0.1")
    await call_http(ctx, **config)
    dns.answer("rebind.test", METADATA)

    with pytest.raises(ToolError, match=rf"'rebind.test' \({METADATA}\) are not allowed"):
        await http.run(http.prepare(config), {}, ctx)

    # One lookup per request, its answer both checked and connected to.
    assert dns.asked == ["rebind.test", "rebind.test"]
    assert [address[0] for address in connections] == ["127.0.0.1"]


# --- The upstream relay
# The SDK's server refuses a Host header other than its own names (its DNS rebinding
# protection), so the names reached here are "localhost", answered by ``Dns`` all the same.


def target(server: RunningUpstream, name: str, **fields: Any) -> UpstreamTarget:
    return UpstreamTarget(key=f"netguard-{name}", name="up", url=on(server.url, name), **fields)


@pytest.mark.parametrize(
    ("name", "networks"), [("internal.test", ()), ("metadata.test", ("169.254.0.0/16",))]
)
async def test_the_upstream_relay_refuses_a_name_resolving_to_loopback_or_metadata(
    mcp_server: RunningUpstream,
    dns: Dns,
    connections: list[Any],
    fresh_sessions: None,
    name: str,
    networks: tuple[str, ...],
) -> None:
    with pytest.raises(
        mcp_upstream.UpstreamUnavailable, match="its address is not public"
    ) as caught:
        await mcp_upstream.list_tools(target(mcp_server, name, allow_networks=networks))

    assert connections == []
    # The operator's detail names the address the one resolution gave.
    assert f"'{name}' ({dns.answers[name][0]})" in caught.value.detail


@pytest.mark.parametrize(
    "allow", [{"allow_networks": ("127.0.0.0/8",)}, {"allow_hosts": ("localhost",)}]
)
async def test_the_upstream_relay_reaches_an_allow_listed_name_at_the_address_checked(
    mcp_server: RunningUpstream,
    dns: Dns,
    connections: list[Any],
    fresh_sessions: None,
    allow: Any,
) -> None:
    dns.answer("localhost", "127.0.0.1")

    tools = await mcp_upstream.list_tools(target(mcp_server, "localhost", **allow))

    assert "echo" in {tool["name"] for tool in tools}
    assert {address[0] for address in connections} == {"127.0.0.1"}
    assert set(dns.asked) == {"localhost"}


async def test_the_upstream_relay_checks_a_rebound_name_despite_its_pooled_connection(
    mcp_server: RunningUpstream, dns: Dns, connections: list[Any], fresh_sessions: None
) -> None:
    rebound = target(mcp_server, "localhost", allow_networks=("127.0.0.0/8",))
    dns.answer("localhost", "127.0.0.1")
    await mcp_upstream.list_tools(rebound)
    dns.answer("localhost", METADATA)

    # The session and its kept-alive connection to 127.0.0.1 exist; the request is still
    # resolved and checked first.
    with pytest.raises(mcp_upstream.UpstreamUnavailable, match="its address is not public"):
        await mcp_upstream.list_tools(rebound)

    assert {address[0] for address in connections} == {"127.0.0.1"}


# --- OpenAPI URL import


def test_openapi_import_refuses_a_name_resolving_to_loopback_then_honours_the_allow_list(
    upstream: Upstream, dns: Dns, connections: list[Any], settings: Any
) -> None:
    url = on(upstream.base_url, "internal.test", "/json")
    with pytest.raises(OpenApiError, match=r"'internal.test' \(127.0.0.1\) are not allowed"):
        openapi_fetch(url)
    assert connections == []

    settings.MCP_HTTP_ALLOWED_NETWORKS = "127.0.0.0/8"
    assert b'"items"' in openapi_fetch(url)
    assert [address[0] for address in connections] == ["127.0.0.1"]


def test_openapi_import_refuses_a_metadata_address_inside_an_allowed_network(
    upstream: Upstream, dns: Dns, connections: list[Any], settings: Any
) -> None:
    settings.MCP_HTTP_ALLOWED_NETWORKS = "169.254.0.0/16"

    with pytest.raises(OpenApiError, match=rf"'metadata.test' \({METADATA}\) are not allowed"):
        openapi_fetch(on(upstream.base_url, "metadata.test", "/json"))

    assert connections == []
    assert dns.asked == ["metadata.test"]


def test_openapi_import_checks_a_name_rebound_between_two_fetches(
    upstream: Upstream, dns: Dns, connections: list[Any], settings: Any
) -> None:
    settings.MCP_HTTP_ALLOWED_NETWORKS = "127.0.0.0/8"
    url = on(upstream.base_url, "rebind.test", "/json")
    dns.answer("rebind.test", "127.0.0.1")
    openapi_fetch(url)
    dns.answer("rebind.test", METADATA)

    with pytest.raises(OpenApiError, match=rf"'rebind.test' \({METADATA}\) are not allowed"):
        openapi_fetch(url)

    assert [address[0] for address in connections] == ["127.0.0.1"]


# --- The send itself


async def test_send_tries_each_checked_address_and_never_another(
    upstream: Upstream, dns: Dns, connections: list[Any]
) -> None:
    # ::1 first, as "localhost" often answers, while the server listens on 127.0.0.1 only.
    dns.answer("two.test", "::1", "127.0.0.1")
    policy = netguard.NetworkPolicy.build(networks=["127.0.0.0/8", "::1/128"])
    url = on(upstream.base_url, "two.test", "/echo")

    async with netguard.guarded_client(httpx.Timeout(5)) as client:
        response = await netguard.send(client, "GET", httpx.URL(url), policy, headers={})
        await response.aread()
        await response.aclose()

    assert response.status_code == 200
    # ::1 refused the connection (or has no route here); 127.0.0.1 answered.
    assert {address[0] for address in connections} <= {"::1", "127.0.0.1"}
    assert connections[-1][0] == "127.0.0.1"
    assert dns.asked == ["two.test"]
