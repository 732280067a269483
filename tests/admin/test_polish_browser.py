"""Smaller layout findings of issue #28 in headless Chromium, at 1366 px and on a 390 px phone,
light and dark: try-it string arguments in a multi-line box, the Python function picker bounded
to its row, and chart labels on the audit statistics page legible on a phone.

One live Daphne serves the module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Browser, Page

from mcp_app.models import CallLog, Tool
from tests.support.browser import admin_login_state, open_page, screenshot_dir, static_site
from tests.support.catalog import make_endpoint, make_python_tool

pytestmark = pytest.mark.django_db

PASSWORD = "polish-browser-password"
VIEWPORTS = {
    "1366": {"width": 1366, "height": 900},
    "390": {"width": 390, "height": 844},
}
SIZES = [(size, scheme) for size in VIEWPORTS for scheme in ("light", "dark")]
LEGIBLE_PX = 11.0


@pytest.fixture(scope="module")
def site(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    with django_db_blocker.unblock():
        endpoint = make_endpoint("polish")
        # countdown's description is the longest of the built-in functions (258 characters).
        picked = make_python_tool("count", "countdown")
        note = Tool(
            name="note",
            kind=Tool.Kind.TEMPLATE,
            config={"template": "{{ text }} on {{ day }} ({{ code }})", "output": "text"},
            description="Writes a note.",
            input_schema={
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "Any text, several lines."},
                    "day": {"type": "string", "format": "date"},
                    "code": {"type": "string", "maxLength": 8},
                },
            },
        )
        note.full_clean()
        note.save()
        start = timezone.now() - timedelta(hours=2)
        CallLog.objects.bulk_create(
            CallLog(
                created_at=start + timedelta(minutes=minute),
                endpoint=endpoint,
                endpoint_slug=endpoint.slug,
                era=CallLog.Era.MODERN,
                http_method="POST",
                http_status=200,
                message_type=CallLog.MessageType.REQUEST,
                rpc_method="tools/call",
                rpc_id=str(minute),
                target="a_tool_with_a_rather_long_name_indeed",
                status=CallLog.Status.TOOL_ERROR if minute % 5 == 0 else CallLog.Status.OK,
                duration_ms=10.0 + minute,
            )
            for minute in range(0, 110, 3)
        )
        User.objects.create_superuser("operator", "op@example.com", PASSWORD)
        ids = {"picked": picked.pk, "note": note.pk}
    with static_site(django_db_blocker) as url:
        yield {"url": url, **ids}


@pytest.fixture
def login_state(browser: Browser, site: dict[str, Any]) -> Any:
    return admin_login_state(browser, site["url"], "operator", PASSWORD)


def page_overflow(page: Page) -> int:
    return int(
        page.evaluate("() => Math.max(0, document.documentElement.scrollWidth - window.innerWidth)")
    )


@pytest.mark.parametrize(("size", "scheme"), SIZES)
def test_try_it_string_arguments_are_multi_line_unless_the_schema_says_one_line(
    browser: Browser, login_state: Any, site: dict[str, Any], size: str, scheme: str
) -> None:
    page = open_page(browser, login_state, VIEWPORTS[size], scheme)
    page.goto(f"{site['url']}/admin/mcp_app/tool/{site['note']}/try/")
    page.screenshot(path=screenshot_dir(f"try-it-{size}-{scheme}") / "try.png", full_page=True)

    tags = {
        name: page.locator(f"#try-it-field-{name}").evaluate("(el) => el.tagName.toLowerCase()")
        for name in ("text", "day", "code")
    }
    assert tags == {"text": "textarea", "day": "input", "code": "input"}
    # The JSON box stays what is submitted: a line break typed in the box lands in it.
    page.fill("#try-it-field-text", "first line\nsecond line")
    assert json.loads(page.input_value("#id_arguments"))["text"] == "first line\nsecond line"
    page.fill("#id_arguments", json.dumps({"text": "one\ntwo", "day": "2026-11-26"}))
    page.dispatch_event("#id_arguments", "input")
    assert page.input_value("#try-it-field-text") == "one\ntwo"
    page.click("#try-it input[type=submit]")
    assert "one\\ntwo on 2026-11-26" in page.locator("#try-it-result").inner_text()
    assert page_overflow(page) == 0
    page.context.close()


@pytest.mark.parametrize(("size", "scheme"), SIZES)
def test_the_function_picker_fits_its_row_and_keeps_the_full_text_in_a_title(
    browser: Browser, login_state: Any, site: dict[str, Any], size: str, scheme: str
) -> None:
    page = open_page(browser, login_state, VIEWPORTS[size], scheme)
    page.goto(f"{site['url']}/admin/mcp_app/tool/{site['picked']}/change/")
    page.screenshot(path=screenshot_dir(f"picker-{size}-{scheme}") / "tool.png", full_page=True)

    box = page.locator("#id_function").bounding_box()
    assert box is not None
    width = VIEWPORTS[size]["width"]
    # It was 1,774 px wide: now at most 40em, and never past the screen's edge.
    assert box["width"] <= 600, box
    assert box["x"] + box["width"] <= width, box
    title = page.locator("#id_function option[value=countdown]").get_attribute("title")
    assert title is not None and title.startswith("countdown: Count down the given number")
    assert len(title) > 200
    assert page_overflow(page) == 0
    page.context.close()


@pytest.mark.parametrize(("size", "scheme"), SIZES)
def test_chart_labels_on_the_statistics_page_are_legible(
    browser: Browser, login_state: Any, site: dict[str, Any], size: str, scheme: str
) -> None:
    page = open_page(browser, login_state, VIEWPORTS[size], scheme)
    page.goto(f"{site['url']}/audit/stats/")
    page.screenshot(path=screenshot_dir(f"stats-{size}-{scheme}") / "stats.png", full_page=True)

    # The size a label is drawn at: its font size in the chart's units times the chart's scale.
    sizes = page.evaluate(
        """() => [...document.querySelectorAll('svg.chart text')].map((text) => {
          const svg = text.ownerSVGElement;
          const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
          return [text.textContent, parseFloat(getComputedStyle(text).fontSize) * scale];
        })"""
    )
    assert len(sizes) > 5
    small = [(label, round(px, 1)) for label, px in sizes if px < LEGIBLE_PX]
    assert small == []
    assert page_overflow(page) == 0
    page.context.close()
