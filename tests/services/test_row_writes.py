"""The write path for upstreams, credentials, reverts and deletes (``services.row_writes``):
the admin, the API and catalog import write the same upstream, stamp its history with their
own user and source, revert through the write path's checks, and delete only what nothing
uses, recording who deleted."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from mcp_app.api import serializers as api_serializers
from mcp_app.api import views as api_views
from mcp_app.models import (
    Credential,
    Endpoint,
    Prompt,
    Resource,
    ResourceTemplate,
    Tool,
    Upstream,
    UpstreamConnection,
)
from mcp_app.services import history
from mcp_app.services.api_tokens import api_token_create
from mcp_app.services.catalog_io import FORMAT, catalog_import
from mcp_app.services.catalog_writes import endpoint_create, tool_create, tool_update
from mcp_app.services.connections import upstream_connections_revoke
from mcp_app.services.credentials import credential_create, encrypt_secret
from tests.api.conftest import CATALOG_PERMISSIONS, make_user
from tests.support.admin_forms import upstream_form

pytestmark = pytest.mark.django_db

WRITTEN = (Endpoint, Tool, Resource, ResourceTemplate, Prompt, Upstream, Credential)
# Columns that differ between two rows of the same input.
BOOKKEEPING = {"id", "name", "created_at", "updated_at"}


@pytest.fixture
def robot() -> User:
    return make_user("robot", CATALOG_PERMISSIONS)


@pytest.fixture
def api(robot: User) -> APIClient:
    _token, key = api_token_create(user=robot, name="ci")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def test_every_admin_serializer_and_viewset_of_these_rows_writes_through_the_write_path() -> None:
    """Django's and DRF's own saves and deletes are not greppable: each must be replaced."""
    admins = {
        model.__name__: {
            name: getattr(type(admin.site._registry[model]), name).__module__
            for name in ("save_model", "delete_model", "delete_queryset")
        }
        for model in WRITTEN
    }
    viewsets = {
        view.serializer_class.Meta.model.__name__: view
        for view in vars(api_views).values()
        if isinstance(view, type)
        and getattr(view, "serializer_class", None) is not None
        and getattr(view.serializer_class.Meta, "model", None) in WRITTEN
    }
    serializers = {
        name: {
            method: getattr(view.serializer_class, method).__module__
            for method in ("create", "update")
        }
        for name, view in viewsets.items()
    }

    # Ours (admin/writes.py, or a subclass calling it): never Django's own.
    assert [
        (model, name, module)
        for model, methods in admins.items()
        for name, module in methods.items()
        if not module.startswith("mcp_app.admin.")
    ] == []
    assert sorted(viewsets) == sorted(model.__name__ for model in WRITTEN)
    assert {
        name: view.perform_destroy.__module__ for name, view in viewsets.items()
    } == dict.fromkeys(viewsets, "mcp_app.api.views")
    assert serializers == {
        name: {"create": api_serializers.__name__, "update": api_serializers.__name__}
        for name in viewsets
    }


def upstream_values(name: str) -> dict[str, Any]:
    row = Upstream.objects.get(name=name)
    return {
        field.attname: getattr(row, field.attname)
        for field in Upstream._meta.concrete_fields
        if field.attname not in BOOKKEEPING
    }


def upstream_stamp(name: str) -> tuple[str | None, str | None]:
    latest = Upstream.objects.get(name=name).history.latest()
    user = latest.history_user
    return latest.history_change_reason, user.username if user is not None else None


def test_every_interface_writes_the_same_upstream_with_its_own_user_and_source(
    admin_client: Client, api: APIClient
) -> None:
    url = "https://peer.example.com/mcp"
    added = admin_client.post(reverse("admin:mcp_app_upstream_add"), upstream_form(name="by-admin"))
    posted = api.post("/api/v1/upstreams/", {"name": "by-api", "url": url})
    document = {"format": FORMAT, "upstreams": [{"name": "by-import", "url": url}]}
    imported = api.post("/api/v1/catalog/import/", {"document": document})

    assert (added.status_code, posted.status_code, imported.status_code) == (302, 201, 200)
    expected = upstream_values("by-admin")
    assert upstream_values("by-api") == expected
    assert upstream_values("by-import") == expected
    assert [upstream_stamp(name) for name in ("by-admin", "by-api", "by-import")] == [
        (history.ADMIN, "admin"),
        (history.API, "robot"),
        (history.IMPORT, "robot"),
    ]


def test_a_credential_written_through_the_api_names_its_user_and_keeps_its_secret_hidden(
    api: APIClient,
) -> None:
    posted = api.post(
        "/api/v1/credentials/", {"name": "gh", "kind": "bearer", "secret": "s3cret-7731"}
    )
    changed = api.patch(f"/api/v1/credentials/{posted.json()['id']}/", {"description": "GitHub"})

    assert (posted.status_code, changed.status_code) == (201, 200)
    assert "s3cret-7731" not in posted.content.decode() + changed.content.decode()
    credential = Credential.objects.get(name="gh")
    assert credential.has_secret and credential.description == "GitHub"
    assert [
        (record.history_change_reason, record.history_user.username)
        for record in credential.history.order_by("history_id")
    ] == [(history.API, "robot")] * 2


def test_a_revert_through_the_api_runs_the_write_paths_checks_and_names_its_user(
    api: APIClient,
) -> None:
    main = endpoint_create(slug="main")
    clock = {"kind": "python", "config": {"function": "current_time"}}
    moving = tool_create(name="clock", description="First.", endpoints=[main], **clock)
    first = moving.history.latest().history_id
    tool_update(tool=moving, data={"name": "time", "description": "Second."})
    second = moving.history.latest().history_id
    tool_create(name="clock", endpoints=[main], **clock)

    refused = api.post(f"/api/v1/tools/{moving.pk}/revert/", {"history_id": first})
    tool_update(tool=moving, data={"description": "Third."})
    reverted = api.post(f"/api/v1/tools/{moving.pk}/revert/", {"history_id": second})

    assert refused.status_code == 400
    assert [error["message"] for error in refused.json()["errors"]] == [
        "Endpoint 'main' already has another tool named 'clock'."
    ]
    assert reverted.status_code == 200, reverted.content
    moving.refresh_from_db()
    assert (moving.name, moving.description) == ("time", "Second.")
    latest = moving.history.latest()
    assert (latest.history_change_reason, latest.history_user.username) == (history.API, "robot")
    # The refusal saved nothing: the versions are the three writes and the revert.
    assert moving.history.count() == 4


def test_a_revert_through_the_api_refuses_a_config_naming_a_credential_gone_since(
    api: APIClient,
) -> None:
    gh = credential_create(name="gh", kind="bearer", secret="s3cret-5512")
    url = "https://api.example/"
    repo = tool_create(
        name="repo",
        kind="http",
        description="A repo.",
        config={"method": "GET", "url": url, "credential": "gh"},
    )
    first = repo.history.latest().history_id
    tool_update(tool=repo, data={"config": {"method": "GET", "url": url}})
    gh.delete()

    refused = api.post(f"/api/v1/tools/{repo.pk}/revert/", {"history_id": first})

    assert refused.status_code == 400
    assert refused.json()["errors"] == [
        {
            "path": "config.credential",
            "message": "No credential named 'gh' here.",
            "code": "invalid",
        }
    ]
    repo.refresh_from_db()
    assert repo.config == {"method": "GET", "url": url}
    assert repo.history.count() == 2


def test_a_delete_is_refused_alike_while_in_use_and_records_who_deleted(
    admin_client: Client, api: APIClient
) -> None:
    url = "https://peer.example.com/mcp"
    peer = Upstream.objects.create(name="peer", url=url)
    relay = {"name": "relay", "kind": "mcp_upstream", "description": "Relays.",
             "config": {"upstream": "peer", "tool": "echo"}}  # fmt: skip
    tool_create(**relay, input_schema={"type": "object"})
    for name in ("by-admin", "by-api", "by-import"):
        Upstream.objects.create(name=name, url=url)
    by_import = Upstream.objects.get(name="by-import")

    refused_admin = admin_client.post(
        reverse("admin:mcp_app_upstream_delete", args=[peer.pk]), {"post": "yes"}
    )
    refused_api = api.delete(f"/api/v1/upstreams/{peer.pk}/")
    # A whole catalog keeping the tool and listing no upstream: prune would delete them all.
    document = {"format": FORMAT, "tools": [{**relay, "input_schema": {"type": "object"}}]}
    refused_import = api.post("/api/v1/catalog/import/", {"document": document, "prune": True})

    words = "The upstream 'peer' is still used by: tool 'relay' (config.upstream)."
    assert refused_admin.status_code == 200
    assert "relay" in refused_admin.content.decode()
    assert refused_api.status_code == 409
    assert words in refused_api.content.decode()
    assert refused_import.status_code == 400
    assert [error["message"][: len(words)] for error in refused_import.json()["errors"]] == [words]
    assert Upstream.objects.count() == 4

    deleted_admin = admin_client.post(
        reverse("admin:mcp_app_upstream_delete", args=[Upstream.objects.get(name="by-admin").pk]),
        {"post": "yes"},
    )
    deleted_api = api.delete(f"/api/v1/upstreams/{Upstream.objects.get(name='by-api').pk}/")
    keep = {"name": "peer", "url": url}
    pruned = api.post(
        "/api/v1/catalog/import/",
        {"document": {**document, "upstreams": [keep]}, "prune": True},
    )

    assert (deleted_admin.status_code, deleted_api.status_code) == (302, 204)
    assert pruned.status_code == 200, pruned.content
    assert list(Upstream.objects.values_list("name", flat=True)) == ["peer"]
    deletions = {
        record.name: (record.history_change_reason, record.history_user.username)
        for record in Upstream.history.filter(history_type="-")
    }
    assert deletions == {
        "by-admin": (history.ADMIN, "admin"),
        "by-api": (history.API, "robot"),
        "by-import": (history.IMPORT, "robot"),
    }
    assert by_import.pk not in set(Upstream.objects.values_list("pk", flat=True))


def per_user_upstream(token: str) -> Upstream:
    """A per-user upstream with carol's connection; its authorization server's revocation
    endpoint is on loopback, which the upstream's networks do not allow: asking it fails at
    once, and says so in the log."""
    upstream = Upstream.objects.create(
        name="own", url="https://own.example/mcp", auth_mode=Upstream.AuthMode.USER_OAUTH
    )
    UpstreamConnection.objects.create(
        user=User.objects.create_user("carol"),
        upstream=upstream,
        issuer="https://as.example",
        token_endpoint="https://as.example/token",
        revocation_endpoint="http://127.0.0.1:9/revoke",
        resource="https://own.example/mcp",
        client_id="mcphost",
        access_token_encrypted=encrypt_secret(token),
    )
    return upstream


def test_connections_left_when_the_time_is_up_are_deleted_unrevoked_and_logged(
    caplog: pytest.LogCaptureFixture, django_capture_on_commit_callbacks: Any
) -> None:
    """Deleting an upstream whose authorization server hangs takes bounded time: past the
    budget a connection is not revoked, and the log says so (no token)."""
    token = "at-s3cret-9911"
    upstream = per_user_upstream(token)

    with (
        caplog.at_level(logging.INFO, logger="mcp_app.services.connections"),
        django_capture_on_commit_callbacks(execute=True),
        transaction.atomic(),
    ):
        upstream_connections_revoke(upstream, budget_seconds=0)
        upstream.delete()

    assert not UpstreamConnection.objects.exists()
    assert "deleted with upstream own, not revoked: out of time" in caplog.text
    assert "revocation failed" not in caplog.text
    assert token not in caplog.text


def test_an_upstream_deleted_only_in_a_dry_run_keeps_its_users_connections(
    caplog: pytest.LogCaptureFixture, django_capture_on_commit_callbacks: Any
) -> None:
    token = "at-s3cret-4410"
    per_user_upstream(token)

    with (
        caplog.at_level(logging.INFO, logger="mcp_app.services.connections"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        catalog_import(document={"format": FORMAT}, prune=True, dry_run=True)
    # The real delete asks the authorization server (here: refused at once by the guard).
    with (
        caplog.at_level(logging.INFO, logger="mcp_app.services.connections"),
        django_capture_on_commit_callbacks(execute=True) as committed,
    ):
        report = catalog_import(document={"format": FORMAT}, prune=True)

    assert [(change.action, change.key) for change in report.changes] == [("delete", "own")]
    assert committed
    assert caplog.text.count("revocation failed") == 1
    assert "Upstream own deleted: 0 of 1 connection(s) revoked" in caplog.text
    assert token not in caplog.text
    assert not UpstreamConnection.objects.exists()
