"""The overview's live figures and filters, per-tool figures and the request id, used in
headless Chromium as an operator would: at desktop and phone width, light and dark, by
keyboard, against one live Daphne that real MCP clients talk to."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page, expect

from mcp_app.models import Tool
from tests.audit.factories import make_call
from tests.support.browser import (
    DESKTOP,
    PHONE,
    admin_login_state,
    open_page,
    screenshot_dir,
    static_site,
)
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.page_checks import focused, overflow
from tests.support.raw_mcp import JSON_HEADERS
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db

PASSWORD = "cockpit-figures-password"
LOOKS = pytest.mark.parametrize(
    ("viewport", "scheme"),
    [(DESKTOP, "light"), (DESKTOP, "dark"), (PHONE, "light"), (PHONE, "dark")],
    ids=["desktop-light", "desktop-dark", "phone-light", "phone-dark"],
)
REQUEST_ID = "feedc0ffee0042"


@pytest.fixture(scope="module")
def site(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    """Two endpoints each with a tool named ``echo`` (calls on both), and an operator."""
    with django_db_blocker.unblock():
        demo = make_endpoint("demo", title="Demo")
        other = make_endpoint("other", title="Other")
        mine = make_python_tool("echo", "echo", capture_mode=Tool.Capture.FULL)
        theirs = make_python_tool("echo", "echo")
        demo.tools.add(mine, make_python_tool("add", "add"))
        other.tools.add(theirs)
        for _ in range(3):
            make_call(other, target="echo", status="tool_error")
        make_call(demo, target="echo", request_id=REQUEST_ID)
        User.objects.create_superuser("operator", "op@example.com", PASSWORD)
        ids = {"mine": mine.pk, "theirs": theirs.pk}
    with static_site(django_db_blocker) as url:
        yield {"url": url, **ids}


@pytest.fixture
def login_state(browser: Browser, site: dict[str, Any]) -> dict[str, Any]:
    return admin_login_state(browser, site["url"], "operator", PASSWORD)


def tab_to(page: Page, selector: str, limit: int = 80) -> None:
    """Press Tab until ``selector`` has focus (bounded), checking focus shows on the way."""
    target = page.locator(selector).first
    for _ in range(limit):
        page.keyboard.press("Tab")
        now = focused(page)
        assert now["tag"] == "body" or (now["outline"] and now["visible"]), now
        if target.evaluate("el => el === document.activeElement"):
            return
    raise AssertionError(f"Tab never reached {selector}")


def reload_until(page: Page, selector: str, text: str, seconds: float = 10) -> None:
    """Reload until ``selector`` reads ``text`` (the call log is written after the answer)."""

    def reads() -> bool:
        if page.locator(selector).inner_text().strip() == text:
            return True
        page.reload()
        return False

    wait_until(reads, f"{selector} reading {text!r}", timeout=seconds, interval=0.1)


def legacy_session(http: httpx.Client, url: str, name: str, version: str) -> str:
    init = {
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": name, "version": version}},
    }  # fmt: skip
    response = http.post(url, headers=JSON_HEADERS, json=init)
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    headers = {**JSON_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}  # fmt: skip
    assert http.post(url, headers=headers, json=call).status_code == 200
    return session


@LOOKS
def test_the_overview_counts_an_open_stream_and_narrows_to_a_client_program(
    browser: Browser,
    login_state: dict[str, Any],
    site: dict[str, Any],
    viewport: dict[str, int],
    scheme: str,
) -> None:
    shots = screenshot_dir(f"overview-{viewport['width']}-{scheme}")
    mcp = f"{site['url']}/mcp/demo"
    client_name = f"look-{viewport['width']}-{scheme}"
    page = open_page(browser, login_state, viewport, scheme)
    with httpx.Client(timeout=10) as http:
        session = legacy_session(http, mcp, client_name, "3.1")
        stream_headers = {"accept": "text/event-stream", "mcp-session-id": session,
                          "mcp-protocol-version": "2025-11-25"}  # fmt: skip
        with http.stream("GET", mcp, headers=stream_headers) as stream:
            assert stream.status_code == 200
            page.goto(f"{site['url']}/audit/overview/")
            expect(page.locator("#open-streams")).to_have_text("1")
            expect(page.locator("#open-streams + .muted")).to_contain_text("this web process")
        # Closed by the client: the server notices and counts it no more.
        reload_until(page, "#open-streams", "0")

    # By keyboard: type the client program's name into the filter and submit.
    page.goto(f"{site['url']}/audit/overview/")
    tab_to(page, "#id_client_name")
    page.keyboard.type(client_name)
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(f"client_name={client_name}"))
    reload_until(page, "#busiest tbody tr td:first-child", "add")
    page.screenshot(path=shots / "overview-filtered.png", full_page=True)
    assert page.locator("#busiest tbody tr").count() == 1
    expect(page.locator("#client-programs tbody tr")).to_have_count(1)
    expect(page.locator("#client-programs tbody tr")).to_contain_text("3.1")
    assert overflow(page) == []
    # The tool's link keeps the filter: the list shows this program's call only.
    tab_to(page, "#busiest a")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/audit/\?.*client_name="))
    expect(page.locator("#calls tbody tr")).to_have_count(1)
    assert overflow(page) == []
    page.context.close()


@LOOKS
def test_a_request_id_is_found_by_keyboard_and_shown_on_its_call(
    browser: Browser,
    login_state: dict[str, Any],
    site: dict[str, Any],
    viewport: dict[str, int],
    scheme: str,
) -> None:
    page = open_page(browser, login_state, viewport, scheme)
    page.goto(f"{site['url']}/audit/")
    tab_to(page, "#id_request_id")
    page.keyboard.type(REQUEST_ID)
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(f"request_id={REQUEST_ID}"))
    expect(page.locator("#calls tbody tr")).to_have_count(1)
    tab_to(page, "#calls tbody a")
    page.keyboard.press("Enter")
    expect(page.locator("#request-id")).to_contain_text(REQUEST_ID)
    assert overflow(page) == []
    # The search box finds it too.
    page.goto(f"{site['url']}/audit/?q={REQUEST_ID}")
    expect(page.locator("#calls tbody tr")).to_have_count(1)
    page.context.close()


@LOOKS
def test_each_same_named_tool_shows_only_its_own_calls_in_the_admin(
    browser: Browser,
    login_state: dict[str, Any],
    site: dict[str, Any],
    viewport: dict[str, int],
    scheme: str,
) -> None:
    shots = screenshot_dir(f"figures-{viewport['width']}-{scheme}")
    page = open_page(browser, login_state, viewport, scheme)
    page.goto(f"{site['url']}/admin/mcp_app/tool/")
    page.screenshot(path=shots / "tools.png", full_page=True)
    figures = page.evaluate(
        """() => [...document.querySelectorAll('#result_list tbody tr')].map(row => [
             row.querySelector('.field-name').innerText.trim(),
             row.querySelector('.field-endpoint_list').innerText.trim(),
             row.querySelector('.field-calls_24h').innerText.trim(),
             row.querySelector('.field-errors_24h').innerText.trim(),
           ])"""
    )
    echo = sorted(row for row in figures if row[0] == "echo")
    assert [row[1:] for row in echo] == [["demo", "1", "0 (0.0%)"], ["other", "3", "3 (100.0%)"]]
    # By keyboard, the other endpoint's calls link leads to exactly its three calls.
    theirs = f"tr:has(a[href$='/tool/{site['theirs']}/change/']) .field-calls_24h a"
    target = page.locator(theirs)
    for _ in range(120):
        page.keyboard.press("Tab")
        now = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
        assert now != "none" or page.evaluate("() => document.activeElement === document.body")
        if target.evaluate("el => el === document.activeElement"):
            break
    else:
        raise AssertionError("Tab never reached the calls link")
    page.keyboard.press("Enter")
    expect(page.locator("#calls tbody tr")).to_have_count(3)
    assert overflow(page) == []
    page.goto(f"{site['url']}/admin/mcp_app/tool/{site['mine']}/change/")
    expect(page.locator("table.mcp-figures").first).to_contain_text("Calls")
    print(json.dumps(figures))
    page.context.close()
