"""The SSRF guard of HTTP tools: private addresses are refused before any connection.

``connections`` records every ``socket.connect`` (tests/support/sockets.py), so "refused before
any connection attempt" is observed at the socket, not inferred from an error message. Refused
addresses are never contacted, so no traffic leaves 127.0.0.1.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from django.test import override_settings

from mcp_app.executors import get_executor
from mcp_app.executors.netguard import NetworkPolicy, is_public
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.results import ToolError, ToolResult
from tests.support.upstream import Upstream, run_upstream

http = get_executor("http")


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    with run_upstream() as server:
        yield server


async def run(ctx: ToolCallContext, config: Mapping[str, Any]) -> ToolResult:
    return await http.run(http.prepare(config), {}, ctx)


@pytest.mark.parametrize(
    "url",
    [
        "http://10.1.2.3/x",
        "http://192.168.0.10:8080/x",
        "http://172.16.5.5/x",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://100.100.100.200/latest/meta-data/",
        "http://[::1]/x",
        "http://[::ffff:127.0.0.1]/x",
        "http://0.0.0.0/x",
        "http://224.0.0.1/x",
        "http://240.0.0.1/x",
    ],
)
async def test_private_and_metadata_addresses_are_refused_before_connecting(
    ctx: ToolCallContext, connections: list[Any], url: str
) -> None:
    with pytest.raises(ToolError, match="not allowed: it is not a public address"):
        await run(ctx, {"url": url})

    assert connections == []


async def test_loopback_is_refused_without_an_allow_list(
    ctx: ToolCallContext, upstream: Upstream, connections: list[Any]
) -> None:
    with pytest.raises(ToolError, match="127.0.0.1 are not allowed"):
        await run(ctx, {"url": upstream.url("/json")})

    assert connections == []
    assert upstream.hits["/json"] == 0


async def test_a_hostname_resolving_to_loopback_is_refused(
    ctx: ToolCallContext, upstream: Upstream, connections: list[Any]
) -> None:
    url = upstream.base_url.replace("127.0.0.1", "localhost") + "/json"

    with pytest.raises(ToolError, match=r"'localhost' \(.*\) are not allowed"):
        await run(ctx, {"url": url})

    assert connections == []


async def test_the_allow_list_lets_the_local_upstream_through(
    ctx: ToolCallContext, upstream: Upstream, connections: list[Any]
) -> None:
    result = await run(ctx, {"url": upstream.url("/json"), "allow_networks": ["127.0.0.0/8"]})

    assert not result.is_error
    assert [address[0] for address in connections] == ["127.0.0.1"]


async def test_an_allow_listed_host_name_is_reached(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    url = upstream.base_url.replace("127.0.0.1", "LocalHost") + "/json"

    result = await run(ctx, {"url": url, "allow_hosts": ["localhost"]})

    assert result.structured["data"]["items"][1] == {"id": 2}


@override_settings(MCP_HTTP_ALLOWED_NETWORKS="10.0.0.0/8, 127.0.0.1/32")
async def test_the_global_allowed_networks_setting_lets_the_upstream_through(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    result = await run(ctx, {"url": upstream.url("/json")})

    assert not result.is_error


async def test_a_redirect_to_a_refused_address_is_not_followed(
    ctx: ToolCallContext, upstream: Upstream, connections: list[Any]
) -> None:
    config = {
        "url": upstream.url("/redirect?to=http://169.254.169.254/latest/meta-data/"),
        "allow_networks": ["127.0.0.1/32"],
    }

    with pytest.raises(ToolError, match=r"169.254.169.254 are not allowed"):
        await run(ctx, config)

    assert [address[0] for address in connections] == ["127.0.0.1"]


async def test_a_redirect_to_a_disallowed_local_name_is_not_followed(
    ctx: ToolCallContext, upstream: Upstream, connections: list[Any]
) -> None:
    target = upstream.base_url.replace("127.0.0.1", "localhost") + "/json"
    # The upstream is allow-listed by its literal address only, not by network.
    config = {"url": upstream.url(f"/redirect?to={target}"), "allow_hosts": ["127.0.0.1"]}

    with pytest.raises(ToolError, match="'localhost'"):
        await run(ctx, config)

    assert upstream.hits["/redirect"] >= 1
    assert len(connections) == 1


async def test_a_redirect_to_another_scheme_is_refused(
    ctx: ToolCallContext, upstream: Upstream
) -> None:
    config = {
        "url": upstream.url("/redirect?to=file:///etc/passwd"),
        "allow_networks": ["127.0.0.1/32"],
    }

    with pytest.raises(ToolError, match="Only http and https URLs are allowed"):
        await run(ctx, config)


def test_a_metadata_address_needs_an_exact_allow_list_entry() -> None:
    metadata = ipaddress.ip_address("169.254.169.254")

    assert not NetworkPolicy.build(networks=["169.254.0.0/16"]).allows("x", metadata)
    assert NetworkPolicy.build(networks=["169.254.169.254/32"]).allows("x", metadata)
    assert NetworkPolicy.build(networks=["169.254.0.0/16"]).allows(
        "x", ipaddress.ip_address("169.254.1.1")
    )


def test_public_addresses_are_public() -> None:
    assert is_public(ipaddress.ip_address("93.184.216.34"))
    assert is_public(ipaddress.ip_address("2606:4700::1111"))
    assert not is_public(ipaddress.ip_address("100.64.0.1"))
    assert not is_public(ipaddress.ip_address("ff0e::1"))
