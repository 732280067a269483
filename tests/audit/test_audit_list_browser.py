"""The call list's operator columns in headless Chromium: at 1366 px every column (client,
user, tool, status, duration, error) fits the page with nothing scrolled out of sight; at
390 px each call is a labelled card inside the screen; dark mode keeps that layout; quick
ranges and a mistyped filter behave in the browser; the live tail builds the same columns.

One live Daphne serves the module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page, expect

from mcp_app.models import CallLog
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
from tests.support.oauth import make_client
from tests.support.page_checks import overflow

# Sets up the test database; the browser starts after it (function scope), because Playwright's
# event loop makes Django refuse ORM calls (SynchronousOnlyOperation) while it runs.
pytestmark = pytest.mark.django_db

PASSWORD = "list-columns-password"
VIEWPORTS = pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
SCHEMES = pytest.mark.parametrize("scheme", ["light", "dark"])
# Long, realistic values: what makes a column push the table past its box.
ERROR = (
    "Upstream search-index answered HTTP 503: the index 'customer-documents-2026' is being "
    "rebuilt; retry after 120 s (request 4bf92f3577b34da6a3ce929d0e0e4736) " + "detail " * 40
)


@pytest.fixture(scope="module")
def site(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    with django_db_blocker.unblock():
        endpoint = make_endpoint("customer-documents")
        endpoint.tools.add(make_python_tool("echo", "echo"))
        User.objects.create_superuser("operator", "op@example.com", PASSWORD)
        person = User.objects.create_user("margaret.hamilton-longname")
        app = make_client("Claude Desktop for the documentation team")
        for n in range(6):
            make_call(
                endpoint,
                target="search_customer_documents_by_full_text_query",
                status=CallLog.Status.UPSTREAM_ERROR if n % 2 else CallLog.Status.OK,
                error_message=ERROR if n % 2 else "",
                principal=person,
                client_id=app.client_id,
                client_name="claude-desktop-enterprise-edition",
                client_version="0.14.3-beta.2+build.20261125",
                client_info={"name": "claude-desktop-enterprise-edition"},
                rpc_method="resources/templates/list" if n == 5 else "tools/call",
                duration_ms=12345.678,
            )
        make_call(endpoint, client_name="python-httpx", client_version="0.28.1")
    with static_site(django_db_blocker) as url:
        yield url


@pytest.fixture
def login_state(browser: Browser, site: str) -> dict[str, Any]:
    return admin_login_state(browser, site, "operator", PASSWORD)


def table_fit(page: Page) -> dict[str, Any]:
    """How the call table sits in its box and the page: hidden width, and each column's
    header (desktop) or each cell (phone) that ends past the box's right edge."""
    return page.evaluate(
        """() => {
          const box = document.querySelector('#calls').parentElement;
          const right = box.getBoundingClientRect().right;
          const out = (els) => [...els]
            .filter(el => el.getBoundingClientRect().width > 0)
            .filter(el => el.getBoundingClientRect().right > right + 1)
            .map(el => (el.dataset.label || el.textContent.trim().slice(0, 20)) + ' ' +
                       Math.round(el.getBoundingClientRect().right) + ' > ' + Math.round(right));
          // On a phone the headings are visually hidden (each cell carries its label).
          const phone = window.innerWidth < 768;
          return {
            hidden: box.scrollWidth - box.clientWidth,
            headers: phone ? [] : out(document.querySelectorAll('#calls thead th')),
            cells: phone ? out(document.querySelectorAll('#calls tbody td')) : [],
            window: window.innerWidth,
          };
        }"""
    )


@SCHEMES
@VIEWPORTS
def test_the_operator_columns_fit_without_clipping(
    browser: Browser, login_state: dict[str, Any], site: str, viewport: dict[str, int], scheme: str
) -> None:
    shots = screenshot_dir(f"list-{viewport['width']}-{scheme}")
    page = open_page(browser, login_state, viewport, scheme)
    page.goto(f"{site}/audit/")
    rows = page.locator("#calls tbody tr")
    expect(rows).to_have_count(7)
    page.screenshot(path=shots / "list.png", full_page=True)
    fit = table_fit(page)
    assert (fit["hidden"], fit["headers"], fit["cells"]) == (0, [], []), json.dumps(fit)
    assert overflow(page) == []
    failed = rows.filter(has_text="upstream unreachable").first
    for text in ("claude-desktop-enterprise-edition", "margaret.hamilton-longname",
                 "search_customer_documents_by_full_text_query", "12345.7",
                 "Upstream search-index answered HTTP 503"):  # fmt: skip
        expect(failed).to_contain_text(text)
        assert failed.get_by_text(text, exact=False).first.is_visible()
    if viewport is DESKTOP:
        # Every column heading is on screen, in the order an operator reads them.
        headings = page.locator("#calls thead th").all_inner_texts()
        assert [h.split(" (")[0] for h in headings] == [
            "#", "Time", "Client", "User", "Endpoint", "Method", "Tool / target", "Status",
            "ms", "Error",
        ]  # fmt: skip
    else:
        # A card per call, its cells labelled.
        label = failed.locator("td.client").evaluate(
            "td => getComputedStyle(td, '::before').content"
        )
        assert label == '"Client "'
    if scheme == "dark":
        background = page.locator("#calls").evaluate("t => getComputedStyle(t).backgroundColor")
        assert max(int(c) for c in background[background.index("(") + 1 : -1].split(",")[:3]) < 128
    page.context.close()


def test_quick_ranges_and_a_mistyped_filter_in_the_browser(
    browser: Browser, login_state: dict[str, Any], site: str
) -> None:
    page = open_page(browser, login_state, DESKTOP, "light")
    page.goto(f"{site}/audit/?status=failed")
    expect(page.locator("#calls tbody tr")).to_have_count(3)
    page.locator(".quick-ranges a", has_text="1 h").click()
    expect(page).to_have_url(f"{site}/audit/?status=failed&range=1h")
    expect(page.locator(".quick-ranges a[aria-current=true]")).to_have_text("1 h")
    expect(page.locator("#id_range")).to_have_value("1h")
    expect(page.locator("#calls tbody tr")).to_have_count(3)
    # A date that is none: marked at its field, the status filter still applies.
    page.goto(f"{site}/audit/?status=failed&since=last+tuesday")
    expect(page.locator("#id_since")).to_have_attribute("aria-invalid", "true")
    error = page.locator("label:has(#id_since) .field-error")
    expect(error).to_contain_text("Not applied")
    expect(page.locator("#calls tbody tr")).to_have_count(3)
    page.context.close()


def test_the_live_tail_builds_the_same_columns(
    browser: Browser, login_state: dict[str, Any], site: str
) -> None:
    page = open_page(browser, login_state, DESKTOP, "light")
    page.goto(f"{site}/audit/")
    page.check("#live-tail")
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "live-tail-agent", "version": "5"},
    }
    response = httpx.post(
        f"{site}/mcp/customer-documents",
        headers={
            "content-type": "application/json", "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "echo",
        },
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
              "params": {"name": "echo", "arguments": {"message": "hi"}, "_meta": meta}},
        timeout=10,
    )  # fmt: skip
    assert response.status_code == 200
    fresh = page.locator("#calls tbody tr.fresh")
    # Bounded: the writer records the call, then the next 2 s poll brings it.
    expect(fresh).to_have_count(1, timeout=10_000)
    cells = fresh.first.locator("td")
    expect(cells).to_have_count(10)
    expect(fresh.first.locator("td.client a")).to_have_text("live-tail-agent")
    expect(fresh.first.locator("td.client")).to_contain_text("5")
    assert table_fit(page)["hidden"] == 0
    page.context.close()
