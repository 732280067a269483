"""Client registration: DCR (open, rate limited, purged when unused) and the CIMD fetcher on
our SSRF guard."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import Client, override_settings
from django.utils import timezone
from oauth2_provider.cimd import CIMDError
from oauth2_provider.models import AccessToken, Application

from mcp_app.auth.cimd import GuardedMetadataFetcher, max_age, parse_document
from tests.auth.conftest import Catalog
from tests.support.oauth import REDIRECT_URI, issue_token, make_client

pytestmark = pytest.mark.django_db

METADATA = {
    "redirect_uris": [REDIRECT_URI],
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "client_name": "Some MCP client",
    "token_endpoint_auth_method": "none",
    "application_type": "native",
}


def new_address() -> str:
    """A client address no earlier test (or run, within the hour) registered from."""
    return f"2001:db8::{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}"


def register(metadata: dict | None = None, address: str | None = None) -> object:
    return Client().post(
        "/o/register/",
        json.dumps(metadata or METADATA),
        content_type="application/json",
        REMOTE_ADDR=address or new_address(),
    )


def test_anyone_may_register_a_client_and_it_is_marked_self_registered():
    response = register()

    assert response.status_code == 201
    data = response.json()
    application = Application.objects.get(client_id=data["client_id"])
    assert application.registration_source == Application.RegistrationSource.DCR
    assert application.client_type == Application.CLIENT_PUBLIC
    assert data["redirect_uris"] == [REDIRECT_URI]


def test_a_registration_without_redirect_uris_is_refused_and_creates_nothing():
    response = register({**METADATA, "redirect_uris": []})

    assert response.status_code == 400
    assert response.json()["error"] in {"invalid_redirect_uri", "invalid_client_metadata"}
    assert not Application.objects.exists()


def test_a_registration_that_is_not_json_is_refused():
    response = Client().post("/o/register/", "client_name=x", content_type="text/plain")

    assert response.status_code == 400
    assert not Application.objects.exists()


@override_settings(OAUTH_DCR_RATE_PER_HOUR=2)
def test_registrations_past_the_hourly_limit_of_an_address_get_429():
    address = new_address()
    assert register(address=address).status_code == 201
    assert register(address=address).status_code == 201

    refused = register(address=address)

    assert refused.status_code == 429
    assert refused["Retry-After"] == "3600"
    assert refused.json()["error"] == "temporarily_unavailable"
    assert Application.objects.count() == 2
    assert register().status_code == 201  # another address


def _aged(application: Application, days: float) -> Application:
    Application.objects.filter(pk=application.pk).update(
        created=timezone.now() - timedelta(days=days)
    )
    return application


def test_purge_removes_old_unused_registrations_only(catalog: Catalog):
    stale = _aged(Application.objects.get(client_id=register().json()["client_id"]), 10)
    fresh = Application.objects.get(client_id=register().json()["client_id"])
    used = _aged(Application.objects.get(client_id=register().json()["client_id"]), 10)
    issue_token(catalog.bob, resource=["http://x/mcp/notes"], client=used)
    manual = _aged(make_client("Made by an admin"), 10)

    out = StringIO()
    call_command("purge_oauth_clients", "--days", "7", stdout=out)

    assert "Deleted 1 unused client registration" in out.getvalue()
    remaining = set(Application.objects.values_list("pk", flat=True))
    assert remaining == {fresh.pk, used.pk, manual.pk}
    assert stale.pk not in remaining
    # The stale client's registration token went with it.
    assert not AccessToken.objects.filter(application_id=stale.pk).exists()


def test_purge_refuses_a_negative_age():
    with pytest.raises(CommandError):
        call_command("purge_oauth_clients", "--days", "-1")


@pytest.mark.parametrize(
    "client_id",
    [
        "https://127.0.0.1/client.json",  # loopback
        "https://10.0.0.8/client.json",  # private network
        "https://169.254.169.254/latest/meta-data",  # cloud metadata
        "https://[::1]/client.json",
    ],
)
def test_the_cimd_fetcher_refuses_private_addresses_without_sending_anything(client_id):
    with pytest.raises(CIMDError, match="could not fetch"):
        GuardedMetadataFetcher().fetch(client_id)


@pytest.mark.parametrize(
    "client_id",
    [
        "http://client.example/client.json",
        "https://client.example",
        "https://client.example/",
        "https://user@client.example/client.json",
        "https://client.example/client.json#frag",
        "https://client.example/a/../client.json",
    ],
)
def test_the_cimd_fetcher_refuses_client_ids_that_are_not_metadata_urls(client_id):
    with pytest.raises(CIMDError):
        GuardedMetadataFetcher().fetch(client_id)


@pytest.mark.parametrize(
    ("status", "content_type", "body"),
    [
        (404, "application/json", b"{}"),
        (200, "text/html", b"{}"),
        (200, "application/json", b"not json"),
        (200, "application/json", b"[1, 2]"),
    ],
)
def test_a_document_that_is_not_a_json_object_from_a_200_is_refused(status, content_type, body):
    with pytest.raises(CIMDError):
        parse_document(status, content_type, body)


def test_a_json_document_is_accepted_with_a_structured_suffix_too():
    assert parse_document(200, "application/json", b'{"a": 1}') == {"a": 1}
    assert parse_document(200, "application/client+json", b'{"a": 1}') == {"a": 1}


@override_settings(
    OAUTH2_PROVIDER={
        **settings.OAUTH2_PROVIDER,
        "CIMD_METADATA_MIN_AGE_SECONDS": 60,
        "CIMD_METADATA_MAX_AGE_SECONDS": 3600,
    }
)
def test_a_documents_cache_lifetime_follows_cache_control_within_bounds():
    assert max_age("max-age=600") == 600
    assert max_age("public, max-age=5") == 60
    assert max_age("max-age=999999") == 3600
    assert max_age("no-store") == 60
    assert max_age("") == 3600
