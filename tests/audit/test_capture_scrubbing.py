"""The caller's own bearer token never reaches the call log (issue #25): not in the captured
arguments or result, bare or inside a longer string, nor in an error message; and a value
redacted as "Bearer X" is scrubbed as X elsewhere in the payload too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User

from mcp_app.models import Endpoint, Tool
from mcp_app.services.calllog.capture import CapturePolicy, capture_call
from tests.audit.conftest import last_id, recorded_since
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.oauth import issue_token

pytestmark = pytest.mark.django_db

SLUG = "guarded"
JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture(scope="module")
def guarded(audit_url: str, django_db_blocker: Any) -> Iterator[tuple[str, str]]:
    """An OAuth endpoint with a fully captured echo tool, and a token for it."""
    base_url = audit_url.rsplit("/mcp/", 1)[0]
    url = f"{base_url}/mcp/{SLUG}"
    with django_db_blocker.unblock():
        endpoint = make_endpoint(SLUG, auth_mode=Endpoint.AuthMode.OAUTH)
        endpoint.tools.add(make_python_tool("echo", "echo", capture_mode=Tool.Capture.FULL))
        user = User.objects.create_user("scrub-caller")
        token = issue_token(user, resource=[url])
    yield url, token


def call(url: str, token: str, name: str, arguments: dict[str, Any]) -> httpx.Response:
    headers = {
        **JSON,
        "authorization": f"Bearer {token}",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": name,
    }
    body = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": MODERN_META},
    }
    return httpx.post(url, headers=headers, json=body, timeout=10)


def test_the_callers_token_is_scrubbed_bare_from_arguments_and_result(guarded):
    url, token = guarded
    mark = last_id()
    response = call(url, token, "echo", {"message": f"my token is {token}, keep it"})
    assert response.status_code == 200, response.text
    # The tool did see and echo the token: only the log must not keep it.
    assert token in response.text
    [row] = [r for r in recorded_since(mark, url.rsplit("/mcp/", 1)[0]) if r.target == "echo"]
    assert row.principal_id is not None
    assert row.arguments == {"message": "my token is [redacted], keep it"}
    assert row.result["content"] == [{"type": "text", "text": "my token is [redacted], keep it"}]
    assert token not in json.dumps([row.arguments, row.result])


def test_the_callers_token_is_scrubbed_from_an_error_and_its_target(guarded):
    url, token = guarded
    mark = last_id()
    response = call(url, token, f"tool-{token}", {})
    assert token in response.text
    [row] = [r for r in recorded_since(mark, url.rsplit("/mcp/", 1)[0]) if r.rpc_method]
    assert row.error_message
    assert token not in row.error_message
    assert token not in row.target
    assert "[redacted]" in row.target


def test_a_bearer_value_redacted_by_name_is_scrubbed_bare_elsewhere():
    policy = CapturePolicy(mode=Tool.Capture.FULL, max_bytes=4096)
    arguments = {"headers": {"Authorization": "Bearer s3cr3t-value"}, "note": "s3cr3t-value"}
    result = {"content": [{"type": "text", "text": "sent s3cr3t-value upstream"}]}
    args, res = capture_call(arguments, result, policy, frozenset())
    assert args.value == {"headers": {"Authorization": "[redacted]"}, "note": "[redacted]"}
    assert res.value == {"content": [{"type": "text", "text": "sent [redacted] upstream"}]}
