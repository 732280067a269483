"""The operator's pages in headless Chromium: every page fits a phone's width and follows the
system's dark mode, and the admin's custom pages look like the rest of the admin.

One live Daphne serves the whole module; each test logs in once and opens a browser context
per (width, colour scheme) pair.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect

from mcp_app.executors.python import tool_functions
from mcp_app.models import CallLog, Endpoint, Tool
from mcp_app.services.calllog.recorder import ADMIN_TEST_HTTP_METHOD
from tests.support.browser import (
    DESKTOP,
    PHONE,
    admin_login_state,
    open_page,
    screenshot_dir,
    static_site,
)
from tests.support.catalog import make_endpoint, make_python_tool

# Sets up the test database; the browser starts after it (function scope), because Playwright's
# event loop makes Django refuse ORM calls (SynchronousOnlyOperation) while it runs.
pytestmark = pytest.mark.django_db

PASSWORD = "cockpit-browser-password"
OPENAPI = {
    "openapi": "3.0.3",
    "info": {"title": "Pets", "version": "1"},
    "servers": [{"url": "https://pets.example.com/v1"}],
    "paths": {
        "/pets/{id}": {
            "get": {
                "operationId": "getPet",
                "summary": "Read one pet",
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}
                ],
            }
        }
    },
}


# A few config fields of each kind (the executors supply them) and the kind that shows them.
KIND_FIELDS = {
    "function": "python",
    "template": "template",
    "template_output": "template",
    "http_url": "http",
    "http_credential": "http",
    "http_allow_networks": "http",
}


def schema(function: str) -> dict[str, Any]:
    return dict(tool_functions()[function].input_schema)


@pytest.fixture(scope="module")
def site(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    """A Daphne serving static files, a catalog with a public and an OAuth endpoint, calls."""
    with django_db_blocker.unblock():
        demo = make_endpoint("demo", title="Demo")
        secure = make_endpoint("secure", auth_mode=Endpoint.AuthMode.OAUTH)
        word_count = make_python_tool("word_count", "word_count", input_schema=schema("word_count"))
        echo = make_python_tool(
            "echo", "echo", capture_mode=Tool.Capture.FULL, input_schema=schema("echo")
        )
        demo.tools.add(echo)
        demo.tools.add(word_count)
        secure.tools.add(word_count)
        User.objects.create_superuser("operator", "op@example.com", PASSWORD)
        long_line = "x" * 3000
        calls = [
            CallLog.objects.create(
                created_at=timezone.now(),
                endpoint=demo,
                endpoint_slug="demo",
                era=CallLog.Era.MODERN,
                http_method=method,
                http_status=200,
                message_type=CallLog.MessageType.REQUEST,
                rpc_method="tools/call",
                rpc_id="1",
                target=name,
                status=status,
                duration_ms=ms,
                capture="full",
                arguments={"message": long_line},
                result={"content": [{"type": "text", "text": long_line}]},
                user_agent="python-httpx/0.28 " + "y" * 200,
            )  # fmt: skip
            for method, name, status, ms in [
                ("POST", "echo", CallLog.Status.OK, 3.0),
                ("POST", "a_tool_with_a_rather_long_name_indeed", CallLog.Status.OK, 900.0),
                ("POST", "word_count", CallLog.Status.TOOL_ERROR, 12.0),
                (ADMIN_TEST_HTTP_METHOD, "echo", CallLog.Status.OK, 1.0),
            ]
        ]
        ids = {"call": calls[0].pk, "tool": word_count.pk, "echo": echo.pk, "endpoint": demo.pk}
    with static_site(django_db_blocker) as url:
        yield {"url": url, **ids}


@pytest.fixture
def login_state(browser: Browser, site: dict[str, Any]) -> dict[str, Any]:
    return admin_login_state(browser, site["url"], "operator", PASSWORD)


def overflow(page: Page) -> list[str]:
    """What sticks out past the viewport's right edge (empty when the page fits)."""
    return page.evaluate(
        """() => {
          const width = window.innerWidth;
          if (document.documentElement.scrollWidth <= width) return [];
          return [...document.querySelectorAll('body *')]
            .filter(el => el.getBoundingClientRect().right > width + 1)
            .slice(0, 8)
            .map(el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
                 (el.className && typeof el.className === 'string' ? '.' + el.className : '') +
                 ' ' + Math.round(el.getBoundingClientRect().right));
        }"""
    )


def copy_button_covers_text(page: Page) -> str:
    """Which copy button sits over the text of the block it copies ("" when none does)."""
    return page.evaluate(
        """() => {
          for (const button of document.querySelectorAll('button.copy')) {
            const block = document.getElementById(button.dataset.copyTarget);
            const b = button.getBoundingClientRect();
            const t = block.firstElementChild.getBoundingClientRect();
            const across = b.left < t.right && t.left < b.right;
            if (across && b.top < t.bottom && t.top < b.bottom) return button.dataset.copyTarget;
          }
          return '';
        }"""
    )


def background_lightness(page: Page) -> float:
    """The body background's lightness, 0 (black) to 1 (white)."""
    rgb = page.evaluate(
        "() => getComputedStyle(document.body).backgroundColor.match(/\\d+/g).slice(0, 3)"
    )
    return max(int(value) for value in rgb) / 255


def pages(site: dict[str, Any]) -> dict[str, str]:
    return {
        "audit": "/audit/",
        "detail": f"/audit/{site['call']}/",
        "stats": "/audit/stats/",
        "overview": "/audit/overview/",
        "endpoints": "/endpoints/",
        "connect": "/endpoints/demo/connect/",
        "connect-oauth": "/endpoints/secure/connect/",
        "admin": "/admin/",
        "tool-add": "/admin/mcp_app/tool/add/",
        "tool-try": f"/admin/mcp_app/tool/{site['tool']}/try/",
        "import": "/admin/mcp_app/tool/import-openapi/",
    }


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_every_page_fits_the_width_and_follows_the_colour_scheme(
    browser: Browser,
    login_state: dict[str, Any],
    site: dict[str, Any],
    viewport: dict[str, int],
    scheme: str,
) -> None:
    shots = screenshot_dir(f"cockpit-{viewport['width']}-{scheme}")
    page = open_page(browser, login_state, viewport, scheme)
    problems: dict[str, list[str]] = {}
    for name, path in pages(site).items():
        response = page.goto(f"{site['url']}{path}")
        assert response is not None and response.status == 200, name
        page.screenshot(path=shots / f"{name}.png", full_page=True)
        if sticking_out := overflow(page):
            problems.setdefault(name, []).extend(sticking_out)
        if name.startswith("connect") and (covered := copy_button_covers_text(page)):
            problems.setdefault(name, []).append(covered)
        lightness = background_lightness(page)
        if (scheme == "dark") != (lightness < 0.5):
            problems.setdefault(name, []).append(f"background lightness {lightness:.2f}")
    page.context.close()
    assert problems == {}, json.dumps(problems, indent=1)


def label_left_of_picker(page: Page, field: str) -> bool:
    """Whether the field's label sits left of its picker, as every other admin label does."""
    label = page.locator(f"label[for='id_{field}']").first.bounding_box()
    picker = page.locator(f"#id_{field}_from").bounding_box()
    assert label is not None and picker is not None
    return label["x"] + label["width"] <= picker["x"]


def test_openapi_import_and_tool_form_pickers_look_like_the_admin(
    browser: Browser, login_state: dict[str, Any], site: dict[str, Any]
) -> None:
    shots = screenshot_dir("cockpit-import")
    page = open_page(browser, login_state, DESKTOP, "light")
    page.goto(f"{site['url']}/admin/mcp_app/tool/add/")
    expect(page.locator("#id_endpoints_from")).to_be_visible()
    page.screenshot(path=shots / "tool-add.png")
    assert label_left_of_picker(page, "endpoints")

    page.goto(f"{site['url']}/admin/mcp_app/tool/import-openapi/")
    page.fill("#id_document_text", json.dumps(OPENAPI))
    page.click("input[name=_read]")
    expect(page.locator("#id_endpoints_from")).to_be_visible()
    page.screenshot(path=shots / "import-read.png", full_page=True)
    sheets = page.evaluate("() => [...document.styleSheets].map(s => s.href || '')")
    assert [href for href in sheets if href.endswith("/mcp_app/admin.css")] == [
        f"{site['url']}/static/mcp_app/admin.css"
    ]
    assert any(href.endswith("/admin/css/forms.css") for href in sheets)
    # The picker is laid out by the admin's widget styles (side by side boxes with arrows).
    assert page.locator(".selector").first.evaluate("el => getComputedStyle(el).display") == "flex"
    assert label_left_of_picker(page, "endpoints")
    page.context.close()


def test_the_tool_form_shows_only_the_chosen_kinds_config_fields(
    browser: Browser, login_state: dict[str, Any], site: dict[str, Any]
) -> None:
    page = open_page(browser, login_state, DESKTOP, "light")
    page.goto(f"{site['url']}/admin/mcp_app/tool/add/")
    rows = {name: page.locator(f".form-row.field-{name}") for name in KIND_FIELDS}

    for kind in ("http", "template", "python"):
        page.select_option("#id_kind", kind)
        for name, row in rows.items():
            if KIND_FIELDS[name] == kind:
                expect(row).to_be_visible()
            else:
                expect(row).to_be_hidden()
    page.context.close()


def test_try_it_offers_a_form_from_the_schema_and_wraps_long_results(
    browser: Browser, login_state: dict[str, Any], site: dict[str, Any]
) -> None:
    shots = screenshot_dir("cockpit-try-it")
    page = open_page(browser, login_state, PHONE, "light")
    page.goto(f"{site['url']}/admin/mcp_app/tool/{site['tool']}/try/")
    expect(page.locator("#try-it-input-schema")).to_contain_text('"required"')
    page.fill("#try-it-field-text", "hello big world")
    assert json.loads(page.input_value("#id_arguments")) == {"text": "hello big world"}
    page.click("input[type=submit][value=Run]")
    expect(page.locator("#try-it-result")).to_contain_text('"words": 3')
    # Editing the JSON box shows in the field too: the box stays the truth.
    page.fill("#id_arguments", '{"text": "edited"}')
    page.dispatch_event("#id_arguments", "input")
    expect(page.locator("#try-it-field-text")).to_have_value("edited")

    page.goto(f"{site['url']}/admin/mcp_app/tool/{site['echo']}/try/")
    page.fill("#try-it-field-message", "y" * 2000)
    page.click("input[type=submit][value=Run]")
    result = page.locator("#try-it-result")
    expect(result).to_contain_text("yyyy")
    page.screenshot(path=shots / "echo.png", full_page=True)
    assert result.evaluate("el => el.scrollWidth <= el.clientWidth")
    assert overflow(page) == []
    page.context.close()
