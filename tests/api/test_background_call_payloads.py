"""What the API shows of a background call's payloads: as much as its call-log row would.

The row keeps arguments and result whole for its worker; the API shows neither without the
call log's payload permission, and with it what the tool's capture policy keeps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from mcp_app.models import BackgroundCall, Endpoint
from mcp_app.services.catalog_writes import tool_create

pytestmark = pytest.mark.django_db

ARGUMENTS = {"q": "visible-query", "api_key": "sk-hidden-key-123"}
RESULT = {"content": [{"type": "text", "text": "answer-text"}], "isError": False}


def make_call(capture_mode: str) -> BackgroundCall:
    tool = tool_create(
        name="lookup", kind="template", config={"template": "{{ q }}"},
        description="Looks up.", capture_mode=capture_mode,
        input_schema={
            "type": "object",
            "properties": {"q": {"type": "string"}, "api_key": {"type": "string"}},
        },
    )  # fmt: skip
    endpoint = Endpoint.objects.create(slug="bg", auth_mode="public")
    return BackgroundCall.objects.create(
        endpoint=endpoint, tool=tool, tool_name="lookup", protocol_version="2025-11-25",
        soft_time_limit=5, hard_time_limit=10, status=BackgroundCall.Status.COMPLETED,
        arguments=ARGUMENTS, result=RESULT,
        input_responses={"ask-1": {"action": "accept", "content": {"pin": "4242"}}},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("permissions", "capture_mode", "arguments", "result"),
    [
        (["mcp_app.view_backgroundcall"], "full", None, None),
        (
            ["mcp_app.view_backgroundcall", "mcp_app.view_call_payloads"], "metadata",
            {"q": "<string>", "api_key": "<string>"},
            {"content": "<array of 1>", "isError": "<boolean>"},
        ),
        (
            ["mcp_app.view_backgroundcall", "mcp_app.view_call_payloads"], "full",
            {"q": "visible-query", "api_key": "[redacted]"}, RESULT,
        ),
    ],
)  # fmt: skip
def test_payloads_show_as_the_call_log_keeps_them(
    token_client: Callable[..., APIClient],
    permissions: list[str],
    capture_mode: str,
    arguments: Any,
    result: Any,
) -> None:
    call = make_call(capture_mode)
    client = token_client(*permissions)
    listed = client.get("/api/v1/background-calls/")
    assert listed.status_code == 200, listed.content
    detail = client.get(f"/api/v1/background-calls/{call.id}/")
    assert detail.status_code == 200
    for body in (listed.json()["results"][0], detail.json()):
        assert (body["arguments"], body["result"]) == (arguments, result)
    for response in (listed, detail):
        assert b"sk-hidden-key-123" not in response.content
        assert b"4242" not in response.content
