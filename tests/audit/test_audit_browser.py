"""The audit pages in headless Chromium against a live server: log in, filter, open a call,
watch a new call arrive in the live tail, see the charts, export."""

from __future__ import annotations

import csv
import io
import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import Permission, User
from playwright.sync_api import Browser, Page, expect

from mcp_app.models import Tool
from tests.support.browser import screenshot_dir, static_site
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.waiting import wait_until

# Sets up the test database; the browser starts after it (function scope), because Playwright's
# event loop makes Django refuse ORM calls (SynchronousOnlyOperation) while it runs.
pytestmark = pytest.mark.django_db

PASSWORD = "browser-test-password"
MCP_HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture(scope="module")
def site_url(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    """A Daphne serving static files too, with a catalog and an auditor who sees payloads."""
    with django_db_blocker.unblock():
        endpoint = make_endpoint("browser")
        endpoint.tools.add(
            make_python_tool("echo", "echo", capture_mode=Tool.Capture.FULL),
            make_python_tool("add", "add"),
        )
        user = User.objects.create_user("auditor", password=PASSWORD, is_staff=True)
        user.user_permissions.add(
            *Permission.objects.filter(
                codename__in=["audit_calls", "view_call_payloads", "manage_every_team"]
            )
        )
    with static_site(django_db_blocker) as url:
        yield url


def call_tool(site_url: str, name: str, arguments: dict[str, Any]) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": MODERN_META},
    }
    headers = {**MCP_HEADERS, "mcp-name": name}
    response = httpx.post(f"{site_url}/mcp/browser", headers=headers, json=body, timeout=10)
    assert response.status_code == 200


def wait_recorded(page: Page, site_url: str, count: int) -> None:
    """Wait (bounded) until the server's writer has recorded ``count`` calls.

    Records are written in batches after the response, so a reload right after the calls may
    come before them.
    """
    wait_until(
        lambda: len(page.request.get(f"{site_url}/audit/feed/").json()["rows"]) >= count,
        f"{count} calls recorded",
        timeout=10,
        interval=0.02,
    )


@pytest.fixture
def page(browser: Browser, site_url: str) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1366, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.goto(f"{site_url}/audit/")
    # Anonymous: the login page, which brings the user back to the call log.
    expect(page).to_have_url(f"{site_url}/admin/login/?next=/audit/")
    page.fill("#id_username", "auditor")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    expect(page).to_have_url(f"{site_url}/audit/")
    yield page
    context.close()


def test_filter_inspect_follow_and_chart_the_call_log(page: Page, site_url: str) -> None:
    shots = screenshot_dir("audit")
    for n in range(3):
        call_tool(site_url, "echo", {"message": f"hello {n}"})
    call_tool(site_url, "add", {"a": 1, "b": 2})
    wait_recorded(page, site_url, 4)
    page.reload()
    rows = page.locator("#calls tbody tr")
    expect(rows.filter(has_text="add")).to_have_count(1)
    expect(rows.filter(has_text="echo")).to_have_count(3)
    expect(page.locator(".site-nav a[aria-current=page]")).to_have_text("Audit")
    page.screenshot(path=shots / "list.png", full_page=True)

    # Filter: a shareable URL, and only matching rows.
    page.fill("#id_tool", "echo")
    page.click("button:has-text('Filter')")
    expect(page).to_have_url(f"{site_url}/audit/?tool=echo")
    expect(rows).to_have_count(3)
    expect(rows.filter(has_text="add")).to_have_count(0)

    # Detail: every field, the arguments pretty-printed, a link to the tool's admin page.
    rows.first.locator("a").first.click()
    expect(page.locator("h1")).to_contain_text("Call #")
    expect(page.locator("#arguments")).to_contain_text('"message": "hello 2"')
    expect(page.locator("a:has-text('echo')")).to_have_attribute(
        "href", re.compile(r"/admin/mcp_app/tool/\d+/change/")
    )
    page.screenshot(path=shots / "detail.png", full_page=True)

    # Live tail: a call made while the page is open appears without a reload.
    page.go_back()
    page.check("#live-tail")
    marker = f"live-{uuid.uuid4().hex[:8]}"
    call_tool(site_url, "echo", {"message": marker})
    expect(rows).to_have_count(4)
    expect(rows.first).to_have_class("fresh")
    expect(page.locator("#live-status")).to_contain_text("Live: updated")
    page.screenshot(path=shots / "live.png", full_page=True)
    rows.first.locator("a").first.click()
    expect(page.locator("#arguments")).to_contain_text(marker)

    # Export the filtered list as CSV.
    page.goto(f"{site_url}/audit/?tool=echo")
    with page.expect_download() as download_info:
        page.click("text=Export CSV")
    exported = list(csv.DictReader(io.StringIO(download_info.value.path().read_text())))
    assert [row["target"] for row in exported] == ["echo"] * 4
    with page.expect_download() as download_info:
        page.click("text=Export JSON Lines")
    assert len(download_info.value.path().read_text().splitlines()) == 4

    # Statistics: server-drawn charts of the last 24 hours.
    page.click(".audit-tabs a:has-text('Statistics')")
    expect(page.locator("svg.chart")).to_have_count(4)
    expect(page.locator("#total-calls")).to_have_text("4")
    expect(page.locator("svg.chart rect.ok:not([height='0.0'])")).to_have_count(1)
    expect(page.locator("table.latency").first).to_contain_text("echo")
    page.goto(f"{site_url}/audit/stats/?range=1h")
    expect(page.locator("#total-calls")).to_have_text("5")
    page.screenshot(path=shots / "stats.png", full_page=True)
