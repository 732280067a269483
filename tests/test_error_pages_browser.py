"""The 403, 404 and 500 pages (issue #28): the site's own base.html and site.css, not Django's
bare defaults, so they have the header and its navigation, fit a 390 px phone, follow dark
mode, link home, to the admin, the call log and the API docs, and a 403 names the permission
that is missing.

One live Daphne serves the 403 and 404 pages; the 500 page comes from the real handler500
through Django's test client (a view that fails exists only in this module's URLconf), and the
browser is handed that body at a URL of the live site, so its stylesheet loads as it would.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.urls import path
from playwright.sync_api import Browser, Page, Route

from mcpsite import urls as site_urls
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

PASSWORD = "error-pages-password"
LOOKS = pytest.mark.parametrize(
    ("viewport", "scheme"),
    [(DESKTOP, "light"), (PHONE, "light"), (PHONE, "dark")],
    ids=["1366-light", "390-light", "390-dark"],
)
LINKS = ["/", "/admin/", "/audit/", "/api/docs/"]


def fail(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a bug in a view")


# This module is also the URLconf of the 500 test: the site's, plus a view that fails.
urlpatterns = [path("fails/", fail), *site_urls.urlpatterns]
handler500 = site_urls.handler500


@pytest.fixture(scope="module")
def site(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    """A Daphne serving static files; a staff user who may only view endpoints."""
    with django_db_blocker.unblock():
        clerk = User.objects.create_user("clerk", "clerk@example.com", PASSWORD, is_staff=True)
        clerk.user_permissions.add(Permission.objects.get(codename="view_endpoint"))
    with static_site(django_db_blocker) as url:
        yield url


@pytest.fixture
def clerk_state(browser: Browser, site: str) -> Any:
    return admin_login_state(browser, site, "clerk", PASSWORD)


def look(page: Page) -> dict[str, Any]:
    """What the error page shows: heading, links, phone viewport, body colour, what sticks out."""
    return page.evaluate(
        """() => {
          const rgb = getComputedStyle(document.body).backgroundColor.match(/\\d+/g);
          const viewport = document.querySelector('meta[name=viewport]');
          return {
            heading: (document.querySelector('h1') || {}).textContent || '',
            header: !!document.querySelector('header.site-header nav'),
            links: [...document.querySelectorAll('main a')].map(a => a.getAttribute('href')),
            viewport: viewport ? viewport.content : '',
            dark: Math.max(...rgb.slice(0, 3).map(Number)) < 128,
            text: document.body.innerText,
          };
        }"""
    )


def check(page: Page, scheme: str, heading: str) -> list[str]:
    found = look(page)
    problems = []
    if heading not in found["heading"]:
        problems.append(f"heading {found['heading']!r}")
    if not found["header"]:
        problems.append("no site header")
    if missing := [link for link in LINKS if link not in found["links"]]:
        problems.append(f"no links to {missing}")
    if "width=device-width" not in found["viewport"]:
        problems.append("no phone viewport")
    if found["dark"] != (scheme == "dark"):
        problems.append(f"dark is {found['dark']} in {scheme} mode")
    if sticking_out := overflow(page):
        problems.append(f"wider than the screen: {sticking_out}")
    return problems


@LOOKS
def test_the_404_page_is_the_sites_own(
    browser: Browser, site: str, viewport: dict[str, int], scheme: str
) -> None:
    page = open_page(browser, None, viewport, scheme)
    response = page.goto(f"{site}/no/such/page/")
    page.screenshot(path=screenshot_dir(f"error-404-{viewport['width']}-{scheme}") / "404.png")
    assert response is not None and response.status == 404
    problems = check(page, scheme, "Page not found")
    assert "/no/such/page/" in look(page)["text"]
    page.context.close()
    assert problems == [], json.dumps(problems, indent=1)


@LOOKS
def test_the_403_page_names_the_missing_permission(
    browser: Browser, clerk_state: Any, site: str, viewport: dict[str, int], scheme: str
) -> None:
    shots = screenshot_dir(f"error-403-{viewport['width']}-{scheme}")
    page = open_page(browser, clerk_state, viewport, scheme)
    problems: dict[str, list[str]] = {}
    # A model page of the admin, which raises a bare PermissionDenied, and the call log,
    # which says what it needs.
    for name, where, permission in [
        ("admin", "/admin/mcp_app/tool/", "(mcp_app.view_tool)"),
        ("audit", "/audit/", "(mcp_app.audit_calls)"),
    ]:
        response = page.goto(f"{site}{where}")
        page.screenshot(path=shots / f"{name}.png", full_page=True)
        assert response is not None and response.status == 403, name
        found = check(page, scheme, "You do not have permission")
        if permission not in look(page)["text"]:
            found.append(f"no mention of {permission}")
        if found:
            problems[name] = found
    page.context.close()
    assert problems == {}, json.dumps(problems, indent=1)


@pytest.mark.urls(__name__)
def test_the_500_page_needs_no_database(django_assert_num_queries: Any) -> None:
    client = Client(raise_request_exception=False)
    with django_assert_num_queries(0):
        response = client.get("/fails/")
    assert response.status_code == 500
    page = response.content.decode()
    assert "<h1>Server error</h1>" in page
    assert all(f'href="{link}"' in page for link in LINKS)


@pytest.fixture
def server_error_page() -> bytes:
    """The 500 page's body, fetched before the browser starts (Playwright's event loop would
    make Django refuse the request's connection handling)."""
    return Client(raise_request_exception=False).get("/fails/").content


@pytest.mark.urls(__name__)
@LOOKS
def test_the_500_page_is_the_sites_own(
    server_error_page: bytes, browser: Browser, site: str, viewport: dict[str, int], scheme: str
) -> None:
    body = server_error_page

    def serve(route: Route) -> None:
        route.fulfill(status=500, body=body, content_type="text/html; charset=utf-8")

    page = open_page(browser, None, viewport, scheme)
    page.route(f"{site}/fails/", serve)
    response = page.goto(f"{site}/fails/")
    page.screenshot(path=screenshot_dir(f"error-500-{viewport['width']}-{scheme}") / "500.png")
    assert response is not None and response.status == 500
    problems = check(page, scheme, "Server error")
    page.context.close()
    assert problems == [], json.dumps(problems, indent=1)
