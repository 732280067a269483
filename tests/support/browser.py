"""Headless Chromium for browser tests: Debian's ``chromium`` driven by Playwright.

Playwright's own browser download does not work on our machines, so tests launch the system
binary (``dev.py test`` installs Debian's package when it is missing and it runs as root).
Screenshots go to a temporary folder whose path is printed, to be looked at after the run.
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
