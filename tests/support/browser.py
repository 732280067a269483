"""Headless Chromium for browser tests: Debian's ``chromium`` driven by Playwright.

Playwright's own browser download does not work on our machines, so tests launch the system
binary (``dev.py test`` installs Debian's package when it is missing and it runs as root).
Screenshots go to a temporary folder whose path is printed, to be looked at after the run.

What every browser module sets up the same way lives here: the two sizes looked at
(``DESKTOP``, ``PHONE``), the live Daphne serving static files whose rows are flushed after
the module (``static_site``), Chromium (``chromium``), and a signed-in admin session
(``admin_login_state``) for pages opened at a size and colour scheme (``open_page``). A
module's fixtures are then one line each.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.support.live import asgi_server, flush_database

# The sizes pages are looked at: a laptop and a phone.
DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip


def chromium_path() -> str:
    found = shutil.which("chromium") or (CHROMIUM if Path(CHROMIUM).exists() else None)
    if found is None:
        pytest.fail("chromium is not installed: apt-get install chromium (dev.py test does it)")
    return found


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    """Launch headless Chromium; closed when the block ends."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def static_site(django_db_blocker: Any) -> Iterator[str]:
    """A live Daphne serving the site and its static files; yields its base URL. Every row
    committed meanwhile is flushed when the block ends (a module's set-up rows included)."""
    with asgi_server("daphne", {"SERVE_STATIC": "1"}) as url:
        yield url
    flush_database(django_db_blocker)


def screenshot_dir(name: str) -> Path:
    """A fresh folder for this test module's screenshots (printed so it can be found)."""
    path = Path(tempfile.mkdtemp(prefix=f"mcphost-{name}-screenshots-"))
    print(f"screenshots: {path}")
    return path


def admin_login_state(browser: Browser, base_url: str, username: str, password: str) -> Any:
    """Sign ``username`` in through the admin's login form; the cookies, for new contexts."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{base_url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    expect(page).to_have_url(f"{base_url}/admin/")
    state = context.storage_state()
    context.close()
    return state


def open_page(browser: Browser, state: Any, viewport: dict[str, int], scheme: str) -> Page:
    """A page in a fresh context: signed in with ``state`` (None: anonymous), at that size and
    colour scheme ("light" or "dark")."""
    context = browser.new_context(
        viewport=viewport,  # type: ignore[arg-type]
        color_scheme=scheme,  # type: ignore[arg-type]
        storage_state=state,
    )
    page = context.new_page()
    page.set_default_timeout(10_000)
    return page
