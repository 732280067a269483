"""Every HTTP status the MCP endpoint answers, against a real Daphne process.

Spec-mandated statuses carry a ``spec`` mark; the rest are our choice and say so.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx
import pytest

from mcp_app.models import Session
from mcp_app.protocol import errors
from tests.support.live import asgi_server

JSON_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
MODERN = "2026-07-28"


def initialize_body(version: str = "2025-11-25", request_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "status-test", "version": "1"},
        },
    }


def open_session(client: httpx.Client, url: str, version: str = "2025-11-25") -> str:
    response = client.post(url, json=initialize_body(version), headers=JSON_HEADERS)
    assert response.status_code == 200, response.text
    session_id = response.headers["mcp-session-id"]
    client.post(
        url,
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers={**JSON_HEADERS, "mcp-session-id": session_id, "mcp-protocol-version": version},
    )
    return session_id


def modern_request(
    method: str,
    params: dict[str, Any] | None = None,
    *,
    version: str = MODERN,
    name: str | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": method,
        "params": {**(params or {}), "_meta": meta},
    }
    headers = {**JSON_HEADERS, "mcp-protocol-version": version, "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = name
    return body, headers


def session_count() -> int:
    return Session.objects.count()


def error_code(response: httpx.Response) -> int:
    return response.json()["error"]["code"]


# -- envelope checks -------------------------------------------------------------------------


@pytest.mark.django_db
def test_wrong_content_type_is_415_and_opens_no_session(client, endpoint_url):
    before = session_count()
    response = client.post(
        endpoint_url,
        content=json.dumps(initialize_body()),
        headers={"content-type": "text/plain", "accept": JSON_HEADERS["accept"]},
    )
    assert response.status_code == 415
    assert session_count() == before


@pytest.mark.django_db
def test_accept_without_json_is_406(client, endpoint_url):
    response = client.post(
        endpoint_url,
        json=initialize_body(),
        headers={"content-type": "application/json", "accept": "text/html"},
    )
    assert response.status_code == 406


@pytest.mark.django_db
def test_body_over_the_limit_is_413_and_opens_no_session(client, endpoint_url):
    before = session_count()
    padding = "x" * (4 * 1024 * 1024)
    body = initialize_body()
    body["params"]["clientInfo"]["name"] = padding
    response = client.post(endpoint_url, content=json.dumps(body), headers=JSON_HEADERS)
    assert response.status_code == 413
    assert session_count() == before


@pytest.mark.django_db
def test_malformed_json_is_parse_error_with_null_id(client, endpoint_url):
    before = session_count()
    response = client.post(
        endpoint_url, content=b'{"jsonrpc": "2.0", "id": 1,', headers=JSON_HEADERS
    )
    assert response.status_code == 400
    assert response.json()["id"] is None
    assert error_code(response) == errors.PARSE_ERROR
    assert session_count() == before


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b"42",
        b'"initialize"',
        b'{"jsonrpc": "1.0", "id": 1, "method": "initialize"}',
        b'{"jsonrpc": "2.0", "id": true, "method": "ping"}',
        b'{"jsonrpc": "2.0", "id": 1, "method": 5}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1, 2]}',
    ],
)
@pytest.mark.django_db
def test_invalid_jsonrpc_is_invalid_request(client, endpoint_url, body):
    response = client.post(endpoint_url, content=body, headers=JSON_HEADERS)
    assert response.status_code == 400
    assert error_code(response) == errors.INVALID_REQUEST


@pytest.mark.parametrize(
    "body",
    [b"\xff\xfe\x00", b"{" * 5000, b'{"a": ' * 2000, b"null", b"\x00" * 64, b"{}"],
)
@pytest.mark.django_db
def test_garbage_bodies_never_produce_a_server_error(client, endpoint_url, body):
    response = client.post(endpoint_url, content=body, headers=JSON_HEADERS)
    assert 400 <= response.status_code < 500


@pytest.mark.django_db
def test_unknown_endpoint_is_404(client, live_server_url, endpoint_url):
    response = client.post(
        f"{live_server_url}/mcp/nope", json=initialize_body(), headers=JSON_HEADERS
    )
    assert response.status_code == 404


@pytest.mark.django_db
def test_disabled_endpoint_is_404(client, live_server_url, endpoint_url):
    url = f"{live_server_url}/mcp/transport-off"
    response = client.post(url, json=initialize_body(), headers=JSON_HEADERS)
    assert response.status_code == 404


@pytest.mark.django_db
def test_trailing_slash_is_not_the_endpoint(client, endpoint_url):
    response = client.post(f"{endpoint_url}/", json=initialize_body(), headers=JSON_HEADERS)
    assert response.status_code == 404


@pytest.mark.django_db
def test_unsupported_http_method_is_405_with_allow(client, endpoint_url):
    response = client.put(endpoint_url, json=initialize_body(), headers=JSON_HEADERS)
    assert response.status_code == 405
    assert "POST" in response.headers["allow"]


# -- DNS rebinding ---------------------------------------------------------------------------


@pytest.mark.spec("2025-11-25", "basic/transports", "servers MUST validate the Origin header")
@pytest.mark.django_db
def test_foreign_host_is_403(client, endpoint_url):
    before = session_count()
    response = client.post(
        endpoint_url, json=initialize_body(), headers={**JSON_HEADERS, "host": "evil.example.com"}
    )
    assert response.status_code == 403
    assert session_count() == before


@pytest.mark.spec("2025-11-25", "basic/transports", "invalid Origin: HTTP 403 Forbidden")
@pytest.mark.django_db
def test_foreign_origin_is_403(client, endpoint_url):
    response = client.post(
        endpoint_url,
        json=initialize_body(),
        headers={**JSON_HEADERS, "origin": "http://evil.example.com"},
    )
    assert response.status_code == 403


@pytest.mark.parametrize(
    "origin", ["http://localhost:6274", "http://127.0.0.1:9999", "https://app.example.com"]
)
@pytest.mark.django_db
def test_loopback_and_endpoint_allowed_origins_pass_with_cors_headers(client, endpoint_url, origin):
    response = client.post(
        endpoint_url, json=initialize_body(), headers={**JSON_HEADERS, "origin": origin}
    )
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == origin
    assert "Mcp-Session-Id" in response.headers["access-control-expose-headers"]


@pytest.mark.django_db
def test_cors_preflight_from_an_allowed_origin(client, endpoint_url):
    response = client.options(
        endpoint_url,
        headers={"origin": "http://localhost:6274", "access-control-request-method": "POST"},
    )
    assert response.status_code == 204
    assert "mcp-session-id" in response.headers["access-control-allow-headers"].lower()


# -- legacy sessions -------------------------------------------------------------------------


@pytest.mark.spec("2025-11-25", "basic/transports", "session ID MUST only contain visible ASCII")
@pytest.mark.django_db
def test_initialize_opens_a_session_with_a_random_visible_ascii_id(client, endpoint_url):
    first = open_session(client, endpoint_url)
    second = open_session(client, endpoint_url)
    assert first != second
    assert len(first) >= 32
    assert all(0x21 <= ord(c) <= 0x7E for c in first)
    assert Session.objects.filter(id=first, protocol_version="2025-11-25").exists()


@pytest.mark.spec("2025-11-25", "basic/transports", "requests without a session ID SHOULD get 400")
@pytest.mark.django_db
def test_request_without_session_id_is_400(client, endpoint_url):
    response = client.post(
        endpoint_url,
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        headers={**JSON_HEADERS, "mcp-protocol-version": "2025-11-25"},
    )
    assert response.status_code == 400
    assert response.json()["id"] == 2


@pytest.mark.spec("2025-11-25", "basic/transports", "unknown session ID MUST get 404")
@pytest.mark.django_db
def test_unknown_session_id_is_404(client, endpoint_url):
    response = client.post(
        endpoint_url,
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        headers={
            **JSON_HEADERS,
            "mcp-session-id": "no-such-session",
            "mcp-protocol-version": "2025-11-25",
        },
    )
    assert response.status_code == 404


@pytest.mark.django_db
def test_session_of_another_endpoint_is_404(client, live_server_url, endpoint_url):
    session_id = open_session(client, endpoint_url)
    response = client.post(
        f"{live_server_url}/mcp/transport-other",
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        headers={**JSON_HEADERS, "mcp-session-id": session_id},
    )
    assert response.status_code == 404


@pytest.mark.spec("2025-11-25", "basic/transports", "after DELETE the session ID gets 404")
@pytest.mark.django_db
def test_delete_ends_the_session(client, endpoint_url):
    session_id = open_session(client, endpoint_url)
    headers = {**JSON_HEADERS, "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}
    assert client.delete(endpoint_url, headers=headers).status_code == 204
    response = client.post(
        endpoint_url, json={"jsonrpc": "2.0", "id": 3, "method": "ping"}, headers=headers
    )
    assert response.status_code == 404
    assert client.delete(endpoint_url, headers=headers).status_code == 404


@pytest.mark.django_db
def test_delete_without_session_id_is_400(client, endpoint_url):
    assert client.delete(endpoint_url, headers=JSON_HEADERS).status_code == 400


@pytest.mark.django_db
def test_initialize_with_an_unknown_session_id_is_404(client, endpoint_url):
    response = client.post(
        endpoint_url, json=initialize_body(), headers={**JSON_HEADERS, "mcp-session-id": "stale"}
    )
    assert response.status_code == 404


@pytest.mark.spec("2025-11-25", "basic/transports", "notifications are answered 202 Accepted")
@pytest.mark.django_db
def test_notification_is_202_with_no_body(client, endpoint_url):
    session_id = open_session(client, endpoint_url)
    response = client.post(
        endpoint_url,
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers={**JSON_HEADERS, "mcp-session-id": session_id},
    )
    assert response.status_code == 202
    assert response.content == b""


@pytest.mark.django_db
def test_client_response_is_202(client, endpoint_url):
    session_id = open_session(client, endpoint_url)
    response = client.post(
        endpoint_url,
        json={"jsonrpc": "2.0", "id": "s-1", "result": {}},
        headers={**JSON_HEADERS, "mcp-session-id": session_id},
    )
    assert response.status_code == 202


@pytest.mark.spec("2025-11-25", "basic/transports", "unsupported MCP-Protocol-Version: 400")
@pytest.mark.django_db
def test_unsupported_protocol_version_header_is_400(client, endpoint_url):
    session_id = open_session(client, endpoint_url)
    response = client.post(
        endpoint_url,
        json={"jsonrpc": "2.0", "id": 4, "method": "tools/list"},
        headers={
            **JSON_HEADERS,
            "mcp-session-id": session_id,
            "mcp-protocol-version": "1999-01-01",
        },
    )
    assert response.status_code == 400


@pytest.mark.django_db
def test_legacy_request_is_answered_as_json(client, endpoint_url):
    session_id = open_session(client, endpoint_url)
    response = client.post(
        endpoint_url,
        json={
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": "hi"}},
        },
        headers={
            **JSON_HEADERS,
            "mcp-session-id": session_id,
            "mcp-protocol-version": "2025-11-25",
        },
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json()["result"]["content"][0]["text"] == "hi"


@pytest.mark.spec("2025-03-26", "basic", "implementations MUST support receiving batches")
@pytest.mark.django_db
def test_batch_on_a_2025_03_26_session_answers_each_request(client, endpoint_url):
    session_id = open_session(client, endpoint_url, version="2025-03-26")
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "no/such/method"},
    ]
    response = client.post(
        endpoint_url, json=batch, headers={**JSON_HEADERS, "mcp-session-id": session_id}
    )
    assert response.status_code == 200
    replies = {reply["id"]: reply for reply in response.json()}
    assert replies[1]["result"] == {}
    assert [t["name"] for t in replies[2]["result"]["tools"]] == ["echo"]
    assert replies[3]["error"]["code"] == errors.METHOD_NOT_FOUND


@pytest.mark.django_db
def test_batch_on_a_later_session_is_rejected(client, endpoint_url):
    session_id = open_session(client, endpoint_url, version="2025-06-18")
    response = client.post(
        endpoint_url,
        json=[{"jsonrpc": "2.0", "id": 1, "method": "ping"}],
        headers={**JSON_HEADERS, "mcp-session-id": session_id},
    )
    assert response.status_code == 400


# -- GET -------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_get_opens_the_session_event_stream(client, endpoint_url):
    session_id = open_session(client, endpoint_url)
    headers = {"accept": "text/event-stream", "mcp-session-id": session_id}
    with client.stream("GET", endpoint_url, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"


@pytest.mark.django_db
def test_get_without_session_id_is_400(client, endpoint_url):
    response = client.get(endpoint_url, headers={"accept": "text/event-stream"})
    assert response.status_code == 400


@pytest.mark.django_db
def test_get_with_unknown_session_is_404(client, endpoint_url):
    response = client.get(
        endpoint_url, headers={"accept": "text/event-stream", "mcp-session-id": "nope"}
    )
    assert response.status_code == 404


@pytest.mark.django_db
def test_get_without_event_stream_accept_is_406(client, endpoint_url):
    session_id = open_session(client, endpoint_url)
    response = client.get(
        endpoint_url, headers={"accept": "application/json", "mcp-session-id": session_id}
    )
    assert response.status_code == 406


@pytest.mark.spec("2026-07-28", "basic/transports/streamable-http", "GET and DELETE: 405")
@pytest.mark.parametrize("method", ["GET", "DELETE"])
@pytest.mark.django_db
def test_get_and_delete_are_405_in_the_2026_era(client, endpoint_url, method):
    response = client.request(
        method,
        endpoint_url,
        headers={"accept": "text/event-stream", "mcp-protocol-version": MODERN},
    )
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


# -- 2026-07-28 requests ---------------------------------------------------------------------


@pytest.mark.django_db
def test_modern_request_is_answered_without_a_session(client, endpoint_url):
    before = session_count()
    body, headers = modern_request("tools/list")
    response = client.post(endpoint_url, json=body, headers=headers)
    assert response.status_code == 200
    assert "mcp-session-id" not in response.headers
    assert response.json()["result"]["resultType"] == "complete"
    assert session_count() == before


@pytest.mark.spec(
    "2026-07-28", "basic/transports/streamable-http", "missing _meta fields: 400 -32602"
)
@pytest.mark.django_db
def test_modern_request_missing_capabilities_is_400_invalid_params(client, endpoint_url):
    body, headers = modern_request("tools/list")
    del body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    response = client.post(endpoint_url, json=body, headers=headers)
    assert response.status_code == 400
    assert error_code(response) == errors.INVALID_PARAMS


@pytest.mark.spec("2026-07-28", "basic/transports/streamable-http", "header mismatch: 400 -32020")
@pytest.mark.django_db
def test_modern_header_mismatch_is_400(client, endpoint_url):
    body, headers = modern_request(
        "tools/call", {"name": "echo", "arguments": {"message": "x"}}, name="other"
    )
    response = client.post(endpoint_url, json=body, headers=headers)
    assert response.status_code == 400
    assert error_code(response) == errors.HEADER_MISMATCH


@pytest.mark.spec("2026-07-28", "basic/versioning", "unsupported version: 400 -32022")
@pytest.mark.django_db
def test_modern_unsupported_version_lists_supported_ones(client, endpoint_url):
    body, headers = modern_request("tools/list", version="2027-01-15")
    response = client.post(endpoint_url, json=body, headers=headers)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == errors.UNSUPPORTED_PROTOCOL_VERSION
    assert error["data"]["requested"] == "2027-01-15"
    assert "2026-07-28" in error["data"]["supported"]


@pytest.mark.spec("2026-07-28", "basic/transports/streamable-http", "unknown method: 404 -32601")
@pytest.mark.django_db
def test_modern_ping_is_404_method_not_found(client, endpoint_url):
    body, headers = modern_request("ping")
    response = client.post(endpoint_url, json=body, headers=headers)
    assert response.status_code == 404
    assert error_code(response) == errors.METHOD_NOT_FOUND


@pytest.mark.django_db
def test_modern_notification_is_202(client, endpoint_url):
    body, headers = modern_request("notifications/cancelled", {"requestId": 1})
    del body["id"]
    response = client.post(endpoint_url, json=body, headers=headers)
    assert response.status_code == 202


@pytest.mark.django_db
def test_get_with_an_unknown_protocol_version_is_400(client, endpoint_url):
    session_id = open_session(client, endpoint_url)
    response = client.get(
        endpoint_url,
        headers={
            "accept": "text/event-stream",
            "mcp-session-id": session_id,
            "mcp-protocol-version": "1999-01-01",
        },
    )
    assert response.status_code == 400


@pytest.mark.django_db
def test_a_body_that_never_finishes_gets_408_not_a_hung_connection(endpoint_url):
    """Our choice: a stalled upload is answered after MCP_BODY_TIMEOUT_SECONDS.

    Under uvicorn, which streams bodies to the app; Daphne buffers the whole body before the
    app sees the request, so there the timeout is the server's own.
    """
    url = httpx.URL(endpoint_url)
    with asgi_server("uvicorn", {"MCP_BODY_TIMEOUT_SECONDS": "0.5"}) as base:
        port = httpx.URL(base).port
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(
                f"POST {url.path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                "Content-Type: application/json\r\nAccept: application/json\r\n"
                'Content-Length: 100\r\n\r\n{"jsonrpc":'.encode()
            )
            status_line = sock.recv(4096).split(b"\r\n", 1)[0]
    assert status_line == b"HTTP/1.1 408 Request Timeout"


@pytest.mark.spec("2026-07-28", "basic/transports/streamable-http", "OWS is not part of a value")
@pytest.mark.parametrize("server", ["daphne", "uvicorn"])
@pytest.mark.django_db
def test_whitespace_around_a_header_value_is_not_part_of_it(endpoint_url, server):
    body, headers = modern_request("tools/call", {"name": "echo", "arguments": {"message": "x"}})
    payload = json.dumps(body).encode()
    path = httpx.URL(endpoint_url).path
    with asgi_server(server) as base:
        port = httpx.URL(base).port
        # httpx refuses to send such a value, so the request is written by hand.
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        request = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{head}"
            f"Mcp-Name:   echo  \r\nContent-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
        ).encode() + payload
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(request)
            raw = b""
            while chunk := sock.recv(65536):
                raw += chunk
    status_line, _, rest = raw.partition(b"\r\n")
    assert status_line.split()[1] == b"200", raw
    assert b'"text":"x"' in rest
