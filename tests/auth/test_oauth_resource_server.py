"""Each endpoint as a resource server: raw probes of the bearer check, per-item scopes and
groups, session binding, the token cache, and the query budget with OAuth.

The ASGI application runs in this process (``asgi_call``); its ORM calls run on the thread
pool, so the data is committed (``transaction=True``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from oauth2_provider.models import AccessToken

from mcp_app.auth.bearer import TokenCache, token_info
from mcp_app.models import CallLog, Endpoint
from mcp_app.services.process_cache import ProcessCache
from tests.auth.conftest import OTHER_SLUG, SLUG, Catalog
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.oauth import AsgiResponse, asgi_call, issue_token
from tests.support.queries import all_threads_queries
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

NOTES = f"{settings.PUBLIC_BASE_URL}/mcp/{SLUG}"
OTHER = f"{settings.PUBLIC_BASE_URL}/mcp/{OTHER_SLUG}"
PRM = f"{settings.PUBLIC_BASE_URL}/.well-known/oauth-protected-resource/mcp/{SLUG}"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def call(
    method: str,
    params: dict[str, Any] | None = None,
    *,
    token: str | None = None,
    slug: str = SLUG,
    name: str | None = None,
    headers: dict[str, str] | None = None,
    query_string: bytes = b"",
    capabilities: dict[str, Any] | None = None,
) -> AsgiResponse:
    """One 2026-07-28 request to ``/mcp/<slug>``."""
    all_headers = {**JSON, "mcp-protocol-version": "2026-07-28", "mcp-method": method}
    if name:
        all_headers["mcp-name"] = name
    if token is not None:
        all_headers["authorization"] = f"Bearer {token}"
    all_headers.update(headers or {})
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": method,
        "params": {
            **(params or {}),
            "_meta": {
                **MODERN_META,
                "io.modelcontextprotocol/clientCapabilities": capabilities or {},
            },
        },
    }
    return async_to_sync(asgi_call)(
        "POST",
        f"/mcp/{slug}",
        headers=all_headers,
        body=json.dumps(body).encode(),
        query_string=query_string,
    )


def legacy(body: dict[str, Any], token: str, session: str | None = None) -> AsgiResponse:
    headers = {**JSON, "authorization": f"Bearer {token}"}
    if session:
        headers["mcp-session-id"] = session
        headers["mcp-protocol-version"] = "2025-11-25"
    return async_to_sync(asgi_call)(
        "POST", f"/mcp/{SLUG}", headers=headers, body=json.dumps(body).encode()
    )


def initialize(token: str) -> str:
    response = legacy(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "probe", "version": "1"},
            },
        },
        token,
    )
    assert response.status == 200, response.body
    return response.headers["mcp-session-id"]


def result(response: AsgiResponse) -> Any:
    assert response.status == 200, (response.status, response.body)
    return json.loads(response.body)["result"]


def token_for(user: User, scope: str = "mcp:read", **kwargs: Any) -> str:
    kwargs.setdefault("resource", [NOTES])
    return issue_token(user, scope=scope, **kwargs)


def test_a_request_without_a_token_is_401_naming_the_metadata_and_the_base_scope(
    catalog: Catalog,
):
    response = call("tools/list")

    assert response.status == 401
    assert response.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{PRM}", scope="mcp:read"'
    )


@pytest.mark.parametrize(
    "make_token",
    [
        pytest.param(lambda c: "garbage-token", id="unknown"),
        pytest.param(lambda c: token_for(c.bob, expires_in=-5), id="expired"),
        pytest.param(lambda c: token_for(c.bob, resource=[OTHER]), id="other-endpoint"),
        pytest.param(lambda c: token_for(c.bob, resource=[]), id="no-resource"),
        pytest.param(lambda c: token_for(None), id="no-user"),
        pytest.param(
            lambda c: token_for(c.bob, resource=["https://other.example/mcp/notes"]),
            id="other-server",
        ),
    ],
)
def test_a_token_that_is_not_valid_for_this_endpoint_is_401_invalid_token(
    catalog: Catalog, make_token: Any
):
    response = call("tools/list", token=make_token(catalog))

    assert response.status == 401
    header = response.headers["www-authenticate"]
    assert header.startswith(f'Bearer resource_metadata="{PRM}", scope="mcp:read", ')
    assert 'error="invalid_token"' in header


def test_a_deactivated_users_token_is_401(catalog: Catalog):
    token = token_for(catalog.bob)
    User.objects.filter(pk=catalog.bob.pk).update(is_active=False)

    assert call("tools/list", token=token).status == 401


def test_the_resource_is_compared_in_canonical_form(catalog: Catalog):
    upper = NOTES.replace("http://127.0.0.1", "HTTP://127.0.0.1") + "/"
    token = token_for(catalog.bob, resource=[upper])

    assert call("tools/list", token=token).status == 200


def test_a_token_in_the_query_string_is_refused(catalog: Catalog):
    token = token_for(catalog.bob)

    response = call("tools/list", query_string=f"access_token={token}".encode())

    assert response.status == 400
    assert 'error="invalid_request"' in response.headers["www-authenticate"]


@pytest.mark.parametrize("value", ["Bearer", "Bearer  two parts", "Bearer a b"])
def test_malformed_bearer_credentials_are_400(catalog: Catalog, value: str):
    response = call("tools/list", headers={"authorization": value})

    assert response.status == 400
    assert 'error="invalid_request"' in response.headers["www-authenticate"]


def test_a_token_without_the_base_scope_is_403_asking_for_it(catalog: Catalog):
    response = call("tools/list", token=token_for(catalog.bob, scope="mcp:write"))

    assert response.status == 403
    header = response.headers["www-authenticate"]
    assert 'scope="mcp:read mcp:write"' in header
    assert 'error="insufficient_scope"' in header


def test_a_browser_preflight_needs_no_token_and_may_read_the_challenge(catalog: Catalog):
    response = async_to_sync(asgi_call)(
        "OPTIONS", f"/mcp/{SLUG}", headers={"origin": "http://localhost:6274"}
    )

    assert response.status == 204
    unauthorized = call("tools/list", headers={"origin": "http://localhost:6274"})
    assert "WWW-Authenticate" in unauthorized.headers["access-control-expose-headers"]


def test_tools_list_hides_group_gated_tools_and_shows_scope_gated_ones(catalog: Catalog):
    bobs = result(call("tools/list", token=token_for(catalog.bob)))
    alices = result(call("tools/list", token=token_for(catalog.alice)))

    assert [t["name"] for t in bobs["tools"]] == ["echo", "save_note"]
    assert [t["name"] for t in alices["tools"]] == ["echo", "save_note", "staff_report"]


def test_group_gated_prompts_are_hidden_too(catalog: Catalog):
    assert result(call("prompts/list", token=token_for(catalog.bob)))["prompts"] == []
    alices = result(call("prompts/list", token=token_for(catalog.alice)))
    assert [p["name"] for p in alices["prompts"]] == ["briefing"]


def test_calling_a_hidden_tool_is_the_same_as_calling_an_unknown_one(catalog: Catalog):
    response = call(
        "tools/call", {"name": "staff_report", "arguments": {}}, token=token_for(catalog.bob),
        name="staff_report",
    )  # fmt: skip

    assert json.loads(response.body)["error"]["code"] == -32602


def test_a_tool_call_without_its_scope_is_403_with_granted_plus_needed_scopes(catalog: Catalog):
    response = call(
        "tools/call", {"name": "save_note", "arguments": {"text": "hi"}},
        token=token_for(catalog.bob), name="save_note",
    )  # fmt: skip

    assert response.status == 403
    header = response.headers["www-authenticate"]
    assert header == (
        f'Bearer resource_metadata="{PRM}", scope="mcp:read mcp:write", '
        'error="insufficient_scope", error_description="This needs the mcp:write scope"'
    )
    assert json.loads(response.body)["id"] == 1


def test_with_the_scope_the_tool_runs(catalog: Catalog):
    token = token_for(catalog.bob, scope="mcp:read mcp:write")

    answer = result(
        call("tools/call", {"name": "save_note", "arguments": {"text": "hi"}}, token=token,
             name="save_note")
    )  # fmt: skip

    assert answer["content"][0]["text"] == "Saved hi"


def test_reading_a_scope_gated_resource_without_the_scope_is_403(catalog: Catalog):
    response = call("resources/read", {"uri": "notes://secret"}, token=token_for(catalog.bob),
                    name="notes://secret")  # fmt: skip

    assert response.status == 403
    assert 'scope="mcp:read mcp:write"' in response.headers["www-authenticate"]


def test_a_public_endpoint_needs_no_token_and_ignores_one(catalog: Catalog):
    make_endpoint("open").tools.add(*catalog.notes.tools.all())

    assert result(call("tools/list", slug="open"))["tools"]
    listed = result(call("tools/list", slug="open", token="garbage"))["tools"]
    # Public endpoints apply no scope or group rules.
    assert [t["name"] for t in listed] == ["echo", "save_note", "staff_report"]


def test_another_users_token_on_a_session_gets_404(catalog: Catalog):
    alice = token_for(catalog.alice)
    session = initialize(alice)
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}

    assert legacy(ping, alice, session).status == 200
    assert legacy(ping, token_for(catalog.bob), session).status == 404


def test_the_same_user_through_another_client_gets_404_on_the_session(catalog: Catalog):
    session = initialize(token_for(catalog.alice))

    other_client = token_for(catalog.alice)  # issue_token registers a new client each time
    response = legacy({"jsonrpc": "2.0", "id": 2, "method": "ping"}, other_client, session)

    assert response.status == 404


def test_another_user_cannot_close_a_session(catalog: Catalog):
    alice = token_for(catalog.alice)
    session = initialize(alice)
    headers = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}

    refused = async_to_sync(asgi_call)(
        "DELETE", f"/mcp/{SLUG}",
        headers={**headers, "authorization": f"Bearer {token_for(catalog.bob)}"},
    )  # fmt: skip

    assert refused.status == 404
    assert legacy({"jsonrpc": "2.0", "id": 2, "method": "ping"}, alice, session).status == 200


def test_a_revoked_token_is_accepted_only_while_its_lookup_is_cached(catalog: Catalog):
    now = [1000.0]
    cache: TokenCache = ProcessCache(16, clock=lambda: now[0])
    token = token_for(catalog.bob)
    assert async_to_sync(token_info)(token, cache) is not None

    AccessToken.objects.all().delete()  # revoked
    now[0] += settings.OAUTH_TOKEN_CACHE_SECONDS - 0.5
    assert async_to_sync(token_info)(token, cache) is not None
    now[0] += 1.0

    assert async_to_sync(token_info)(token, cache) is None


def test_the_token_cache_stays_within_its_size():
    cache: TokenCache = ProcessCache(2)
    for key in "abc":
        cache.put(key, None)

    assert cache.fresh("a", 60) is None
    assert cache.fresh("c", 60) is not None


def test_an_oauth_request_costs_no_query_once_token_and_endpoint_are_cached(catalog: Catalog):
    token = token_for(catalog.bob)
    assert call("tools/list", token=token).status == 200  # caches the token and the snapshot

    with all_threads_queries() as listing:
        assert call("tools/list", token=token).status == 200
    with all_threads_queries() as calling:
        answer = call("tools/call", {"name": "echo", "arguments": {"message": "x"}},
                      token=token, name="echo")  # fmt: skip
    assert result(answer)["content"][0]["text"] == "x"
    assert (len(listing), len(calling)) == (0, 0), (listing.statements, calling.statements)


def test_the_call_log_records_the_user_and_the_client(catalog: Catalog):
    token = token_for(catalog.bob)
    client_id = AccessToken.objects.get().application.client_id

    assert call("tools/list", token=token).status == 200

    row = wait_until(
        lambda: CallLog.objects.filter(principal_id=catalog.bob.pk).first(), "recorded"
    )
    assert row.client_id == client_id
    assert row.rpc_method == "tools/list"


def test_an_oauth_token_does_not_open_the_admin(catalog: Catalog):
    User.objects.filter(pk=catalog.bob.pk).update(is_staff=True, is_superuser=True)
    token = token_for(catalog.bob)

    response = Client().get("/admin/", HTTP_AUTHORIZATION=f"Bearer {token}")

    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_disabling_oauth_on_an_endpoint_makes_it_public(catalog: Catalog):
    Endpoint.objects.filter(slug=SLUG).update(auth_mode=Endpoint.AuthMode.PUBLIC)

    assert call("tools/list").status == 200


def test_a_sealed_request_state_only_works_for_the_principal_it_was_issued_to(catalog: Catalog):
    catalog.notes.tools.add(make_python_tool("ask_confirmation", "ask_confirmation"))
    alice, bob = token_for(catalog.alice), token_for(catalog.bob)
    eliciting = {"elicitation": {"form": {}}}
    arguments = {"question": "Delete it?"}

    def ask(token: str, extra: dict[str, Any]) -> AsgiResponse:
        params = {"name": "ask_confirmation", "arguments": arguments, **extra}
        return call("tools/call", params, token=token, name="ask_confirmation",
                    capabilities=eliciting)  # fmt: skip

    asked = result(ask(alice, {}))
    assert asked["resultType"] == "input_required"
    (key,) = asked["inputRequests"]
    retry = {
        "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}},
        "requestState": asked["requestState"],
    }

    stolen = json.loads(ask(bob, retry).body)
    done = result(ask(alice, retry))

    assert stolen["error"]["code"] == -32602
    assert done["structuredContent"] == {"confirmed": True, "action": "accept"}
