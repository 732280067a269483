"""Issue #32's whole sentence, end to end: an operator changes a busy tool, sees how last
hour's real calls would have fared under the change, gets it approved and publishes it,
without any client seeing an intermediate state.

- The endpoint requires review. The tool's calls come from the official ``mcp`` SDK through
  a live Daphne, so the call log's last hour holds them with their arguments.
- In headless Chromium, operator A (alice) edits the tool's template, description and input
  schema and uses "Save as draft"; on the draft's replay page she replays last hour's calls
  of the busy client and sees live and draft side by side (one call refused by the tighter
  schema, the others' results changed); her Publish is refused until another user approves.
- Operator B (bob), who holds the approve permission and no catalog permission, checks the
  draft and approves it in the admin; A publishes; the tool's history says "approved by bob".
- Meanwhile a watcher keeps one SDK session per era (2025-11-25 and 2026-07-28) open and
  lists and calls the tool in a loop: every answer is the old version or the new one, never
  a mix; the old one only until the publish and the new one after it, never back; and each
  session hears exactly one tools list_changed in all that time.

Bounded throughout: every wait has a deadline, and the watcher's pace is a wait on its stop
flag, not a sleep used to synchronise anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import Permission, User
from mcp import Client
from mcp.client.subscriptions import PromptsListChanged, ToolsListChanged
from mcp.types import Implementation
from playwright.sync_api import Browser, expect

from mcp_app.models import CallLog, Endpoint, Prompt, Tool
from tests.support.browser import DESKTOP, admin_login_state, open_page
from tests.support.catalog import make_endpoint
from tests.support.live import asgi_server, flush_database
from tests.support.page_checks import overflow
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db

SLUG = "draft-flow"
TOOL = "forecast"
PASSWORD = "draft-flow-password"
BUSY_CLIENT = "busy-agent"
WATCHER = "watcher"
MODES = ("legacy", "2026-07-28")
LIVE_TEMPLATE = "Weather in {{ city }}: sunny"
DRAFT_TEMPLATE = "Forecast for {{ city }}: sunny, 21 C"
LIVE_DESCRIPTION = "Says the weather in a city."
DRAFT_DESCRIPTION = "Says the forecast for a city (short names only)."
LIVE_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
DRAFT_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 12}},
    "required": ["city"],
}
# Last hour's real traffic: the long name is refused by the draft's schema, the others'
# results change with the template.
CITIES = ["Paris", "Rome", "Oslo", "Llanfairpwllgwyngyll"]
# Every wait of the watcher, and the whole of it.
WATCH_SECONDS = 240.0
STEP_SECONDS = 10.0


async def busy_calls(url: str) -> None:
    info = Implementation(name=BUSY_CLIENT, version="1")
    async with asyncio.timeout(30), Client(url, mode="legacy", client_info=info) as client:
        for city in CITIES:
            result = await client.call_tool(TOOL, {"city": city})
            assert not result.is_error, result


@pytest.fixture(scope="module")
def site(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    """A Daphne sending each list_changed as it comes, a reviewed endpoint with a busy tool
    whose last hour of calls is in the log, the author (a superuser) and the approver."""
    with django_db_blocker.unblock():
        endpoint = make_endpoint(SLUG)
        tool = Tool(
            name=TOOL,
            kind=Tool.Kind.TEMPLATE,
            config={"template": LIVE_TEMPLATE, "output": "text"},
            description=LIVE_DESCRIPTION,
            input_schema=LIVE_SCHEMA,
            capture_mode=Tool.Capture.FULL,
        )
        tool.full_clean()
        tool.save()
        endpoint.tools.add(tool)
        endpoint.prompts.add(Prompt.objects.create(name="df_marker", description="A marker."))
        Endpoint.objects.filter(pk=endpoint.pk).update(require_review=True)
        User.objects.create_superuser("alice", "alice@example.com", PASSWORD)
        bob = User.objects.create_user("bob", "bob@example.com", PASSWORD, is_staff=True)
        bob.user_permissions.set(
            Permission.objects.filter(
                content_type__app_label="mcp_app",
                codename__in=["view_draft", "approve_draft", "manage_every_team"],
            )
        )
        ids = {"tool": tool.pk}
    with asgi_server(
        "daphne", {"SERVE_STATIC": "1", "MCP_LIST_CHANGED_COALESCE_SECONDS": "0"}
    ) as url:
        asyncio.run(busy_calls(f"{url}/mcp/{SLUG}"))
        with django_db_blocker.unblock():
            wait_until(
                lambda: (
                    CallLog.objects.filter(
                        rpc_method="tools/call", target=TOOL, client_name=BUSY_CLIENT
                    ).count()
                    == len(CITIES)
                ),
                "the server recorded the busy client's calls",
            )
        yield {"url": url, **ids}
    flush_database(django_db_blocker)


def listing_version(tools: Any) -> str:
    """ "old", "new", or "mix: ..." for a tools/list answer's view of the tool."""
    (tool,) = [tool for tool in tools.tools if tool.name == TOOL]
    seen = (tool.description, tool.input_schema)
    if seen == (LIVE_DESCRIPTION, LIVE_SCHEMA):
        return "old"
    if seen == (DRAFT_DESCRIPTION, DRAFT_SCHEMA):
        return "new"
    return f"mix: {seen!r}"


def call_version(result: Any) -> str:
    text = result.content[0].text if result.content and not result.is_error else repr(result)
    if text == "Weather in Paris: sunny":
        return "old"
    if text == "Forecast for Paris: sunny, 21 C":
        return "new"
    return f"mix: {text!r}"


class Watcher:
    """One SDK session per era, open throughout, listing and calling the tool in a loop (in
    a thread of its own: the test's thread runs the browser)."""

    def __init__(self, url: str, django_db_blocker: Any) -> None:
        self.url = url
        self.blocker = django_db_blocker
        self.lock = threading.Lock()
        self.seen: list[tuple[str, str, str]] = []  # (mode, "list" or "call", version)
        self.legacy: list[str] = []  # notification methods the legacy session heard
        self.modern: list[type] = []  # subscription events the 2026-07-28 session heard
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="draft-flow-watcher")

    def start(self) -> None:
        self.thread.start()
        assert self.ready.wait(60), self.error or "the watcher's sessions did not open"

    def mark(self) -> int:
        with self.lock:
            return len(self.seen)

    def versions(self, mode: str) -> list[str]:
        with self.lock:
            return [version for seen_mode, _what, version in self.seen if seen_mode == mode]

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(WATCH_SECONDS)
        assert not self.thread.is_alive(), "the watcher did not stop"
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        try:
            asyncio.run(self._watch())
        except BaseException as exc:  # reported to the test's thread by finish()
            self.error = exc
            self.ready.set()

    async def _touch_marker(self) -> None:
        def touch() -> None:
            with self.blocker.unblock():
                prompt = Prompt.objects.get(name="df_marker")
                prompt.description += " Again."
                prompt.save()

        await database_sync_to_async(touch, thread_sensitive=False)()

    async def _watch(self) -> None:
        url = f"{self.url}/mcp/{SLUG}"
        info = Implementation(name=WATCHER, version="1")
        heard = asyncio.Event()

        async def on_message(message: Any) -> None:
            if (method := getattr(message, "method", None)) is not None:
                self.legacy.append(method)
                heard.set()

        async def markers_heard(since_legacy: int, since_modern: int) -> None:
            marker = "notifications/prompts/list_changed"
            while marker not in self.legacy[since_legacy:] or (
                PromptsListChanged not in self.modern[since_modern:]
            ):
                heard.clear()
                await heard.wait()

        async with (
            asyncio.timeout(WATCH_SECONDS),
            Client(url, mode="legacy", message_handler=on_message, client_info=info) as legacy,
            Client(url, mode="2026-07-28", client_info=info) as modern,
            modern.listen(tools_list_changed=True, prompts_list_changed=True) as sub,
        ):

            async def listen() -> None:
                async for event in sub:
                    self.modern.append(type(event))
                    heard.set()

            listener = asyncio.create_task(listen())
            # The SDK opens the legacy GET stream on its own: touch the marker until both
            # sessions hear it, so both hear everything after.
            while True:
                await self._touch_marker()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1):
                        await markers_heard(0, 0)
                        break
            legacy_start, modern_start = len(self.legacy), len(self.modern)
            self.ready.set()
            clients = (("legacy", legacy), ("2026-07-28", modern))
            while not self.stop.is_set():
                for mode, client in clients:
                    listing = await client.list_tools(cache_mode="bypass")
                    self._note(mode, "list", listing_version(listing))
                    called = await client.call_tool(TOOL, {"city": "Paris"})
                    self._note(mode, "call", call_version(called))
                await asyncio.to_thread(self.stop.wait, 0.2)  # the pace; stop ends it
            # The streams keep their order: once a later marker is heard, every tools
            # list_changed the publish sent has been heard too.
            legacy_end, modern_end = len(self.legacy), len(self.modern)
            await self._touch_marker()
            async with asyncio.timeout(STEP_SECONDS):
                await markers_heard(legacy_end, modern_end)
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
            self.legacy = self.legacy[legacy_start:]
            self.modern = self.modern[modern_start:]

    def _note(self, mode: str, what: str, version: str) -> None:
        with self.lock:
            self.seen.append((mode, what, version))


def test_change_a_busy_tool_replay_last_hour_get_it_approved_and_publish(
    site: dict[str, Any], browser: Browser, django_db_blocker: Any
) -> None:
    base = site["url"]
    tool_url = f"{base}/admin/mcp_app/tool/{site['tool']}/change/"
    alice = admin_login_state(browser, base, "alice", PASSWORD)
    bob = admin_login_state(browser, base, "bob", PASSWORD)
    watcher = Watcher(base, django_db_blocker)
    watcher.start()
    try:
        # A changes the busy tool on its form and saves the change as a draft.
        page = open_page(browser, alice, DESKTOP, "light")
        page.goto(tool_url)
        expect(page.locator("body")).to_contain_text(f"Endpoint {SLUG} requires review")
        page.fill("#id_description", DRAFT_DESCRIPTION)
        page.fill("#id_template", DRAFT_TEMPLATE)
        page.fill("#id_input_schema", json.dumps(DRAFT_SCHEMA))
        page.click("#save-as-draft")
        expect(page).to_have_url(re.compile(r"/admin/mcp_app/draft/\d+/change/$"))
        draft_url = page.url
        draft_id = int(re.findall(r"/draft/(\d+)/", draft_url)[0])

        # Her replay of last hour's calls of the busy client, live and draft side by side.
        page.get_by_role("link", name="Replay recorded calls against it").click()
        expect(page).to_have_url(f"{base}/audit/replay/{draft_id}/")
        page.select_option("#id_tool", TOOL)
        page.fill("#id_client_name", BUSY_CLIENT)
        page.select_option("#id_range", "1h")
        page.fill("#id_sample", "10")
        page.get_by_role("button", name="Replay", exact=True).click()
        expect(page.locator("#replay-summary")).to_have_text(
            "Of 4 calls: 1 refused by the draft's schema, 3 results changed, 0 identical",
            timeout=30_000,
        )
        calls = page.locator(".replay-call")
        expect(calls).to_have_count(4)
        refused = calls.filter(has=page.locator(".verdict", has_text="refused"))
        expect(refused).to_have_count(1)
        expect(refused).to_contain_text("Llanfairpwllgwyngyll")
        expect(refused.locator(".replay-side.draft")).to_contain_text("Invalid arguments")
        changed = calls.filter(has=page.locator(".verdict", has_text="changed"))
        expect(changed).to_have_count(3)
        rome = changed.filter(has_text='"Rome"')
        expect(rome.locator(".replay-side.live")).to_contain_text("Weather in Rome: sunny")
        expect(rome.locator(".replay-side.draft")).to_contain_text("Forecast for Rome")
        expect(rome.locator(".replay-diff")).to_contain_text("$.content[0].text")
        live_box = rome.locator(".replay-side.live").bounding_box()
        draft_box = rome.locator(".replay-side.draft").bounding_box()
        assert live_box is not None and draft_box is not None
        assert abs(live_box["y"] - draft_box["y"]) < 2 and live_box["x"] < draft_box["x"]
        assert overflow(page) == []

        # Unapproved, her publish is refused, and nothing changes.
        page.goto(draft_url)
        expect(page.locator("#draft-review-note")).to_contain_text("requires review")
        page.click("#draft-actions button[value=publish]")
        expect(page.locator(".messagelist")).to_contain_text("Nothing was published")
        expect(page.locator(".messagelist")).to_contain_text("which requires review")

        # B, holding the approve permission and no catalog permission, checks and approves.
        second = open_page(browser, bob, DESKTOP, "light")
        second.goto(draft_url)
        expect(second.locator("#draft-actions button[value=publish]")).to_have_count(0)
        second.click("#draft-actions button[value=check]")
        expect(second.locator(".messagelist")).to_contain_text(
            f"Publishing now would: update tools {TOOL}"
        )
        second.click("#draft-actions button[value=approve]")
        expect(second.locator(".messagelist")).to_contain_text(
            f"You approved draft #{draft_id} as it stands."
        )
        expect(second.locator("#draft-approval")).to_have_text("approved by bob")
        second.context.close()
        assert set(watcher.versions("legacy")) == {"old"}  # the clients still see the old

        # A publishes.
        page.goto(draft_url)
        before_publish = watcher.mark()
        page.click("#draft-actions button[value=publish]")
        expect(page.locator(".messagelist")).to_contain_text(
            f"Draft #{draft_id} published: update tools {TOOL}"
        )
        wait_until(
            lambda: all(watcher.versions(mode)[-2:] == ["new", "new"] for mode in MODES),
            "both sessions list and call the published tool",
            timeout=30,
        )
        page.goto(f"{base}/admin/mcp_app/tool/{site['tool']}/history/")
        expect(page.locator("body")).to_contain_text(f"draft #{draft_id} approved by bob")
        page.context.close()
    finally:
        watcher.finish()

    with watcher.lock:
        seen = list(watcher.seen)
    assert not [entry for entry in seen if entry[2] not in ("old", "new")], seen
    assert {version for _mode, _what, version in seen[:before_publish]} == {"old"}
    for mode in MODES:
        versions = watcher.versions(mode)
        switch = versions.index("new")
        # Old until the publish, new from it on: never back, never a mix.
        assert versions[:switch] == ["old"] * switch and "old" not in versions[switch:], mode
        assert switch > 0
    assert watcher.legacy.count("notifications/tools/list_changed") == 1, watcher.legacy
    assert watcher.modern.count(ToolsListChanged) == 1, watcher.modern
