"""The admin's lists in headless Chromium: at 1366 px the figures an operator looks for
(errors and p95 of the last 24 hours, a call's status and duration) are on screen without
scrolling sideways, and the lists still fit a 390 px phone and follow dark mode.

One live Daphne serves the module, with names, titles and endpoint lists as long as an
OpenAPI import makes them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Browser, Page

from mcp_app.models import CallLog, Tool
from tests.support.browser import (
    DESKTOP,
    PHONE,
    admin_login_state,
    open_page,
    screenshot_dir,
    static_site,
)
from tests.support.catalog import make_endpoint, make_python_tool

pytestmark = pytest.mark.django_db

PASSWORD = "catalog-lists-password"

# The list, and the columns that must be on screen at 1366 px.
KEY_COLUMNS = {
    "/admin/mcp_app/tool/": ["name", "enabled", "calls_24h", "errors_24h", "p95_24h"],
    "/admin/mcp_app/endpoint/": ["slug", "enabled", "calls_24h", "errors_24h", "p95_24h"],
    "/admin/mcp_app/calllog/": ["target", "status", "http_status", "duration_ms"],
}


@pytest.fixture(scope="module")
def site(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    with django_db_blocker.unblock():
        endpoints = [
            make_endpoint(slug, title=f"The {slug} endpoint of the pet store's partners")
            for slug in ("petstore-partners-production-eu-west-1", "petstore-staging", "sandbox")
        ]
        for number, name in enumerate(
            [
                "listPetsByOwnerAndStatus",
                "updatePetWithFormDataAndPhotos",
                "a_tool_with_a_rather_long_name_indeed",
                "updatePetWithFormDataAndPhotosForTheOwner_v2_extended",
            ]
        ):
            tool = make_python_tool(
                name,
                "echo",
                title=f"{name} from the pet store's OpenAPI document, version 3",
                execution_mode=Tool.Execution.AUTO,
            )
            tool.endpoints.add(*endpoints[: number % 3 + 1])
            CallLog.objects.create(
                created_at=timezone.now(),
                endpoint=endpoints[0],
                endpoint_slug=endpoints[0].slug,
                era=CallLog.Era.MODERN,
                http_method="POST",
                http_status=200,
                message_type=CallLog.MessageType.REQUEST,
                rpc_method="tools/call",
                rpc_id="1",
                target=name,
                status=CallLog.Status.TOOL_ERROR if number % 2 else CallLog.Status.OK,
                duration_ms=1234.5 * (number + 1),
            )
        User.objects.create_superuser("operator", "op@example.com", PASSWORD)
    with static_site(django_db_blocker) as url:
        yield url


@pytest.fixture
def login_state(browser: Browser, site: str) -> Any:
    return admin_login_state(browser, site, "operator", PASSWORD)


def off_screen(page: Page, columns: list[str]) -> dict[str, int]:
    """The right edge of each column header that ends past the viewport (or is missing)."""
    return page.evaluate(
        """(columns) => {
          const found = {};
          for (const name of columns) {
            const th = document.querySelector(`#result_list th.column-${name}`);
            const right = th ? Math.round(th.getBoundingClientRect().right) : -1;
            if (right < 0 || right > window.innerWidth) found[name] = right;
          }
          return found;
        }""",
        columns,
    )


def page_overflow(page: Page) -> int:
    """How far the page is wider than the viewport (0 when it fits)."""
    return page.evaluate(
        "() => Math.max(0, document.documentElement.scrollWidth - window.innerWidth)"
    )


def background_lightness(page: Page, selector: str) -> float:
    rgb = page.evaluate(
        """(selector) => {
          let el = document.querySelector(selector);
          while (el) {
            const colour = getComputedStyle(el).backgroundColor;
            if (!colour.startsWith('rgba(0, 0, 0, 0)')) return colour.match(/\\d+/g).slice(0, 3);
            el = el.parentElement;
          }
          return [255, 255, 255];
        }""",
        selector,
    )
    return max(int(value) for value in rgb) / 255


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_key_columns_are_on_screen_at_1366_px(
    browser: Browser, login_state: Any, site: str, scheme: str
) -> None:
    """The issue's finding: the tool list was 1,058 px wide in a 717 px box."""
    shots = screenshot_dir(f"catalog-lists-1366-{scheme}")
    page = open_page(browser, login_state, DESKTOP, scheme)
    problems = {}
    for path, columns in KEY_COLUMNS.items():
        page.goto(f"{site}{path}")
        page.screenshot(path=shots / f"{path.strip('/').replace('/', '-')}.png", full_page=True)
        if missing := off_screen(page, columns):
            problems[path] = missing
        if (wider := page_overflow(page)) > 0:
            problems[f"{path} page"] = {"wider by": wider}
    page.context.close()
    assert problems == {}, json.dumps(problems, indent=1)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_lists_fit_a_phone_and_follow_the_colour_scheme(
    browser: Browser, login_state: Any, site: str, scheme: str
) -> None:
    shots = screenshot_dir(f"catalog-lists-390-{scheme}")
    page = open_page(browser, login_state, PHONE, scheme)
    problems: dict[str, Any] = {}
    for path in [*KEY_COLUMNS, "/admin/mcp_app/resource/", "/admin/mcp_app/prompt/"]:
        page.goto(f"{site}{path}")
        page.screenshot(path=shots / f"{path.strip('/').replace('/', '-')}.png", full_page=True)
        if (wider := page_overflow(page)) > 0:
            problems[path] = {"wider by": wider}
        lightness = background_lightness(page, "#changelist")
        if (scheme == "dark") != (lightness < 0.5):
            problems.setdefault(path, {})["lightness"] = round(lightness, 2)
    page.context.close()
    assert problems == {}, json.dumps(problems, indent=1)


def test_the_bulk_endpoint_page_fits_a_phone_in_dark_mode(
    browser: Browser, login_state: Any, site: str
) -> None:
    page = open_page(browser, login_state, PHONE, "dark")
    page.goto(f"{site}/admin/mcp_app/tool/")
    page.locator("#action-toggle").check()
    page.select_option("select[name=action]", "publish_selected")
    page.click("button[name=index]")
    page.wait_for_selector("#bulk-endpoints")
    page.screenshot(path=screenshot_dir("catalog-lists-bulk") / "bulk.png", full_page=True)
    assert page_overflow(page) == 0
    assert background_lightness(page, "#bulk-endpoints") < 0.5
    page.context.close()
