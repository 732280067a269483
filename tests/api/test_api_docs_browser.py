"""The API docs (/api/docs/) in headless Chromium (issue #28): Swagger UI followed neither
dark mode nor the site's look. Now the page carries the site's header and links, and in dark
mode (the system's, or the admin's stored theme) Swagger UI is dark too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page

from tests.support.browser import open_page, screenshot_dir
from tests.support.live import asgi_server

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def site(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    with asgi_server("daphne", {"SERVE_STATIC": "1"}) as url:
        yield url


def look(page: Page) -> dict[str, Any]:
    """Whether the page's background and Swagger UI's operations show dark, and its links."""
    return page.evaluate(
        """() => {
          const dark = (colour) => Math.max(...colour.match(/\\d+/g).slice(0, 3).map(Number)) < 128;
          const ui = document.querySelector('.swagger-ui');
          return {
            body_dark: dark(getComputedStyle(document.body).backgroundColor),
            ui_inverted: getComputedStyle(ui).filter.includes('invert'),
            links: [...document.querySelectorAll('header.site-header a')]
              .map(a => a.getAttribute('href')),
          };
        }"""
    )


def open_docs(browser: Browser, site: str, scheme: str, stored: str | None = None) -> Page:
    page = open_page(browser, None, {"width": 1366, "height": 900}, scheme)
    if stored is not None:
        page.add_init_script(f"localStorage.setItem('theme', '{stored}')")
    page.goto(f"{site}/api/docs/")
    page.locator(".swagger-ui .opblock").first.wait_for()
    return page


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_swagger_ui_follows_the_colour_scheme(browser: Browser, site: str, scheme: str) -> None:
    page = open_docs(browser, site, scheme)
    page.screenshot(path=screenshot_dir(f"api-docs-{scheme}") / "docs.png")

    found = look(page)
    assert found["body_dark"] == found["ui_inverted"] == (scheme == "dark")
    # Signed out: the links every visitor may follow (the call log needs its permission).
    assert {"/admin/", "/endpoints/", "/api/docs/"} <= set(found["links"])
    page.context.close()


@pytest.mark.parametrize(("system", "stored"), [("light", "dark"), ("dark", "light")])
def test_swagger_ui_follows_the_admins_stored_theme(
    browser: Browser, site: str, system: str, stored: str
) -> None:
    page = open_docs(browser, site, system, stored)

    found = look(page)
    assert found["body_dark"] == found["ui_inverted"] == (stored == "dark")
    page.context.close()
