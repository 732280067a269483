"""Fixtures for OAuth tests: an OAuth-protected catalog, users, and a live server for the SDK.

The live server gets its own Daphne process: revocation must take effect at once there
(``OAUTH_TOKEN_CACHE_SECONDS=0``), CIMD client ids resolve through the stub fetcher (no
network), and registrations are not rate limited.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from pytest_django.fixtures import Settings

from mcp_app.auth.bearer import clear_token_cache
from mcp_app.models import Endpoint, Prompt, Resource, Tool
from mcp_app.services.endpoint_directory import clear_snapshot_cache
from tests.support.catalog import make_endpoint, make_python_tool
from tests.support.live import asgi_server, flush_database

PASSWORD = "correct horse battery staple"
SLUG = "notes"
OTHER_SLUG = "elsewhere"


@dataclass
class Catalog:
    notes: Endpoint
    other: Endpoint
    alice: User  # in the "staff" group
    bob: User


def _template_tool(name: str, template: str, **fields: Any) -> Tool:
    tool = Tool(
        name=name,
        description=f"The {name} tool.",
        kind=Tool.Kind.TEMPLATE,
        config={"template": template, "output": "text"},
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        **fields,
    )
    tool.full_clean()
    tool.save()
    return tool


def build_catalog() -> Catalog:
    """Two OAuth endpoints, a write-scoped tool and resource, and staff-only items."""
    staff = Group.objects.create(name="staff")
    alice = User.objects.create_user("alice", password=PASSWORD)
    alice.groups.add(staff)
    bob = User.objects.create_user("bob", password=PASSWORD)
    notes = make_endpoint(SLUG, title="Notes", auth_mode=Endpoint.AuthMode.OAUTH)
    other = make_endpoint(OTHER_SLUG, title="Elsewhere", auth_mode=Endpoint.AuthMode.OAUTH)
    echo = make_python_tool("echo", "echo")
    save = _template_tool("save_note", "Saved {{ text }}", required_scope="mcp:write")
    report = _template_tool("staff_report", "Report for staff")
    report.allowed_groups.add(staff)
    notes.tools.add(echo, save, report)
    other.tools.add(echo)
    secret = Resource.objects.create(
        uri="notes://secret", name="secret", text="for writers", required_scope="mcp:write"
    )
    notes.resources.add(secret)
    briefing = Prompt.objects.create(name="briefing", description="For staff only.")
    briefing.allowed_groups.add(staff)
    notes.prompts.add(briefing)
    return Catalog(notes=notes, other=other, alice=alice, bob=bob)


@pytest.fixture
def catalog(db: None, settings: Settings) -> Catalog:
    # alice's and bob's passwords hashed cheaply (PBKDF2 costs 0.3-0.7 s a user here): they
    # sign in to this process only. live_site's own users, made per module for a live server
    # on the production settings, keep PBKDF2.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return build_catalog()


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    """Each test starts with no cached token or snapshot in this process.

    Django's cache (Redis, shared with the channel layer and the Celery broker) is not
    cleared; tests that count registrations use an address of their own instead.
    """
    clear_token_cache()
    clear_snapshot_cache()
    yield
    clear_token_cache()
    clear_snapshot_cache()


@dataclass
class LiveSite:
    base_url: str
    catalog: Catalog

    @property
    def notes_url(self) -> str:
        return f"{self.base_url}/mcp/{SLUG}"


@pytest.fixture(scope="module")
def live_site(django_db_setup: None, django_db_blocker: Any) -> Iterator[LiveSite]:
    env = {
        "OAUTH_TOKEN_CACHE_SECONDS": "0",
        "OAUTH_CIMD_FETCHER": "tests.support.oauth.StubMetadataFetcher",
        # Every SDK test registers from 127.0.0.1; the limit has its own test.
        "OAUTH_DCR_RATE_PER_HOUR": "0",
    }
    with django_db_blocker.unblock():
        catalog = build_catalog()
    try:
        with asgi_server("daphne", extra_env=env) as base_url:
            yield LiveSite(base_url, catalog)
    finally:
        flush_database(django_db_blocker)
