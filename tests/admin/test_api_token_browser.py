"""A new API token in headless Chromium (issue #28): it is shown once, so a copy button puts
all of it on the clipboard, with navigator.clipboard or, where a page has none, the fallback;
a double-click selects all of it (it selected only "mcpk_"); and the message fits a 390 px
phone in dark mode.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page

from tests.support.browser import (
    DESKTOP,
    PHONE,
    admin_login_state,
    open_page,
    screenshot_dir,
    static_site,
)
from tests.support.page_checks import overflow

pytestmark = pytest.mark.django_db

PASSWORD = "api-token-password"


@pytest.fixture(scope="module")
def site(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    with django_db_blocker.unblock():
        operator = User.objects.create_superuser("operator", "op@example.com", PASSWORD)
    with static_site(django_db_blocker) as url:
        yield {"url": url, "user": operator.pk}


@pytest.fixture
def login_state(browser: Browser, site: dict[str, Any]) -> Any:
    return admin_login_state(browser, site["url"], "operator", PASSWORD)


def issue_token(page: Page, site: dict[str, Any], name: str) -> str:
    """Add a token on the admin's form; return the key its message shows."""
    page.goto(f"{site['url']}/admin/mcp_app/apitoken/add/")
    # The user field is an autocomplete: choose the option as its widget would.
    page.evaluate(
        "(pk) => document.querySelector('#id_user').add(new Option('operator', pk, true, true))",
        str(site["user"]),
    )
    page.fill("#id_name", name)
    page.click("input[name=_save]")
    token = page.locator("code#new-api-token")
    token.wait_for()
    return token.inner_text()


def selection(page: Page) -> str:
    return page.evaluate("() => window.getSelection().toString()")


@pytest.mark.parametrize(
    ("viewport", "scheme"), [(DESKTOP, "light"), (PHONE, "dark")], ids=["1366-light", "390-dark"]
)
def test_the_copy_button_copies_the_whole_token(
    browser: Browser, login_state: Any, site: dict[str, Any], viewport: dict[str, int], scheme: str
) -> None:
    page = open_page(browser, login_state, viewport, scheme)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site["url"])
    key = issue_token(page, site, f"ci-{scheme}")
    page.screenshot(path=screenshot_dir(f"api-token-{scheme}") / "issued.png", full_page=True)

    assert key.startswith("mcpk_") and len(key) > 40
    page.click("button.copy[data-copy-target=new-api-token]")
    assert page.evaluate("() => navigator.clipboard.readText()") == key
    assert page.locator("button.copy").inner_text() == "Copied"
    assert overflow(page) == []
    page.context.close()


def test_a_double_click_selects_the_whole_token(
    browser: Browser, login_state: Any, site: dict[str, Any]
) -> None:
    page = open_page(browser, login_state, PHONE, "light")
    key = issue_token(page, site, "ci-select")

    page.dblclick("code#new-api-token")
    assert selection(page) == key
    page.evaluate("() => window.getSelection().removeAllRanges()")
    page.click("code#new-api-token")
    assert selection(page) == key
    page.context.close()


def test_the_copy_button_falls_back_where_the_clipboard_api_is_missing(
    browser: Browser, login_state: Any, site: dict[str, Any]
) -> None:
    page = open_page(browser, login_state, DESKTOP, "light")
    # A page served over plain http on a LAN address has no navigator.clipboard.
    page.add_init_script("delete Navigator.prototype.clipboard")
    key = issue_token(page, site, "ci-fallback")
    copied = page.evaluate(
        """() => new Promise((resolve) => {
          document.addEventListener('copy', () => resolve(document.getSelection().toString()),
                                    {once: true});
          document.querySelector('button.copy').click();
        })"""
    )

    assert copied == key
    assert page.locator("button.copy").inner_text() == "Copied"
    page.context.close()
