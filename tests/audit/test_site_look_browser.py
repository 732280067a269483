"""One look for the staff pages outside the admin, in headless Chromium: the audit pages, the
endpoint and connect pages, sign-in and OAuth consent share base.html and site.css, wear the
admin's colours in light and dark, follow the admin's theme toggle, fit 390 px, and can be
used from the keyboard (a skip link, every main control reached by Tab, focus always shown).

One live Daphne serves the whole module.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page, expect

from mcp_app.models import Endpoint, Session, Tool
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
from tests.support.oauth import REDIRECT_URI, make_client
from tests.support.page_checks import focused, overflow

# Sets up the test database; the browser starts after it (function scope), because Playwright's
# event loop makes Django refuse ORM calls (SynchronousOnlyOperation) while it runs.
pytestmark = pytest.mark.django_db

PASSWORD = "site-look-password"
VIEWPORTS = pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
SCHEMES = pytest.mark.parametrize("scheme", ["light", "dark"])
VERIFIER = "v" * 64
CHALLENGE = (
    base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).rstrip(b"=").decode()
)


@pytest.fixture(scope="module")
def site(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    """A Daphne serving static files; a public and an OAuth endpoint, calls, a session."""
    with django_db_blocker.unblock():
        demo = make_endpoint("demo", title="Demo")
        make_endpoint("secure", auth_mode=Endpoint.AuthMode.OAUTH)
        demo.tools.add(make_python_tool("echo", "echo", capture_mode=Tool.Capture.FULL))
        User.objects.create_superuser("operator", "op@example.com", PASSWORD)
        Session.objects.create(
            id="s-1", endpoint=demo, protocol_version="2025-11-25",
            client_info={"name": "Inspector", "version": "0.9"},
        )  # fmt: skip
        inspector = {"client_name": "Inspector", "client_version": "0.9",
                     "client_info": {"name": "Inspector", "version": "0.9"}}  # fmt: skip
        call = make_call(
            demo, request_id="4bf92f3577b34da6a3ce929d0e0e4736", session_id="s-1", **inspector
        )
        make_call(
            demo, target="add", status="tool_error", duration_ms=900.0, session_id="s-1",
            **inspector,
        )  # fmt: skip
        client_id = make_client("Look test client").client_id
    with static_site(django_db_blocker) as url:
        yield {"url": url, "call": call.pk, "client_id": client_id}


def consent_path(site: dict[str, Any]) -> str:
    params = {
        "response_type": "code", "client_id": site["client_id"], "redirect_uri": REDIRECT_URI,
        "state": "s", "scope": "mcp:read", "code_challenge": CHALLENGE,
        "code_challenge_method": "S256", "resource": f"{site['url']}/mcp/secure",
    }  # fmt: skip
    return f"/o/authorize/?{urlencode(params)}"


def pages(site: dict[str, Any]) -> dict[str, tuple[str, list[str]]]:
    """Each page of base.html: its path and the controls Tab must reach on it."""
    header = ["a.skip-link", "a.site-name", ".site-nav a[href='/audit/']", "button.theme-toggle"]
    return {
        "audit": ("/audit/", [*header, "#id_endpoint", "#id_request_id", "#id_client_name",
                              "form.filters button[type=submit]", "#live-tail",
                              "a.button[href^='/audit/export.csv']", "#calls tbody a"]),
        "detail": (f"/audit/{site['call']}/", [*header, "#request-id a"]),
        "overview": ("/audit/overview/?client_name=Inspector",
                     [*header, "#id_user", "#id_client", "#id_client_name", "#id_client_version",
                      "form.filters button[type=submit]", "#busiest a", "#client-programs a"]),
        "stats": ("/audit/stats/", [*header, "#id_range", "form.filters button[type=submit]"]),
        "endpoints": ("/endpoints/", [*header, "td.actions a[href$='/connect/']"]),
        "connect": ("/endpoints/secure/connect/", [*header, "button.copy[data-copy-target=url]",
                                                   "button.copy[data-copy-target=code-python]"]),
        "consent": (consent_path(site), [*header, "#authorizationForm button:not(.primary)",
                                         "#authorizationForm button.primary"]),
    }  # fmt: skip


@pytest.fixture
def login_state(browser: Browser, site: dict[str, Any]) -> dict[str, Any]:
    return admin_login_state(browser, site["url"], "operator", PASSWORD)


def colours(page: Page, header: str) -> dict[str, str]:
    """The computed background of the page's body and header."""
    return page.evaluate(
        """(header) => ({
          body: getComputedStyle(document.body).backgroundColor,
          header: getComputedStyle(document.querySelector(header)).backgroundColor,
        })""",
        header,
    )


def is_dark(rgb: str) -> bool:
    return max(int(part) for part in rgb[rgb.index("(") + 1 : -1].split(",")[:3]) < 128


def tab_through(page: Page, wanted: list[str], limit: int = 120) -> list[str]:
    """Press Tab until every ``wanted`` selector had focus; return the problems found.

    Focus may start on a field (the sign-in page's username has autofocus) and Tab goes round
    the page, past the browser's own stop (the body), so each control is met whatever the
    start.
    """
    handles = {selector: page.locator(selector).first for selector in wanted}
    for selector, handle in handles.items():
        assert handle.count() == 1, f"{selector} is not on the page"
    missing = list(wanted)
    problems = []
    for _ in range(limit):
        for selector in list(missing):
            if handles[selector].evaluate("el => el === document.activeElement"):
                missing.remove(selector)
        if not missing:
            break
        page.keyboard.press("Tab")
        now = focused(page)
        if now["tag"] != "body" and not (now["outline"] and now["visible"]):
            problems.append(f"focus not shown on {now}")
    return problems + [f"Tab never reached {selector}" for selector in missing]


@SCHEMES
@VIEWPORTS
def test_every_page_has_the_admins_colours_and_fits_the_width(
    browser: Browser,
    login_state: dict[str, Any],
    site: dict[str, Any],
    viewport: dict[str, int],
    scheme: str,
) -> None:
    shots = screenshot_dir(f"look-{viewport['width']}-{scheme}")
    page = open_page(browser, login_state, viewport, scheme)
    page.goto(f"{site['url']}/admin/")
    admin = colours(page, "#header")
    assert is_dark(admin["body"]) == (scheme == "dark")
    problems: dict[str, list[str]] = {}
    for name, (path, _controls) in pages(site).items():
        response = page.goto(f"{site['url']}{path}")
        assert response is not None and response.status == 200, name
        page.screenshot(path=shots / f"{name}.png", full_page=True)
        if sticking_out := overflow(page):
            problems.setdefault(name, []).extend(sticking_out)
        if (found := colours(page, ".site-header")) != admin:
            problems.setdefault(name, []).append(f"colours {found}, the admin's {admin}")
        sheets = page.evaluate("() => [...document.styleSheets].map(s => s.href)")
        if sheets != [f"{site['url']}/static/mcp_app/site.css"]:
            problems.setdefault(name, []).append(f"stylesheets {sheets}")
    page.context.close()
    # Signed out: the sign-in page, on the same base.
    page = open_page(browser, None, viewport, scheme)
    page.goto(f"{site['url']}/accounts/login/")
    page.screenshot(path=shots / "login.png", full_page=True)
    if sticking_out := overflow(page):
        problems["login"] = sticking_out
    if (found := colours(page, ".site-header")) != admin:
        problems.setdefault("login", []).append(f"colours {found}, the admin's {admin}")
    page.context.close()
    assert problems == {}, json.dumps(problems, indent=1)


@SCHEMES
@VIEWPORTS
def test_tab_reaches_every_main_control_and_focus_always_shows(
    browser: Browser,
    login_state: dict[str, Any],
    site: dict[str, Any],
    viewport: dict[str, int],
    scheme: str,
) -> None:
    page = open_page(browser, login_state, viewport, scheme)
    problems: dict[str, list[str]] = {}
    for name, (path, controls) in pages(site).items():
        page.goto(f"{site['url']}{path}")
        if found := tab_through(page, controls):
            problems[name] = found
    # The skip link is the first stop, shows itself, and leads past the header.
    page.goto(f"{site['url']}/audit/")
    page.keyboard.press("Tab")
    assert focused(page)["text"] == "Skip to content"
    assert focused(page)["visible"]
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.id") == "main"
    page.keyboard.press("Tab")
    assert page.locator("#main").evaluate("(main) => main.contains(document.activeElement)")
    page.context.close()

    page = open_page(browser, None, viewport, scheme)
    page.goto(f"{site['url']}/accounts/login/")
    if found := tab_through(page, ["a.skip-link", "#id_username", "#id_password",
                                   "button[type=submit]"]):  # fmt: skip
        problems["login"] = found
    page.context.close()
    assert problems == {}, json.dumps(problems, indent=1)


@pytest.mark.parametrize("system", ["light", "dark"])
def test_the_admins_theme_choice_holds_on_every_page_and_back(
    browser: Browser, login_state: dict[str, Any], site: dict[str, Any], system: str
) -> None:
    page = open_page(browser, login_state, PHONE, system)
    opposite = "dark" if system == "light" else "light"
    # Chosen in the admin (its toggle cycles auto -> the opposite of the system's first).
    page.goto(f"{site['url']}/admin/")
    page.locator("#header button.theme-toggle").click()
    assert page.evaluate("() => localStorage.getItem('theme')") == opposite
    for name, (path, _controls) in pages(site).items():
        page.goto(f"{site['url']}{path}")
        body = colours(page, ".site-header")["body"]
        assert is_dark(body) == (opposite == "dark"), (name, body)
    expect(page.locator(".site-header button.theme-toggle")).to_have_accessible_name(
        f"Theme: {opposite}"
    )
    # Chosen here: the toggle cycles on to the system's own look, and the admin follows.
    page.locator(".site-header button.theme-toggle").click()
    assert page.evaluate("() => localStorage.getItem('theme')") == system
    assert is_dark(colours(page, ".site-header")["body"]) == (system == "dark")
    page.goto(f"{site['url']}/admin/")
    assert is_dark(colours(page, "#header")["body"]) == (system == "dark")
    page.context.close()
