"""The call log of requests relayed to upstream MCP servers: each row names the upstream, and
an upstream that could not be reached is told apart from a tool that reported an error.

An auditor asking "what failed" filters on the status: ``tool_error`` is a tool's own error
result (the upstream answered), ``upstream_error`` an upstream that could not be reached
(refused connection, timeout, HTTP 5xx, breaker open). Both count as failures.
"""

from __future__ import annotations

import asyncio
import csv
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connections
from django.test import Client as DjangoClient
from django.urls import reverse
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import PromptReference
from rest_framework.test import APIClient

from mcp_app.models import (
    CallLog,
    Prompt,
    PromptArgument,
    Resource,
    ResourceTemplate,
)
from mcp_app.protocol import errors
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.live import flush_database, free_port, wait_until_idle
from tests.support.mcp_upstream import upstream_process, upstream_row, upstream_tool
from tests.support.mcp_upstream_server import RunningUpstream

pytestmark = pytest.mark.django_db
SLUG = "e2e-up-audit"


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: Any) -> Iterator[RunningUpstream]:
    yield from upstream_process(tmp_path_factory, "e2e-up-audit")


@pytest.fixture(scope="module")
def server(
    live_server_url: str, upstream: RunningUpstream, django_db_blocker: Any
) -> Iterator[str]:
    with django_db_blocker.unblock():
        up = upstream_row("audit-up", upstream.url)
        # Nothing listens there: every request is a refused connection. Two failures open
        # its breaker.
        dead = upstream_row(
            "audit-dead",
            f"http://127.0.0.1:{free_port()}/mcp",
            failure_threshold=2,
            cooldown_seconds=600,
        )
        endpoint = make_endpoint(SLUG)
        endpoint.tools.add(
            upstream_tool("up_echo", up.name, "echo"),
            upstream_tool("up_fails", up.name, "fails"),
            upstream_tool("dead_echo", dead.name, "echo"),
            make_python_tool("local_echo", "echo"),
        )
        for uri, source in (("ours://audit-readme", up), ("ours://audit-dead", dead)):
            resource = Resource(uri=uri, name=uri, upstream=source, remote_uri="up://readme")
            resource.full_clean()
            resource.save()
            endpoint.resources.add(resource)
        template = ResourceTemplate(
            uri_template="up://notes/{topic}",
            name="notes",
            kind=ResourceTemplate.Kind.UPSTREAM,
            upstream=up,
        )
        template.full_clean()
        template.save()
        endpoint.resource_templates.add(template)
        review = Prompt(name="review", description="Code review, by the upstream.", upstream=up)
        review.full_clean()
        review.save()
        PromptArgument.objects.create(prompt=review, name="code", required=True)
        PromptArgument.objects.create(prompt=review, name="language", position=1)
        endpoint.prompts.add(review)
    yield live_server_url
    flush_database(django_db_blocker)


async def test_each_relayed_row_names_its_upstream_and_whether_it_was_reached(server):
    async with asyncio.timeout(30), Client(f"{server}/mcp/{SLUG}", mode="legacy") as client:
        echoed = await client.call_tool("up_echo", {"text": "hi"})
        failed = await client.call_tool("up_fails", {})
        unreachable = [await client.call_tool("dead_echo", {"text": "x"}) for _ in range(3)]
        local = await client.call_tool("local_echo", {"message": "here"})
        read = await client.read_resource("ours://audit-readme")
        with pytest.raises(MCPError) as excinfo:
            await client.read_resource("ours://audit-dead")
        await client.read_resource("up://notes/rust")
        await client.get_prompt("review", {"code": "x = 1"})
        await client.complete(
            PromptReference(type="ref/prompt", name="review"), {"name": "language", "value": "r"}
        )
    assert not echoed.is_error and failed.is_error and not local.is_error
    assert all(result.is_error for result in unreachable)
    assert "circuit breaker open" in unreachable[2].content[0].text
    assert read.contents[0].text == "# Upstream readme"
    assert excinfo.value.error.code == errors.INTERNAL_ERROR
    await asyncio.to_thread(wait_until_idle, server)

    def rows() -> list[tuple[str, str, str, str]]:
        try:
            return [
                (row.target, row.status, row.upstream, row.error_message)
                for row in CallLog.objects.filter(
                    endpoint_slug=SLUG,
                    rpc_method__in=[
                        "tools/call",
                        "resources/read",
                        "prompts/get",
                        "completion/complete",
                    ],
                ).order_by("id")
            ]
        finally:
            connections.close_all()  # this thread's own connection

    recorded = await asyncio.to_thread(rows)
    assert [(target, status, upstream) for target, status, upstream, _ in recorded] == [
        ("up_echo", CallLog.Status.OK, "audit-up"),
        ("up_fails", CallLog.Status.TOOL_ERROR, "audit-up"),
        ("dead_echo", CallLog.Status.UPSTREAM_ERROR, "audit-dead"),
        ("dead_echo", CallLog.Status.UPSTREAM_ERROR, "audit-dead"),
        ("dead_echo", CallLog.Status.UPSTREAM_ERROR, "audit-dead"),
        ("local_echo", CallLog.Status.OK, ""),
        ("ours://audit-readme", CallLog.Status.OK, "audit-up"),
        ("ours://audit-dead", CallLog.Status.UPSTREAM_ERROR, "audit-dead"),
        ("up://notes/rust", CallLog.Status.OK, "audit-up"),
        ("review", CallLog.Status.OK, "audit-up"),
        ("", CallLog.Status.OK, "audit-up"),  # the completion names no target
    ]
    messages = [message for _, _, _, message in recorded]
    assert messages[1] == "it broke"
    assert "Could not reach the upstream 'audit-dead'" in messages[2]
    assert "circuit breaker open" in messages[4]


async def test_the_audit_page_exports_and_api_show_the_upstream(server):
    async with asyncio.timeout(30), Client(f"{server}/mcp/{SLUG}", mode="legacy") as client:
        await client.call_tool("up_fails", {})
        # Rows of the unreachable upstream of this test's own, whatever ran before it (its
        # breaker may be open by now: the rows name the upstream all the same).
        await client.call_tool("dead_echo", {"text": "x"})
        with pytest.raises(MCPError):
            await client.read_resource("ours://audit-dead")
    await asyncio.to_thread(wait_until_idle, server)

    def scan() -> None:
        row = CallLog.objects.filter(endpoint_slug=SLUG, target="up_fails").latest("id")
        auditor = User.objects.create_user("up-audit-auditor", is_staff=True)
        auditor.user_permissions.add(
            *Permission.objects.filter(
                codename__in=["audit_calls", "view_calllog", "manage_every_team"]
            )
        )
        browser = DjangoClient()
        browser.force_login(auditor)
        page = browser.get(reverse("mcp_app:audit_detail", args=[row.pk])).content.decode()
        assert '<dd id="upstream"><a href="/audit/?upstream=audit-up">audit-up</a> ' in page
        listed = browser.get(reverse("mcp_app:audit_list"), {"upstream": "audit-dead"})
        rows = listed.context["rows"]
        assert rows and {(row.upstream, row.target) for row in rows} == {
            ("audit-dead", "dead_echo"),
            ("audit-dead", "ours://audit-dead"),
        }
        response = browser.get(reverse("mcp_app:audit_export_jsonl"), {"tool": "up_fails"})
        exported = b"".join(response.streaming_content).decode()  # type: ignore[attr-defined]
        assert {json.loads(line)["upstream"] for line in exported.splitlines()} == {"audit-up"}
        response = browser.get(reverse("mcp_app:audit_export_csv"), {"tool": "up_fails"})
        text = b"".join(response.streaming_content).decode()  # type: ignore[attr-defined]
        assert {line["upstream"] for line in csv.DictReader(text.splitlines())} == {"audit-up"}
        api = APIClient()
        api.force_authenticate(user=auditor)
        found = api.get("/api/v1/call-log/", {"tool": "up_fails"}).json()["results"]
        assert found and {item["upstream"] for item in found} == {"audit-up"}
        relayed = api.get("/api/v1/call-log/", {"upstream": "audit-up"}).json()["results"]
        assert relayed and {item["upstream"] for item in relayed} == {"audit-up"}

    def scan_and_close() -> None:
        try:
            scan()
        finally:
            connections.close_all()  # this thread's own connection

    await asyncio.to_thread(scan_and_close)
