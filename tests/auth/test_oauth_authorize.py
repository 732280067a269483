"""The authorization and token endpoints: resource binding (RFC 8707), PKCE, redirect URIs,
the consent page, and what a grant and its tokens carry."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.conf import settings
from django.test import Client
from oauth2_provider.models import AccessToken, Application, Grant

from mcp_app.models import Endpoint
from tests.auth.conftest import OTHER_SLUG, PASSWORD, SLUG, Catalog
from tests.support.oauth import REDIRECT_URI, make_client

pytestmark = pytest.mark.django_db

NOTES = f"{settings.PUBLIC_BASE_URL}/mcp/{SLUG}"
OTHER = f"{settings.PUBLIC_BASE_URL}/mcp/{OTHER_SLUG}"


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def signed_in() -> Client:
    browser = Client()
    assert browser.login(username="bob", password=PASSWORD)
    return browser


def authorize_params(client: Application, challenge: str, **overrides: Any) -> dict[str, Any]:
    params = {
        "response_type": "code",
        "client_id": client.client_id,
        "redirect_uri": REDIRECT_URI,
        "state": "xyz",
        "scope": "mcp:read",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": NOTES,
    }
    params.update(overrides)
    return {key: value for key, value in params.items() if value is not None}


def redirect_params(response: Any) -> dict[str, str]:
    assert response.status_code == 302, response.content[:500]
    location = response["Location"]
    assert location.startswith(REDIRECT_URI), location
    return {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}


def approve(browser: Client, params: dict[str, Any]) -> dict[str, str]:
    """Show the consent page for ``params``, press Allow; return the redirect's parameters."""
    page = browser.get(f"/o/authorize/?{urlencode(params)}")
    assert page.status_code == 200, page.content[:500]
    form = page.context["form"]
    fields = {name: form[name].value() or "" for name in form.fields}
    return redirect_params(browser.post("/o/authorize/", {**fields, "allow": "Authorize"}))


def exchange(client: Application, code: str, verifier: str, **extra: str) -> Any:
    return Client().post(
        "/o/token/",
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT_URI,
            "client_id": client.client_id,
            "code_verifier": verifier,
            **extra,
        },
    )


def test_an_unknown_resource_is_invalid_target_redirected_with_the_state(catalog: Catalog):
    verifier, challenge = pkce()
    params = authorize_params(make_client(), challenge, resource="https://evil.example/mcp")

    answer = redirect_params(signed_in().get(f"/o/authorize/?{urlencode(params)}"))

    assert answer["error"] == "invalid_target"
    assert answer["state"] == "xyz"
    assert not Grant.objects.exists()


def test_a_public_endpoint_is_not_a_resource_tokens_are_issued_for(catalog: Catalog):
    Endpoint.objects.filter(slug=SLUG).update(auth_mode=Endpoint.AuthMode.PUBLIC)
    verifier, challenge = pkce()
    params = authorize_params(make_client(), challenge)

    answer = redirect_params(signed_in().get(f"/o/authorize/?{urlencode(params)}"))

    assert answer["error"] == "invalid_target"


def test_the_grant_and_its_tokens_carry_the_resource_and_the_response_names_the_issuer(
    catalog: Catalog,
):
    client = make_client()
    verifier, challenge = pkce()

    answer = approve(signed_in(), authorize_params(client, challenge))

    assert answer["iss"] == settings.PUBLIC_BASE_URL
    assert Grant.objects.get().resource == [NOTES]
    tokens = json.loads(exchange(client, answer["code"], verifier).content)
    assert tokens["scope"] == "mcp:read"
    assert tokens["expires_in"] <= 3600
    assert AccessToken.objects.get().resource == [NOTES]


def test_without_a_resource_the_only_oauth_endpoint_is_bound(catalog: Catalog):
    Endpoint.objects.filter(slug=OTHER_SLUG).update(enabled=False)
    client = make_client()
    verifier, challenge = pkce()

    answer = approve(signed_in(), authorize_params(client, challenge, resource=None))

    assert Grant.objects.get().resource == [NOTES]
    exchange(client, answer["code"], verifier)
    assert AccessToken.objects.get().resource == [NOTES]


def test_without_a_resource_and_two_endpoints_the_request_is_invalid_target(catalog: Catalog):
    verifier, challenge = pkce()
    params = authorize_params(make_client(), challenge, resource=None)

    answer = redirect_params(signed_in().get(f"/o/authorize/?{urlencode(params)}"))

    assert answer["error"] == "invalid_target"


def test_a_token_request_for_another_endpoint_is_invalid_target(catalog: Catalog):
    client = make_client()
    verifier, challenge = pkce()
    answer = approve(signed_in(), authorize_params(client, challenge))

    response = exchange(client, answer["code"], verifier, resource=OTHER)

    assert response.status_code == 400
    assert json.loads(response.content)["error"] == "invalid_target"
    assert not AccessToken.objects.filter(user__isnull=False).exists()


def test_a_scope_the_endpoint_does_not_have_is_invalid_scope(catalog: Catalog):
    verifier, challenge = pkce()
    params = authorize_params(make_client(), challenge, scope="mcp:read admin")

    answer = redirect_params(signed_in().get(f"/o/authorize/?{urlencode(params)}"))

    assert answer["error"] == "invalid_scope"


def test_without_a_scope_only_the_base_scope_is_granted(catalog: Catalog):
    client = make_client()
    verifier, challenge = pkce()

    answer = approve(signed_in(), authorize_params(client, challenge, scope=None))

    assert json.loads(exchange(client, answer["code"], verifier).content)["scope"] == "mcp:read"


def test_an_authorization_request_without_pkce_is_refused(catalog: Catalog):
    params = authorize_params(make_client(), "x", code_challenge=None, code_challenge_method=None)

    answer = redirect_params(signed_in().get(f"/o/authorize/?{urlencode(params)}"))

    assert answer["error"] == "invalid_request"


def test_plain_pkce_is_refused_and_no_code_is_issued(catalog: Catalog):
    params = authorize_params(make_client(), "plain-challenge-" + "a" * 40)
    params["code_challenge_method"] = "plain"
    browser = signed_in()

    page = browser.get(f"/o/authorize/?{urlencode(params)}")
    if page.status_code == 302:  # refused before consent
        assert redirect_params(page)["error"] == "invalid_request"
    else:  # refused when the code would be created
        form = page.context["form"]
        fields = {name: form[name].value() or "" for name in form.fields}
        answer = redirect_params(browser.post("/o/authorize/", {**fields, "allow": "Authorize"}))
        assert answer["error"] == "invalid_request"
        assert "code" not in answer
    assert not Grant.objects.exists()


def test_a_wrong_code_verifier_gets_no_token(catalog: Catalog):
    client = make_client()
    _verifier, challenge = pkce()
    answer = approve(signed_in(), authorize_params(client, challenge))

    response = exchange(client, answer["code"], "not-the-verifier-" + "b" * 40)

    assert response.status_code == 400
    assert json.loads(response.content)["error"] == "invalid_grant"


def test_an_unregistered_redirect_uri_is_never_redirected_to(catalog: Catalog):
    _verifier, challenge = pkce()
    params = authorize_params(
        make_client(), challenge, redirect_uri="https://attacker.example/callback"
    )

    response = signed_in().get(f"/o/authorize/?{urlencode(params)}")

    assert response.status_code == 400
    assert "attacker.example" not in response.get("Location", "")


def test_the_implicit_grant_is_refused(catalog: Catalog):
    _verifier, challenge = pkce()
    params = authorize_params(make_client(), challenge, response_type="token")

    response = signed_in().get(f"/o/authorize/?{urlencode(params)}")

    assert "access_token" not in response.get("Location", "")
    assert not AccessToken.objects.exists()


def test_a_signed_out_user_is_sent_to_the_site_login_page(catalog: Catalog):
    _verifier, challenge = pkce()
    query = urlencode(authorize_params(make_client(), challenge))

    response = Client().get(f"/o/authorize/?{query}")

    assert response.status_code == 302
    assert response["Location"].startswith(settings.LOGIN_URL)
    login = Client().get(response["Location"])
    assert b"Sign in" in login.content


def test_the_consent_page_says_who_asks_where_it_returns_what_endpoint_and_which_scopes(
    catalog: Catalog,
):
    client = make_client("Claude Helper", registration_source=Application.RegistrationSource.DCR)
    _verifier, challenge = pkce()
    params = authorize_params(client, challenge, scope="mcp:read mcp:write")

    page = signed_in().get(f"/o/authorize/?{urlencode(params)}").content.decode()

    assert "Allow Claude Helper?" in page
    assert "not verified" in page
    assert "127.0.0.1:3030" in page
    assert "a program on this computer" in page
    assert NOTES in page and "Notes" in page
    assert "Use the tools that change things" in page
    assert "(mcp:write)" in page


def test_an_administrator_registered_client_is_shown_as_verified(catalog: Catalog):
    _verifier, challenge = pkce()
    params = authorize_params(make_client("Our own app"), challenge)

    page = signed_in().get(f"/o/authorize/?{urlencode(params)}").content.decode()

    assert "verified" in page and "not verified" not in page


def test_denying_consent_issues_no_code(catalog: Catalog):
    browser = signed_in()
    _verifier, challenge = pkce()
    page = browser.get(f"/o/authorize/?{urlencode(authorize_params(make_client(), challenge))}")
    form = page.context["form"]
    fields = {name: form[name].value() or "" for name in form.fields}

    answer = redirect_params(browser.post("/o/authorize/", fields))

    assert answer["error"] == "access_denied"
    assert not Grant.objects.exists()
