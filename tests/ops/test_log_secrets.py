"""No credential a client sends in a URL reaches a log line (issue #25): an API key in the
query string is refused, and neither Django's warning about the refusal nor the servers'
access logs quote it, in either log format. Real servers, their output read back."""

from __future__ import annotations

import secrets

import httpx
import pytest

from mcp_app.ops.logs import redact_secrets
from tests.ops.test_json_logs import wait_for_text, web_server

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("log_format", ["json", "text"])
@pytest.mark.parametrize("server", ["uvicorn", "daphne"])
def test_credentials_in_a_query_string_are_never_logged(server, log_format):
    api_key = f"mcpk_{secrets.token_urlsafe(24)}"
    access_token = secrets.token_urlsafe(24)
    other = secrets.token_urlsafe(24)
    urls = [
        f"/api/v1/endpoints/?key={api_key}&ordering=slug",
        f"/api/v1/endpoints/?access_token={access_token}",
        f"/api/v1/endpoints/?q=x&client_secret={other}",
        f"/api/v1/tools/?search={api_key}",  # an API token under any name
        f"/mcp/nowhere?access_token={access_token}",
    ]
    with web_server(server, {"LOG_FORMAT": log_format}) as (base_url, path):
        for url in urls:
            assert httpx.get(base_url + url, timeout=10).status_code >= 400
        wait_for_text(path, lambda text: text.count("/mcp/nowhere") >= 1, "the last request")
        wait_for_text(path, lambda text: "/api/v1/tools/" in text, "the API requests")
    text = path.read_text()
    for secret in (api_key, api_key.removeprefix("mcpk_"), access_token, other):
        assert secret not in text, text
    # The requests are still logged, with what is not a credential.
    assert "Unauthorized: /api/v1/endpoints/" in text
    assert "ordering=slug" in text
    assert "access_token=[redacted]" in text


@pytest.mark.parametrize(
    ("line", "redacted"),
    [
        ("GET /x?token=abc123&page=2", "GET /x?token=[redacted]&page=2"),
        ("GET /x?a=1&API_KEY=zz99&b=2", "GET /x?a=1&API_KEY=[redacted]&b=2"),
        ("<ASGIRequest: GET '/x?key=s3cr3t'>", "<ASGIRequest: GET '/x?key=[redacted]'>"),
        ("Authorization: Bearer abc.def-123", "Authorization: Bearer [redacted]"),
        ("used mcpk_AbC-123_x here", "used [redacted] here"),
        ("GET /x?page=2&sort=key", "GET /x?page=2&sort=key"),
    ],
)
def test_redaction_keeps_the_rest_of_the_line(line, redacted):
    assert redact_secrets(line) == redacted
