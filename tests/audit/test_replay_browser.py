"""The replay page in headless Chromium: an operator runs a replay of a draft against calls
the official SDK client made to a live Daphne, and sees live and draft side by side, at
1366 px and at 390 px, with nothing past the page's right edge.

One live Daphne serves the module; the replay runs in it, from the page's form.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from mcp import Client
from playwright.sync_api import Browser, expect

from mcp_app.models import CallLog, Tool
from mcp_app.services.drafts import draft_create, live_entry
from tests.support.browser import (
    DESKTOP,
    PHONE,
    admin_login_state,
    open_page,
    screenshot_dir,
    static_site,
)
from tests.support.catalog import make_endpoint
from tests.support.page_checks import overflow
from tests.support.waiting import wait_until

# The browser starts after the database is set up (Playwright's loop makes Django refuse ORM
# calls while it runs).
pytestmark = pytest.mark.django_db

PASSWORD = "replay-page-password"
SLUG = "replay-page"
# Long values: what makes a side-by-side layout push past its box.
NAMES = ["Ada", "Grace", "Maximilian-Alexander-von-Humboldt-Bartholdy-" * 3]


async def client_calls(url: str) -> None:
    async with asyncio.timeout(20), Client(f"{url}/mcp/{SLUG}", mode="legacy") as client:
        for name in NAMES:
            result = await client.call_tool("greet", {"name": name})
            assert not result.is_error


@pytest.fixture(scope="module")
def site(django_db_setup: None, django_db_blocker: Any) -> Iterator[tuple[str, int]]:
    with django_db_blocker.unblock():
        endpoint = make_endpoint(SLUG)
        tool = Tool(
            name="greet",
            kind=Tool.Kind.TEMPLATE,
            config={"template": "Hello {{ name }}!", "output": "text"},
            description="Greets someone.",
            input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
            capture_mode=Tool.Capture.FULL,
        )
        tool.full_clean()
        tool.save()
        endpoint.tools.add(tool)
        operator = User.objects.create_superuser("operator", "op@example.com", PASSWORD)
    with static_site(django_db_blocker) as url:
        asyncio.run(client_calls(url))
        with django_db_blocker.unblock():
            wait_until(
                lambda: (
                    CallLog.objects.filter(rpc_method="tools/call", target="greet").count()
                    == len(NAMES)
                ),
                "the server recorded the client's calls",
            )
            entry = live_entry("tools", "greet", user=operator)
            assert entry is not None
            entry["config"] = {"template": "Hi {{ name }}, welcome back!", "output": "text"}
            entry["input_schema"] = {
                "type": "object",
                "properties": {"name": {"type": "string", "maxLength": 40}},
            }
            draft = draft_create(
                title="Warmer greeting, shorter names",
                document={"format": "mcphost-catalog/1", "tools": [entry]},
                actor=operator,
            )
        yield url, draft.pk


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_replay_runs_from_the_page_and_shows_live_and_draft_side_by_side(
    browser: Browser, site: tuple[str, int], viewport: dict[str, int]
) -> None:
    url, draft_id = site
    shots = screenshot_dir(f"replay-{viewport['width']}")
    state = admin_login_state(browser, url, "operator", PASSWORD)
    page = open_page(browser, state, viewport, "light")
    page.goto(f"{url}/audit/replay/{draft_id}/")
    expect(page.locator("h1")).to_contain_text("Warmer greeting, shorter names")
    assert overflow(page) == []
    page.select_option("#id_tool", "greet")
    page.fill("#id_sample", "10")

    page.get_by_role("button", name="Replay", exact=True).click()

    summary = page.locator("#replay-summary")
    expect(summary).to_have_text(
        "Of 3 calls: 1 refused by the draft's schema, 2 results changed, 0 identical",
        timeout=30_000,
    )
    calls = page.locator(".replay-call")
    expect(calls).to_have_count(3)
    refused = calls.filter(has_text="refused").first
    expect(refused.locator(".replay-side.draft")).to_contain_text("Invalid arguments")
    expect(refused.locator(".replay-diff")).to_have_count(0)
    # The heading names the call; its link to the record is in the body, readable.
    expect(refused.locator("a", has_text="the recorded call")).to_be_visible()
    changed = calls.filter(has=page.locator(".verdict", has_text="changed")).first
    expect(changed.locator(".replay-side.live")).to_contain_text("Hello ")
    expect(changed.locator(".replay-side.draft")).to_contain_text("welcome back!")
    expect(changed.locator(".replay-diff")).to_contain_text("$.content[0].text")
    page.screenshot(path=shots / "replay.png", full_page=True)
    live_box = changed.locator(".replay-side.live").bounding_box()
    draft_box = changed.locator(".replay-side.draft").bounding_box()
    assert live_box is not None and draft_box is not None
    if viewport is DESKTOP:  # side by side
        assert abs(live_box["y"] - draft_box["y"]) < 2 and live_box["x"] < draft_box["x"]
    else:  # stacked, each within the screen
        assert draft_box["y"] > live_box["y"]
        assert draft_box["x"] + draft_box["width"] <= viewport["width"]
    assert overflow(page) == []
    # The run is kept: the page lists it and shows it again.
    expect(page.locator("#replay-runs li").first).to_contain_text("1 refused, 2 changed")
