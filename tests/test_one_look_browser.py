"""One look across the admin, the staff pages, the API docs and the browsable API (issue
#28), in headless Chromium: each says the product's name in the same header band, in the
admin's colours in light and dark, links the admin, the call log and the API docs, and fits
a 390 px phone. The pages outside the admin draw that header from one template
(``_site_header.html``) and one stylesheet (``site_header.css``).

One live Daphne serves the whole module.
"""

from __future__ import annotations

import json
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
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.page_checks import overflow

pytestmark = pytest.mark.django_db

PASSWORD = "one-look-password"
LOOKS = pytest.mark.parametrize(
    ("viewport", "scheme"),
    [(DESKTOP, "light"), (DESKTOP, "dark"), (PHONE, "light"), (PHONE, "dark")],
    ids=["1366-light", "1366-dark", "390-light", "390-dark"],
)
# One page of each kind, and the selector of its header band.
PAGES = {
    "admin": ("/admin/", "#header"),
    "staff": ("/audit/", ".site-header"),
    "api-docs": ("/api/docs/", ".site-header"),
    "browsable-api": ("/api/v1/tools/", ".site-header"),
}
LINKS = {"/admin/", "/audit/", "/api/docs/"}


@pytest.fixture(scope="module")
def site(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    with django_db_blocker.unblock():
        endpoint = make_endpoint("look")
        # A long name and description: what a phone must wrap, not scroll.
        endpoint.tools.add(make_python_tool("a_tool_with_a_rather_long_name_indeed", "echo"))
        User.objects.create_superuser("operator", "op@example.com", PASSWORD)
    with static_site(django_db_blocker) as url:
        yield url


@pytest.fixture
def login_state(browser: Browser, site: str) -> Any:
    return admin_login_state(browser, site, "operator", PASSWORD)


def header(page: Page, selector: str) -> dict[str, Any]:
    """The header band: its name, links, colours, and the page's body colour and sheets."""
    return page.evaluate(
        """(selector) => {
          const band = document.querySelector(selector);
          if (!band) return null;
          const name = band.querySelector('#site-name a, a.site-name');
          return {
            name: name ? name.textContent.trim() : '',
            name_colour: name ? getComputedStyle(name).color : '',
            band: getComputedStyle(band).backgroundColor,
            links: [...document.querySelectorAll('a')].map(a => a.getAttribute('href')),
            body: getComputedStyle(document.body).backgroundColor,
            // A page without a phone viewport is laid out 980 px wide and shrunk.
            width: window.innerWidth,
            // Top-level sheets and the ones they @import.
            sheets: [...document.styleSheets].flatMap(sheet => [
              sheet.href || '',
              ...[...sheet.cssRules].filter(rule => rule.styleSheet)
                .map(rule => rule.styleSheet.href),
            ]),
          };
        }""",
        selector,
    )


def is_dark(rgb: str) -> bool:
    parts = [int(part) for part in rgb[rgb.index("(") + 1 : -1].split(",")[:3]]
    return max(parts) < 128


@LOOKS
def test_every_kind_of_page_wears_the_same_header(
    browser: Browser, login_state: Any, site: str, viewport: dict[str, int], scheme: str
) -> None:
    shots = screenshot_dir(f"one-look-{viewport['width']}-{scheme}")
    page = open_page(browser, login_state, viewport, scheme)
    seen: dict[str, dict[str, Any]] = {}
    problems: dict[str, list[str]] = {}
    for name, (path, selector) in PAGES.items():
        response = page.goto(f"{site}{path}")
        assert response is not None and response.status == 200, name
        page.screenshot(path=shots / f"{name}.png")
        found = header(page, selector)
        if found is None:
            problems[name] = [f"no {selector}"]
            continue
        seen[name] = found
        wrong = problems.setdefault(name, [])
        if found["name"] != "mcphost":
            wrong.append(f"name {found['name']!r}")
        if missing := LINKS - set(found["links"]):
            wrong.append(f"no link to {sorted(missing)}")
        if is_dark(found["body"]) != (scheme == "dark"):
            wrong.append(f"body {found['body']} in {scheme}")
        if found["width"] != viewport["width"]:
            wrong.append(f"laid out {found['width']} px wide")
        if sticking_out := overflow(page):
            wrong.extend(sticking_out)
        if name != "admin" and not any(
            s.endswith("/mcp_app/site_header.css") for s in found["sheets"]
        ):
            wrong.append(f"header stylesheet not loaded: {found['sheets']}")
    page.context.close()
    admin = seen.get("admin", {})
    for name, found in seen.items():
        for key in ("band", "name_colour"):
            if found[key] != admin.get(key):
                problems.setdefault(name, []).append(
                    f"{key} {found[key]}, admin's {admin.get(key)}"
                )
    assert {name: found for name, found in problems.items() if found} == {}, json.dumps(
        problems, indent=1
    )


def write_forms(page: Page) -> list[str]:
    """The browsable API's write forms on the page (one name per tab: "POST HTML form")."""
    return page.evaluate(
        """() => [...document.querySelectorAll('.tab-content form, form.button-form')]
          .map(form => ((form.getAttribute('data-method') || form.method || '').toUpperCase() +
                        ' ' + (form.closest('.tab-pane')?.id || form.className)))"""
    )


def covered_controls(page: Page, selector: str) -> list[str]:
    """The heading and buttons inside ``selector``, on the screen's height, that something
    else is drawn over: what a user could not read or press (all of them when none shows)."""
    return page.evaluate(
        """(selector) => {
          const controls = [...document.querySelectorAll(
            `${selector} h4, ${selector} button`)];
          const shown = controls.filter(el => {
            const box = el.getBoundingClientRect();
            const y = box.top + box.height / 2;
            return box.width > 0 && y >= 0 && y < window.innerHeight;
          });
          const name = el => el.tagName.toLowerCase() + ' ' + el.textContent.trim().slice(0, 30);
          if (!shown.length) return controls.map(name);
          return shown.filter(el => {
            const box = el.getBoundingClientRect();
            const top = document.elementFromPoint(
              box.left + box.width / 2, box.top + box.height / 2);
            return !top || !(el === top || el.contains(top));
          }).map(name);
        }""",
        selector,
    )


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_browsable_apis_write_forms_fit_a_phone(
    browser: Browser, login_state: Any, site: str, scheme: str
) -> None:
    """Each write form of the browsable API (POST on a list; PUT, PATCH and DELETE on a row),
    in each of its tabs, on a 390 px phone: nothing sticks out past the screen, and the
    DELETE confirmation and the filters open over the page, not under its backdrop."""
    shots = screenshot_dir(f"one-look-forms-{scheme}")
    page = open_page(browser, login_state, PHONE, scheme)
    listed = page.request.get(f"{site}/api/v1/tools/?format=json").json()
    (tool,) = listed["results"] if isinstance(listed, dict) else listed
    problems: dict[str, list[str]] = {}
    seen: dict[str, list[str]] = {}
    for name, path in {"list": "/api/v1/tools/", "row": f"/api/v1/tools/{tool['id']}/"}.items():
        response = page.goto(f"{site}{path}")
        assert response is not None and response.status == 200, name
        seen[name] = write_forms(page)
        tabs = page.locator(".form-switcher a")
        for index in range(tabs.count()):
            tab = tabs.nth(index)
            label = f"{name} {tab.get_attribute('href')}"
            tab.click()
            pane = page.locator(tab.get_attribute("href") or "")
            pane.wait_for(state="visible")
            page.screenshot(
                path=shots / f"{label.replace('#', '').replace(' ', '-')}.png", full_page=True
            )
            if sticking_out := overflow(page):
                problems[label] = sticking_out
        # The confirmations and forms Bootstrap opens in a modal: DELETE's, the filters.
        openers = page.locator("[data-toggle=modal]")
        for index in range(openers.count()):
            target = openers.nth(index).get_attribute("data-target") or ""
            openers.nth(index).click()
            # Shown once Bootstrap's fade and slide are over: "in", opaque, in place.
            page.locator(f"{target}.in .modal-dialog").wait_for(state="visible")
            page.locator(".modal-backdrop.in").wait_for(state="attached")
            page.wait_for_function(
                """(target) => {
                  const modal = document.querySelector(target);
                  const dialog = modal.querySelector('.modal-dialog');
                  const moved = new DOMMatrix(getComputedStyle(dialog).transform).f;
                  return getComputedStyle(modal).opacity === '1' && moved === 0;
                }""",
                arg=target,
            )
            label = f"{name} {target}"
            page.screenshot(path=shots / f"{name}-{target.lstrip('#')}.png")
            if sticking_out := overflow(page):
                problems[label] = sticking_out
            if covered := covered_controls(page, target):
                problems[f"{label} covered"] = covered
            seen[name].append(f"modal {target}")
            page.evaluate("(target) => window.jQuery(target).modal('hide')", target)
            page.locator(".modal-backdrop").wait_for(state="detached")
    page.context.close()
    # The forms were there to look at: the list's POST, the row's PUT (and PATCH) and DELETE.
    assert any(form.startswith("POST") for form in seen["list"]), seen
    assert any(form.startswith("PUT") for form in seen["row"]), seen
    assert any(form.startswith("DELETE") for form in seen["row"]), seen
    assert "modal #deleteModal" in seen["row"] and "modal #filtersModal" in seen["list"], seen
    assert problems == {}, json.dumps(problems, indent=1)
