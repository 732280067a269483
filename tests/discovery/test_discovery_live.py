"""Discovery end to end: a client that knows only the site's base URL finds every listed
endpoint through ``/.well-known/ai-catalog.json`` and its server cards, then connects to one
with the official ``mcp`` SDK client, all against a real Daphne process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp import Client

from mcp_app.protocol.versions import ALL_VERSIONS
from tests.discovery.conftest import assert_valid_card, assert_valid_catalog
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.live import flush_database, live_server_url  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db

CARD_TYPE = "application/mcp-server-card+json"


@pytest.fixture(scope="module")
def site_url(live_server_url: str, django_db_blocker: Any) -> Iterator[str]:  # noqa: F811
    with django_db_blocker.unblock():
        tools = make_endpoint("tools", title="Tools", description="Echo and add.", listed=True)
        tools.tools.add(make_python_tool("echo", "echo"), make_python_tool("add", "add"))
        make_endpoint("private", title="Private", listed=True, auth_mode="oauth")
        make_endpoint("hidden", title="Hidden")
        make_endpoint("off", title="Off", listed=True, enabled=False)
    yield live_server_url
    flush_database(django_db_blocker)


def discover(base_url: str) -> dict[str, dict[str, Any]]:
    """What a discovering client does with a domain: the catalog, then each card's URL."""
    with httpx.Client(base_url=base_url, timeout=10) as http:
        catalog = http.get("/.well-known/ai-catalog.json").raise_for_status().json()
        assert_valid_catalog(catalog)
        cards = {}
        for entry in catalog["entries"]:
            if entry["type"] != CARD_TYPE:
                continue
            response = http.get(entry["url"], headers={"Accept": CARD_TYPE}).raise_for_status()
            assert response.headers["content-type"] == CARD_TYPE
            card = response.json()
            assert_valid_card(card)
            cards[card["name"]] = card
    return cards


def test_a_client_finds_every_listed_endpoint_from_the_base_url(site_url: str) -> None:
    cards = discover(site_url)

    assert sorted(cards) == ["127.0.0.1/private", "127.0.0.1/tools"]
    for slug in ("private", "tools"):
        (remote,) = cards[f"127.0.0.1/{slug}"]["remotes"]
        assert remote["type"] == "streamable-http"
        assert remote["url"] == f"{site_url}/mcp/{slug}"
        assert remote["supportedProtocolVersions"] == list(ALL_VERSIONS)


# "auto" probes with server/discover (2026-07-28), which names the server as initialize does.
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_client_connects_to_a_discovered_endpoint_and_lists_its_tools(
    site_url: str, mode: str
) -> None:
    card = (await asyncio.to_thread(discover, site_url))["127.0.0.1/tools"]
    assert card["_meta"]["mcphost/authorization"] == {"type": "none"}

    async with asyncio.timeout(20), Client(card["remotes"][0]["url"], mode=mode) as client:
        tools = await client.list_tools()
        server_info = client.server_info
        version = client.protocol_version

    assert sorted(tool.name for tool in tools.tools) == ["add", "echo"]
    # The card agrees with what the connected client sees.
    assert server_info is not None
    assert server_info.version == card["version"]
    assert server_info.title == card["title"]
    assert version in card["remotes"][0]["supportedProtocolVersions"]


def test_an_oauth_card_leads_to_the_challenge_the_endpoint_sends(site_url: str) -> None:
    card = discover(site_url)["127.0.0.1/private"]
    authorization = card["_meta"]["mcphost/authorization"]

    with httpx.Client(timeout=10) as http:
        metadata = http.get(authorization["resourceMetadata"]).raise_for_status().json()
        refused = http.post(
            card["remotes"][0]["url"],
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
        )

    assert metadata["resource"] == authorization["resource"] == card["remotes"][0]["url"]
    assert refused.status_code == 401
    assert authorization["resourceMetadata"] in refused.headers["www-authenticate"]


def test_a_second_fetch_revalidates_with_the_etag(site_url: str) -> None:
    with httpx.Client(base_url=site_url, timeout=10) as http:
        first = http.get("/mcp/tools/server-card").raise_for_status()
        again = http.get("/mcp/tools/server-card", headers={"If-None-Match": first.headers["etag"]})

    assert again.status_code == 304
    assert again.content == b""
