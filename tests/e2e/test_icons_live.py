"""Icons end to end, against a real Daphne process: a 2025-11-25 client (the official ``mcp``
SDK) sees them in ``serverInfo`` and every list, a 2024-11-05 session sees none, the URL of an
uploaded icon serves its bytes as an image and nothing else, and the server card names them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from mcp_app.services.catalog_writes import (
    endpoint_create,
    prompt_create,
    resource_create,
    resource_template_create,
    tool_create,
)
from mcp_app.services.icons import icon_check, icon_store
from tests.discovery.conftest import assert_valid_card
from tests.support.live import flush_database, live_server_url  # noqa: F401  (fixture)
from tests.support.raw_mcp import JSON_HEADERS

pytestmark = pytest.mark.django_db

PNG = (Path(__file__).parents[1] / "services" / "icon_images" / "icon-16x16.png").read_bytes()
LINKED = {"src": "https://cdn.example.org/tool.svg", "mimeType": "image/svg+xml", "sizes": ["any"]}


@pytest.fixture(scope="module")
def site(live_server_url: str, django_db_blocker: Any) -> Iterator[dict[str, Any]]:  # noqa: F811
    """An endpoint with an uploaded icon, and one item of each kind with icons."""
    with django_db_blocker.unblock():
        icon = icon_check(PNG, filename="logo.png")
        icon_store(icon=icon)
        uploaded = icon.icon(theme="light")
        endpoint = endpoint_create(
            slug="pics", title="Pictures", auth_mode="public", listed=True, icons=[uploaded]
        )
        tool_create(
            name="shout",
            description="Shouts.",
            kind="template",
            config={"template": "HI"},
            icons=[uploaded, LINKED],
            endpoints=[endpoint],
        )
        resource_create(
            uri="demo://readme", name="readme", text="hello", icons=[uploaded],
            endpoints=[endpoint],
        )  # fmt: skip
        resource_template_create(
            uri_template="demo://notes/{id}", name="note", kind="template",
            config={"template": "note {{ id }}"}, icons=[uploaded], endpoints=[endpoint],
        )  # fmt: skip
        prompt_create(
            name="greet", description="Greets.", messages=[{"role": "user", "text": "Hi"}],
            icons=[LINKED], endpoints=[endpoint],
        )  # fmt: skip
    base = live_server_url
    public = {**uploaded, "src": base + uploaded["src"]}
    yield {"url": f"{base}/mcp/pics", "base": base, "uploaded": public, "path": uploaded["src"]}
    flush_database(django_db_blocker)


def _dump(items: Any) -> list[dict[str, Any]]:
    return [icon.model_dump(by_alias=True, exclude_none=True) for icon in items or ()]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_client_sees_icons_in_server_info_and_every_list(
    site: dict[str, Any], mode: str
) -> None:
    async with asyncio.timeout(20), Client(site["url"], mode=mode) as client:
        version = client.protocol_version
        server_info = client.server_info
        tools = (await client.list_tools()).tools
        resources = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
        prompts = (await client.list_prompts()).prompts

    assert version == {"legacy": "2025-11-25", "auto": "2026-07-28"}[mode]
    uploaded = site["uploaded"]
    assert server_info is not None
    assert _dump(server_info.icons) == [uploaded]
    assert _dump(tools[0].icons) == [uploaded, LINKED]
    assert _dump(resources[0].icons) == [uploaded]
    assert _dump(templates[0].icons) == [uploaded]
    assert _dump(prompts[0].icons) == [LINKED]


def _result(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("application/json"):
        body = response.json()
    else:  # one SSE event carrying the response
        body = json.loads(
            next(line for line in response.text.splitlines() if line.startswith("data: {"))[6:]
        )
    return dict(body["result"])


def test_a_2024_11_05_session_gets_no_icons(site: dict[str, Any]) -> None:
    with httpx.Client(timeout=10) as http:
        opened = http.post(
            site["url"],
            headers=JSON_HEADERS,
            json={
                "jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {
                    "protocolVersion": "2024-11-05", "capabilities": {},
                    "clientInfo": {"name": "old", "version": "1"},
                },
            },
        )  # fmt: skip
        initialized = _result(opened)
        headers = {**JSON_HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
        http.post(
            site["url"],
            headers=headers,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        ).raise_for_status()
        lists = {
            method: _result(
                http.post(
                    site["url"],
                    headers=headers,
                    json={"jsonrpc": "2.0", "id": index, "method": method},
                )
            )
            for index, method in enumerate(
                ["tools/list", "resources/list", "resources/templates/list", "prompts/list"], 1
            )
        }

    assert initialized["protocolVersion"] == "2024-11-05"
    assert initialized["serverInfo"] == {"name": "mcphost", "version": "0.1.0"}
    items = [item for result in lists.values() for key in result for item in result[key]]
    assert len(items) == 4
    assert not [item for item in items if "icons" in item]


def test_the_icon_url_serves_the_image_and_nothing_else(site: dict[str, Any]) -> None:
    with httpx.Client(timeout=10) as http:
        response = http.get(site["uploaded"]["src"])
        again = http.get(
            site["uploaded"]["src"], headers={"If-None-Match": response.headers["etag"]}
        )
        wrong_extension = http.get(site["base"] + site["path"].replace(".png", ".gif"))
        unknown = http.get(site["base"] + "/icons/" + "0" * 64 + ".png")
        posted = http.post(site["uploaded"]["src"], content=b"x")

    assert response.status_code == 200
    assert response.content == PNG
    assert response.headers["content-type"] == "image/png"
    assert response.headers["content-length"] == str(len(PNG))
    assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["content-security-policy"].startswith("default-src 'none'")
    assert "sandbox" in response.headers["content-security-policy"]
    assert again.status_code == 304
    assert wrong_extension.status_code == unknown.status_code == 404
    assert posted.status_code == 405


def test_the_server_card_names_the_endpoint_icons(site: dict[str, Any]) -> None:
    with httpx.Client(timeout=10) as http:
        card = http.get(site["url"] + "/server-card").raise_for_status().json()

    assert_valid_card(card)
    assert card["icons"] == [site["uploaded"]]
