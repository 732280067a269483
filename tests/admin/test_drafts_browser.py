"""A draft's diff page in headless Chromium (issue #32): a tool's description and schema
changed on its form and saved as a draft show beside the live values, at 1366 px and on a
390 px phone without the page scrolling sideways, light and dark; Publish makes them live.

One live Daphne serves the module.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page, expect

from mcp_app.services.catalog_writes import endpoint_create, tool_create
from tests.support.browser import admin_login_state, chromium, open_page, screenshot_dir
from tests.support.live import asgi_server, flush_database

pytestmark = pytest.mark.django_db

PASSWORD = "drafts-browser-password"
VIEWPORTS = {
    "1366": {"width": 1366, "height": 900},
    "390": {"width": 390, "height": 844},
}
LIVE_DESCRIPTION = "Says how the weather is in a city."
DRAFT_DESCRIPTION = " ".join(
    [
        "Says how the weather is in a city, with the temperature in degrees Celsius and a "
        "one-line forecast for the rest of the day."
    ]
    * 3
)
DRAFT_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "The city's name, as in an atlas."},
        "units": {"type": "string", "enum": ["metric", "imperial"]},
    },
    "required": ["city"],
}


@pytest.fixture(scope="module")
def site(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    with django_db_blocker.unblock():
        endpoint = endpoint_create(slug="drafts", auth_mode="public")
        tool = tool_create(
            name="weather",
            kind="template",
            config={"template": "Sunny in {{ city }}", "output": "text"},
            description=LIVE_DESCRIPTION,
            input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
            endpoints=[endpoint],
        )
        User.objects.create_superuser("operator", "op@example.com", PASSWORD)
        ids = {"tool": tool.pk}
    with asgi_server("daphne", {"SERVE_STATIC": "1"}) as url:
        yield {"url": url, **ids}
    flush_database(django_db_blocker)


@pytest.fixture
def browser(site: dict[str, Any]) -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


def page_overflow(page: Page) -> int:
    return int(
        page.evaluate("() => Math.max(0, document.documentElement.scrollWidth - window.innerWidth)")
    )


def side_by_side(page: Page, field: str) -> tuple[dict[str, float], dict[str, float]]:
    """The boxes of a field's live and draft values, checked to sit in one row, live first."""
    row = page.locator(f".mcp-draft-field[data-field={field}]")
    live = row.locator(".mcp-draft-live pre").bounding_box()
    drafted = row.locator(".mcp-draft-new pre").bounding_box()
    assert live is not None and drafted is not None
    assert live["x"] + live["width"] <= drafted["x"], (live, drafted)
    assert abs(live["y"] - drafted["y"]) < 4, (live, drafted)
    return live, drafted


def luminance(page: Page, selector: str) -> float:
    rgb = page.locator(selector).first.evaluate("(el) => getComputedStyle(el).backgroundColor")
    red, green, blue = (int(part) for part in re.findall(r"\d+", rgb)[:3])
    return (0.2126 * red + 0.7152 * green + 0.0722 * blue) / 255


def test_a_tool_saved_as_draft_shows_beside_the_live_values_and_publishes(
    browser: Browser, site: dict[str, Any]
) -> None:
    state = admin_login_state(browser, site["url"], "operator", PASSWORD)
    tool_url = f"{site['url']}/admin/mcp_app/tool/{site['tool']}/change/"
    page = open_page(browser, state, VIEWPORTS["1366"], "light")
    page.goto(tool_url)
    page.fill("#id_description", DRAFT_DESCRIPTION)
    page.fill("#id_input_schema", json.dumps(DRAFT_SCHEMA))
    page.click("#save-as-draft")

    expect(page).to_have_url(re.compile(r"/admin/mcp_app/draft/\d+/change/$"))
    draft_url = page.url
    expect(page.locator(".messagelist")).to_contain_text("Saved as draft #")
    description = page.locator(".mcp-draft-field[data-field=description]")
    expect(description.locator(".mcp-draft-live")).to_contain_text(LIVE_DESCRIPTION)
    expect(description.locator(".mcp-draft-new")).to_contain_text(DRAFT_DESCRIPTION)
    schema = page.locator(".mcp-draft-field[data-field=input_schema]")
    expect(schema.locator(".mcp-draft-new")).to_contain_text('"enum": [')
    # Nothing is live yet: the tool's page still holds the live description.
    check = open_page(browser, state, VIEWPORTS["1366"], "light")
    check.goto(tool_url)
    expect(check.locator("#id_description")).to_have_value(LIVE_DESCRIPTION)
    check.context.close()
    page.context.close()

    for size, scheme in (("1366", "light"), ("390", "light"), ("1366", "dark"), ("390", "dark")):
        view = open_page(browser, state, VIEWPORTS[size], scheme)
        view.goto(draft_url)
        shots = screenshot_dir(f"draft-{size}-{scheme}")
        view.screenshot(path=shots / "draft.png", full_page=True)
        live, drafted = side_by_side(view, "description")
        side_by_side(view, "input_schema")
        # Long text wraps inside its column instead of widening the page.
        assert live["x"] + live["width"] <= VIEWPORTS[size]["width"]
        assert drafted["x"] + drafted["width"] <= VIEWPORTS[size]["width"]
        assert drafted["height"] > 3 * 16, drafted
        assert page_overflow(view) == 0, (size, scheme)
        brightness = luminance(view, ".mcp-draft-new pre")
        assert (brightness < 0.3) if scheme == "dark" else (brightness > 0.7), brightness
        # The button sits beside Save, within the screen.
        view.goto(tool_url)
        button = view.locator("#save-as-draft").bounding_box()
        assert button is not None and button["x"] + button["width"] <= VIEWPORTS[size]["width"]
        assert page_overflow(view) == 0, (size, scheme)
        view.context.close()

    page = open_page(browser, state, VIEWPORTS["1366"], "light")
    page.goto(draft_url)
    page.click("#draft-actions button[value=publish]")
    expect(page.locator(".messagelist")).to_contain_text("published: update tools weather")
    expect(page.locator("#draft-summary")).to_contain_text("Published")
    page.goto(tool_url)
    expect(page.locator("#id_description")).to_have_value(DRAFT_DESCRIPTION)
    assert json.loads(page.input_value("#id_input_schema")) == DRAFT_SCHEMA
    page.context.close()
