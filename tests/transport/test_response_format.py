"""JSON or SSE: the answer's format follows what the client asked for first.

JSON is the default (cheaper) whenever nothing streams; a client that lists
``text/event-stream`` ahead of ``application/json`` (or weights it higher) gets its answer as
an event stream, primed and resumable on 2025-11-25 sessions. Errors keep their HTTP status.
"""

from __future__ import annotations

import json

import pytest

from mcp_app.transport.http import parse_headers, prefers
from tests.transport.test_status_codes import modern_request, open_session

SSE_FIRST = "text/event-stream, application/json"
JSON_FIRST = "application/json, text/event-stream"


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (SSE_FIRST, True),
        (JSON_FIRST, False),
        ("application/json;q=0.5, text/event-stream", True),
        ("text/event-stream;q=0.2, application/json", False),
        ("text/event-stream", False),  # JSON not acceptable: the 406 check answers that
        ("*/*", False),  # wildcards state no preference
        ("text/event-stream;q=oops, application/json", True),
        ("", False),
    ],
)
def test_preference_is_q_first_then_the_clients_order(accept: str, expected: bool) -> None:
    headers = parse_headers([(b"accept", accept.encode())])
    assert prefers(headers, "text/event-stream", over="application/json") is expected


def sse_events(text: str) -> list[dict[str, str]]:
    events = []
    for block in text.strip().split("\n\n"):
        fields = {}
        for line in block.splitlines():
            if line and not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
        if fields:
            events.append(fields)
    return events


@pytest.mark.django_db
@pytest.mark.parametrize(("accept", "streamed"), [(SSE_FIRST, True), (JSON_FIRST, False)])
def test_a_legacy_answer_comes_in_the_preferred_format(client, endpoint_url, accept, streamed):
    session_id = open_session(client, endpoint_url)
    headers = {
        "content-type": "application/json",
        "accept": accept,
        "mcp-session-id": session_id,
        "mcp-protocol-version": "2025-11-25",
    }
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}
    response = client.post(endpoint_url, json=body, headers=headers)
    assert response.status_code == 200
    if not streamed:
        assert response.headers["content-type"] == "application/json"
        assert [t["name"] for t in response.json()["result"]["tools"]] == ["echo"]
        return
    assert response.headers["content-type"] == "text/event-stream"
    priming, answer = sse_events(response.text)
    # 2025-11-25: primed (id, empty data) so the client could resume, then the answer.
    assert priming["data"] == "" and priming["id"]
    message = json.loads(answer["data"])
    assert message["id"] == 3 and [t["name"] for t in message["result"]["tools"]] == ["echo"]


@pytest.mark.django_db
def test_a_modern_error_keeps_its_status_even_when_sse_is_preferred(client, endpoint_url):
    body, headers = modern_request("no/such/method")
    response = client.post(endpoint_url, json=body, headers={**headers, "accept": SSE_FIRST})
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["code"] == -32601


@pytest.mark.django_db
def test_a_modern_answer_streams_when_sse_is_preferred(client, endpoint_url):
    body, headers = modern_request("tools/list")
    response = client.post(endpoint_url, json=body, headers={**headers, "accept": SSE_FIRST})
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    (answer,) = sse_events(response.text)
    assert json.loads(answer["data"])["result"]["tools"][0]["name"] == "echo"
