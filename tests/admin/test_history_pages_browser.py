"""History pages, recent changes and a session's page on a 390 px phone (issue #28): they
stuck out past the screen, and the Changes column of an object's history wrapped one letter
per line. In headless Chromium, at 390 px in light and dark mode and at 1366 px.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page

from mcp_app.models import Session, Tool
from mcp_app.services import history
from mcp_app.services.catalog_writes import tool_update
from tests.support.browser import admin_login_state, open_page, screenshot_dir, static_site
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.page_checks import overflow

pytestmark = pytest.mark.django_db

PASSWORD = "history-pages-password"
LOOKS = pytest.mark.parametrize(
    ("viewport", "scheme"),
    [({"width": 390, "height": 844}, "light"), ({"width": 390, "height": 844}, "dark"),
     ({"width": 1366, "height": 900}, "light")],
    ids=["390-light", "390-dark", "1366-light"],
)  # fmt: skip
# The narrowest a table cell may get: a word of a few letters, not one letter per line.
MIN_CELL_PX = 40


@pytest.fixture(scope="module")
def site(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    """An endpoint and a tool with a few versions each, and a session with a long id."""
    with django_db_blocker.unblock():
        operator = User.objects.create_superuser("operator", "op@example.com", PASSWORD)
        endpoint = make_endpoint(
            "petstore-partners-production-eu-west-1", title="The pet store's partners"
        )
        tool = make_python_tool(
            "updatePetWithFormDataAndPhotosForTheOwner_v2_extended", "echo", enabled=False
        )
        for number in range(3):
            tool_update(
                tool=tool,
                data={
                    "description": f"Version {number}: " + "a long description " * 12,
                    "title": f"Update a pet with form data and photos, revision {number}",
                    "enabled": bool(number % 2),
                },
                endpoints=[endpoint],
                actor=operator,
                source=history.ADMIN,
            )
        tool_id = tool.pk
        versions = list(Tool.history.filter(id=tool_id).values_list("history_id", flat=True))
        session = Session.objects.create(
            id="5f0c6a3e8c2b4d6f9a1b3c5d7e9f1a2b-" + "x" * 24,
            endpoint=endpoint,
            protocol_version="2025-11-25",
            client_info={"name": "A client with a rather long program name", "version": "1.0"},
        )
    with static_site(django_db_blocker) as url:
        yield {
            "url": url, "tool": tool_id, "endpoint": endpoint.pk, "versions": versions,
            "session": session.pk,
        }  # fmt: skip


@pytest.fixture
def login_state(browser: Browser, site: dict[str, Any]) -> Any:
    return admin_login_state(browser, site["url"], "operator", PASSWORD)


def pages(site: dict[str, Any]) -> dict[str, str]:
    newest, older = site["versions"][0], site["versions"][-1]
    return {
        "tool-history": f"/admin/mcp_app/tool/{site['tool']}/history/",
        "tool-compare": (
            f"/admin/mcp_app/tool/{site['tool']}/history/compare/?a={older}&b={newest}"
        ),
        "endpoint-history": f"/admin/mcp_app/endpoint/{site['endpoint']}/history/",
        "recent-changes": "/admin/mcp_app/endpoint/recent-changes/",
        "session": f"/admin/mcp_app/session/{site['session']}/change/",
    }


def squeezed_cells(page: Page) -> list[str]:
    """Table cells narrower than MIN_CELL_PX that hold text (one letter per line)."""
    return page.evaluate(
        """(min) => [...document.querySelectorAll('#content td, #content th, #content td li')]
          .filter(cell => cell.textContent.trim().length > 3 &&
                          cell.getBoundingClientRect().width < min)
          .slice(0, 5)
          .map(cell => cell.textContent.trim().slice(0, 30) + ' ' +
                       Math.round(cell.getBoundingClientRect().width) + 'px')""",
        MIN_CELL_PX,
    )


@LOOKS
def test_the_history_pages_fit_the_screen(
    browser: Browser, login_state: Any, site: dict[str, Any], viewport: dict[str, int],
    scheme: str,
) -> None:  # fmt: skip
    shots = screenshot_dir(f"history-{viewport['width']}-{scheme}")
    page = open_page(browser, login_state, viewport, scheme)
    problems: dict[str, Any] = {}
    for name, path in pages(site).items():
        response = page.goto(f"{site['url']}{path}")
        assert response is not None and response.status == 200, name
        page.screenshot(path=shots / f"{name}.png", full_page=True)
        found: dict[str, Any] = {}
        if sticking_out := overflow(page):
            found["wider than the screen"] = sticking_out
        if squeezed := squeezed_cells(page):
            found["squeezed"] = squeezed
        if found:
            problems[name] = found
    page.context.close()
    assert problems == {}, json.dumps(problems, indent=1)
