"""MCP Apps end to end against a real Daphne: the official ``mcp`` SDK client sees a tool's
view linked in tools/list (both eras) only when it declares the extension, and reads the
ui:// view with its MIME type and _meta.ui; an operator's try-it page, in headless Chromium,
shows the tool's result inside the view, in an iframe sandboxed to scripts and under the CSP
built from the view's metadata.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from mcp import Client
from mcp.client import advertise
from playwright.sync_api import Browser, expect

from mcp_app.executors.python import tool_functions
from mcp_app.models import CallLog
from mcp_app.protocol import apps
from mcp_app.services.catalog_writes import resource_create
from tests.apps.conftest import SAMPLE_VIEW, assert_valid, sdk_view
from tests.audit.conftest import wait_for
from tests.support.browser import admin_login_state, open_page, static_site
from tests.support.catalog import make_endpoint, make_python_tool

pytestmark = pytest.mark.django_db

SLUG = "apps"
VIEW_URI = "ui://apps/echo"
UI_META = {"csp": {"connectDomains": ["https://api.example.com"]}, "prefersBorder": True}
PASSWORD = "apps-browser-password"
# "auto" probes with server/discover and speaks 2026-07-28; "legacy" initializes (2025-11-25).
MODES = {"legacy": "2025-11-25", "auto": "2026-07-28"}


@pytest.fixture(scope="module")
def site(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    with django_db_blocker.unblock():
        endpoint = make_endpoint(SLUG)
        view = resource_create(
            uri=VIEW_URI,
            name="echo-view",
            mime_type=apps.MIME_TYPE,
            text=SAMPLE_VIEW,
            ui_meta=UI_META,
            endpoints=[endpoint],
        )
        echo = make_python_tool(
            "echo",
            "echo",
            input_schema=dict(tool_functions()["echo"].input_schema),
            meta={"ui": {"visibility": ["model", "app"]}},
            ui_resource_uri=view.uri,
        )
        endpoint.tools.add(echo)
        # The same tool shown by a view that runs the extension's own SDK, on its own endpoint.
        sdk_endpoint = make_endpoint("apps-sdk")
        resource_create(
            uri="ui://apps/sdk",
            name="sdk-view",
            mime_type=apps.MIME_TYPE,
            text=sdk_view(),
            endpoints=[sdk_endpoint],
        )
        echo_sdk = make_python_tool(
            "echo_sdk",
            "echo",
            input_schema=dict(tool_functions()["echo"].input_schema),
            ui_resource_uri="ui://apps/sdk",
        )
        sdk_endpoint.tools.add(echo_sdk)
        User.objects.create_superuser("operator", "op@example.com", PASSWORD)
        ids = {"tool": echo.pk, "sdk_tool": echo_sdk.pk}
    with static_site(django_db_blocker) as url:
        yield {"url": url, **ids}


def read_recorded(version: str) -> bool:
    """Whether the server's call log holds the view's read (waits for its batch writer)."""
    try:
        return bool(
            wait_for(
                lambda: CallLog.objects.filter(
                    rpc_method="resources/read", target=VIEW_URI, protocol_version=version
                ).exists()
            )
        )
    finally:
        connection.close()  # this thread's own connection


def renders_views() -> list[Any]:
    return [advertise(apps.EXTENSION, {"mimeTypes": [apps.MIME_TYPE]})]


@pytest.mark.parametrize("mode", list(MODES))
async def test_a_client_that_renders_views_finds_and_reads_the_view(
    site: dict[str, Any], mode: str
) -> None:
    url = f"{site['url']}/mcp/{SLUG}"
    async with asyncio.timeout(20), Client(url, mode=mode, extensions=renders_views()) as client:
        tools = await client.list_tools()
        read = await client.read_resource(VIEW_URI)
        version = client.protocol_version

    assert version == MODES[mode]
    (tool,) = tools.tools
    ui = tool.meta["ui"] if tool.meta else None
    assert ui == {"visibility": ["model", "app"], "resourceUri": VIEW_URI}
    assert_valid("McpUiToolMeta", ui)
    (contents,) = [item.model_dump(by_alias=True, exclude_none=True) for item in read.contents]
    assert contents["mimeType"] == apps.MIME_TYPE
    assert contents["text"] == SAMPLE_VIEW
    assert contents["_meta"] == {"ui": UI_META}
    assert_valid("McpUiResourceMeta", contents["_meta"]["ui"])
    # An ordinary read, in the call log like any other.
    assert await asyncio.to_thread(read_recorded, version)


@pytest.mark.parametrize("mode", list(MODES))
async def test_a_client_without_the_extension_sees_a_plain_tool(
    site: dict[str, Any], mode: str
) -> None:
    async with asyncio.timeout(20), Client(f"{site['url']}/mcp/{SLUG}", mode=mode) as client:
        tools = await client.list_tools()

    (tool,) = tools.tools
    assert tool.meta == {"ui": {"visibility": ["model", "app"]}}


def test_the_try_it_page_shows_the_result_in_the_sandboxed_view(
    browser: Browser, site: dict[str, Any]
) -> None:
    base = site["url"]
    state = admin_login_state(browser, base, "operator", PASSWORD)
    page = open_page(browser, state, {"width": 1280, "height": 900}, "light")
    page.goto(f"{base}/admin/mcp_app/tool/{site['tool']}/try/")
    page.fill("#id_arguments", json.dumps({"message": "hello from the view"}))
    page.click("#try-it input[type=submit]")

    frame_element = page.locator("#try-it-view iframe")
    expect(frame_element).to_have_attribute("sandbox", "allow-scripts")
    view = page.frame_locator("#try-it-view iframe")
    expect(view.locator("#status")).to_have_text("shown")
    expect(view.locator("#result")).to_have_text("hello from the view")
    body = view.locator("body")
    expect(body).to_have_attribute("data-isolated", "yes")
    # The undeclared request was refused by the CSP built from _meta.ui.
    expect(body).to_have_attribute("data-refused", '["connect-src"]')
    received = json.loads(body.get_attribute("data-received") or "[]")
    csp = page.locator("#try-it-view-csp").inner_text()

    assert [message.pop("jsonrpc") for message in received] == ["2.0"] * 3
    # The schema's notifications are the messages inside the JSON-RPC envelope.
    initialize, tool_input, tool_result = received
    assert_valid("McpUiInitializeResult", initialize["result"])
    assert (
        initialize["result"]["hostContext"]["toolInfo"]["tool"]["_meta"]["ui"]["resourceUri"]
        == VIEW_URI
    )
    assert_valid("McpUiToolInputNotification", tool_input)
    assert tool_input["params"] == {"arguments": {"message": "hello from the view"}}
    assert_valid("McpUiToolResultNotification", tool_result)
    assert tool_result["params"]["content"] == [{"type": "text", "text": "hello from the view"}]
    assert "connect-src https://api.example.com;" in csp


def test_a_view_built_on_the_extensions_own_sdk_gets_the_result(
    browser: Browser, site: dict[str, Any]
) -> None:
    base = site["url"]
    state = admin_login_state(browser, base, "operator", PASSWORD)
    page = open_page(browser, state, {"width": 1280, "height": 900}, "light")
    page.goto(f"{base}/admin/mcp_app/tool/{site['sdk_tool']}/try/")
    page.fill("#id_arguments", json.dumps({"message": "hello from the SDK"}))
    page.click("#try-it input[type=submit]")

    view = page.frame_locator("#try-it-view iframe")
    body = view.locator("body")
    expect(body).to_have_attribute("data-connected", "yes")
    expect(view.locator("#result")).to_have_text("hello from the SDK")
    expect(body).to_have_attribute(
        "data-input", json.dumps({"message": "hello from the SDK"}, separators=(",", ":"))
    )
    expect(body).to_have_attribute("data-host", "mcphost-admin")
    expect(body).to_have_attribute("data-tool", "echo_sdk")
