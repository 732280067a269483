"""A User-Agent sent as UTF-8 is stored as the text the client wrote (issue #25), not as its
bytes read one by one as Latin-1; a value that is not UTF-8 is still kept, as Latin-1."""

from __future__ import annotations

import httpx
import pytest

from mcp_app.models import CallLog
from tests.audit.conftest import last_id, recorded_since

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        ("Клиент/1.0 ☃".encode(), "Клиент/1.0 ☃"),
        (b"legacy/1.0 caf\xe9", "legacy/1.0 café"),  # Latin-1, not valid UTF-8
    ],
)
def test_a_user_agent_is_stored_as_the_text_sent(audit_url, sent, stored):
    mark = last_id()
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25",
    }
    with httpx.Client(timeout=10) as client:
        # httpx sends a header given as bytes as it is.
        client.post(audit_url, json=body, headers={**headers, "user-agent": sent})
    rows = recorded_since(mark, audit_url.rsplit("/mcp/", 1)[0])
    assert [row.user_agent for row in rows] == [stored]
    assert CallLog.objects.filter(user_agent=stored).count() == 1
