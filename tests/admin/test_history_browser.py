"""History and rollback end to end: an operator edits a tool in headless Chromium, compares two
versions, reverts; a connected MCP client hears list_changed and sees the reverted tool, and
the call-log row of its next call opens the exact definition that answered it.

One live Daphne serves the module. The test process only reads committed rows; every write
goes through the server, as an operator's would.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from mcp_app.executors.python import tool_functions
from mcp_app.models import CallLog, Endpoint, Tool
from tests.audit.conftest import wait_for
from tests.support.browser import chromium
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.live import asgi_server, flush_database

pytestmark = pytest.mark.django_db

PASSWORD = "history-browser-password"
SLUG = "history"
JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
WAIT_SECONDS = 10.0


@pytest.fixture(scope="module")
def site(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    with django_db_blocker.unblock():
        endpoint = make_endpoint(SLUG)
        echo = make_python_tool(
            "echo",
            "echo",
            description="Echoes.",
            input_schema=dict(tool_functions()["echo"].input_schema),
        )
        endpoint.tools.add(echo)
        User.objects.create_superuser("operator", "op@example.com", PASSWORD)
        ids = {"endpoint": endpoint.pk, "tool": echo.pk}
    with asgi_server("daphne", {"SERVE_STATIC": "1"}) as url:
        yield {"url": url, **ids}
    flush_database(django_db_blocker)


class Listener:
    """A legacy session's GET stream, read on a thread into a queue of JSON-RPC messages."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = httpx.Client(timeout=30)
        self.session_id = self._initialize()
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self._open = threading.Event()
        self._closing = False
        self._streaming = httpx.Client(timeout=None)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        assert self._open.wait(WAIT_SECONDS), "the GET stream never opened"

    def _initialize(self) -> str:
        response = self.client.post(
            self.url,
            headers=JSON,
            json={
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "history-test", "version": "1"},
                },
            },
        )
        assert response.status_code == 200, response.text
        return response.headers["mcp-session-id"]

    def _read(self) -> None:
        headers = {"accept": "text/event-stream", "mcp-session-id": self.session_id}
        try:
            with self._streaming.stream("GET", self.url, headers=headers) as response:
                assert response.status_code == 200
                self._open.set()
                for line in response.iter_lines():
                    if line.startswith("data:") and line[5:].strip():
                        self.messages.put(json.loads(line[5:]))
        except (httpx.HTTPError, RuntimeError):
            # close() ends the stream from the test's thread.
            if not self._closing:
                raise

    def close(self) -> None:
        self._closing = True
        self._streaming.close()
        self.client.close()
        self._thread.join(WAIT_SECONDS)

    def next_message(self) -> dict[str, Any]:
        return self.messages.get(timeout=WAIT_SECONDS)

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        headers = {
            **JSON,
            "mcp-session-id": self.session_id,
            "mcp-protocol-version": "2025-11-25",
        }
        body = {"jsonrpc": "2.0", "id": 9, "method": method, "params": params}
        response = self.client.post(self.url, headers=headers, json=body)
        assert response.status_code == 200, response.text
        if response.headers["content-type"].startswith("application/json"):
            return response.json()
        for line in response.text.splitlines():
            if line.startswith("data:") and '"result"' in line:
                return json.loads(line[5:])
        raise AssertionError(response.text)


def log_in(page: Page, base: str) -> None:
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    expect(page).to_have_url(f"{base}/admin/")


def latest_version(tool_id: int) -> int:
    return Tool.history.filter(id=tool_id).latest().history_id


def test_an_operator_reverts_a_tool_and_clients_and_the_call_log_follow(
    site: dict[str, Any],
) -> None:
    base, tool_id = site["url"], site["tool"]
    original = latest_version(tool_id)
    listener = Listener(f"{base}/mcp/{SLUG}")
    try:
        with chromium() as browser:
            page = browser.new_context().new_page()
            page.set_default_timeout(10_000)
            log_in(page, base)

            # An edit, as any operator makes it.
            page.goto(f"{base}/admin/mcp_app/tool/{tool_id}/change/")
            page.fill("#id_description", "Echoes loudly.")
            page.click("input[name=_save]")
            expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
            assert listener.next_message()["method"] == "notifications/tools/list_changed"

            # The history page compares the two newest versions by default.
            page.goto(f"{base}/admin/mcp_app/tool/{tool_id}/history/")
            page.click("#history-compare input[type=submit]")
            diff = page.locator("#history-diff tr[data-field=description]")
            expect(diff.locator("del")).to_have_text("Echoes.")
            expect(diff.locator("ins")).to_have_text("Echoes loudly.")

            # Open the older version and revert to it.
            page.click(f"text=version #{original}")
            expect(page.locator("#id_description")).to_have_value("Echoes.")
            page.click("input[name=_save][value=Revert]")
            expect(page.locator(".messagelist")).to_contain_text(
                f"was reverted to version #{original}"
            )

        assert listener.next_message()["method"] == "notifications/tools/list_changed"
        listed = listener.request("tools/list", {})
        assert [tool["description"] for tool in listed["result"]["tools"]] == ["Echoes."]
        reverted = Tool.history.filter(id=tool_id).latest()
        assert (reverted.description, reverted.history_change_reason) == ("Echoes.", "admin")
        assert reverted.history_user.username == "operator"

        answer = listener.request("tools/call", {"name": "echo", "arguments": {"message": "hi"}})
        assert not answer["result"].get("isError")
        row = wait_for(
            lambda: CallLog.objects.filter(rpc_method="tools/call", target="echo").first()
        )
        version = Endpoint.objects.get(pk=site["endpoint"]).catalog_version
        assert (row.tool_history_id, row.catalog_version) == (reverted.history_id, version)

        # The auditor's way back: the call's page links the version that answered it.
        with chromium() as browser:
            page = browser.new_context().new_page()
            page.set_default_timeout(10_000)
            log_in(page, base)
            page.goto(f"{base}/audit/{row.pk}/")
            expect(page.locator("#definition")).to_contain_text(f"catalog version {version}")
            page.click(f"#definition >> text=tool version #{reverted.history_id}")
            expect(page.locator("#id_description")).to_have_value("Echoes.")
    finally:
        listener.close()
