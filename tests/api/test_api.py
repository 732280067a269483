"""The management API's resources and actions, through DRF's test client and a real database."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from rest_framework.test import APIClient

from mcp_app.models import (
    CallLog,
    Credential,
    Endpoint,
    MembershipChange,
    Prompt,
    Tool,
    Upstream,
)
from mcp_app.services.calllog.writer import call_log_flush
from mcp_app.services.catalog_writes import endpoint_create, tool_create
from mcp_app.services.credentials import decrypt_secret
from mcp_app.services.sessions import session_open
from tests.api.conftest import CATALOG_PERMISSIONS

pytestmark = pytest.mark.django_db

HTTP_TOOL = {
    "name": "repos",
    "kind": "http",
    "description": "Lists repos.",
    "config": {"method": "GET", "url": "https://api.example.com/users/{user}/repos"},
    "input_schema": {"type": "object", "properties": {"user": {"type": "string"}}},
}


@pytest.fixture
def api(token_client: Callable[..., APIClient]) -> APIClient:
    # An export holds endpoints' rate limits and policies too (catalog_permissions).
    return token_client(
        *CATALOG_PERMISSIONS,
        "mcp_app.view_session",
        "mcp_app.change_session",
        "mcp_app.view_ratelimit",
        "mcp_app.view_policy",
    )


@pytest.fixture
def main(db: None) -> Endpoint:
    return endpoint_create(slug="main", auth_mode="public")


def test_a_tool_of_each_kind_is_created_and_published(api: APIClient, main: Endpoint) -> None:
    python = api.post(
        "/api/v1/tools/",
        {"name": "echo", "kind": "python", "config": {"function": "echo"}, "endpoints": ["main"]},
    )
    template = api.post(
        "/api/v1/tools/",
        {
            "name": "greet",
            "kind": "template",
            "description": "Greets.",
            "config": {"template": "Hello {{ name }}"},
            "input_schema": {"type": "object", "properties": {"name": {"type": "string"}}},
            "endpoints": ["main"],
        },
    )
    http = api.post("/api/v1/tools/", {**HTTP_TOOL, "endpoints": ["main"]})

    assert [python.status_code, template.status_code, http.status_code] == [201, 201, 201]
    # A python tool takes what was omitted from its registered function, as in the admin.
    assert python.json()["description"] == "Return the given message unchanged."
    assert sorted(main.tools.values_list("name", flat=True)) == ["echo", "greet", "repos"]


def test_attaching_through_the_api_is_in_the_endpoints_history(
    api: APIClient, main: Endpoint
) -> None:
    created = api.post(
        "/api/v1/tools/",
        {"name": "echo", "kind": "python", "config": {"function": "echo"}, "endpoints": ["main"]},
    )
    assert created.status_code == 201
    detached = api.patch(f"/api/v1/tools/{created.json()['id']}/", {"endpoints": []})
    assert detached.status_code == 200

    changes = MembershipChange.objects.filter(endpoint_id=main.pk).order_by("changed_at", "id")
    assert [
        (row.item_name, row.action, row.source, row.changed_by and row.changed_by.username)
        for row in changes
    ] == [("echo", "+", "api", "robot"), ("echo", "-", "api", "robot")]


def test_kind_config_is_checked_by_the_admins_rules_with_field_paths(
    api: APIClient, main: Endpoint
) -> None:
    unknown_function = api.post(
        "/api/v1/tools/", {"name": "x", "kind": "python", "config": {"function": "nope"}}
    )
    undeclared = api.post(
        "/api/v1/tools/",
        {**HTTP_TOOL, "config": {"method": "GET", "url": "https://a.example/{owner}/{user}"}},
    )

    assert unknown_function.status_code == 400
    body = unknown_function.json()
    assert body["type"] == "invalid"
    assert "config" in [error["path"] for error in body["errors"]]
    assert undeclared.json()["errors"] == [
        {
            "path": "config.url",
            "message": "{owner} names no property of the input schema.",
            "code": "invalid",
        }
    ]
    assert not Tool.objects.exists()


def test_a_second_tool_of_one_name_on_an_endpoint_is_refused(
    api: APIClient, main: Endpoint
) -> None:
    tool_create(name="repos", kind="template", config={"template": "x"}, description="d",
                endpoints=[main])  # fmt: skip

    response = api.post("/api/v1/tools/", {**HTTP_TOOL, "endpoints": ["main"]})

    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "name"


def test_if_match_stops_a_stale_update(api: APIClient, main: Endpoint) -> None:
    url = f"/api/v1/endpoints/{main.pk}/"
    etag = api.get(url)["ETag"]
    first = api.patch(url, {"title": "First"}, HTTP_IF_MATCH=etag)

    second = api.patch(url, {"title": "Second"}, HTTP_IF_MATCH=etag)

    assert first.status_code == 200 and first["ETag"] != etag
    assert second.status_code == 412
    assert second.json()["type"] == "precondition_failed"
    assert api.patch(url, {"title": "Third"}, HTTP_IF_MATCH=first["ETag"]).status_code == 200
    assert Endpoint.objects.get().title == "Third"


def test_lists_are_cursor_paginated_filtered_and_ordered(api: APIClient) -> None:
    for slug in ("a", "b", "c", "d", "e"):
        endpoint_create(slug=slug, auth_mode="public")
    Endpoint.objects.filter(slug="c").update(enabled=False)

    first = api.get("/api/v1/endpoints/", {"page_size": 2, "ordering": "-slug"}).json()
    second = api.get(first["next"]).json()
    disabled = api.get("/api/v1/endpoints/", {"enabled": "false"}).json()

    assert [row["slug"] for row in first["results"]] == ["e", "d"]
    assert [row["slug"] for row in second["results"]] == ["c", "b"]
    assert [row["slug"] for row in disabled["results"]] == ["c"]
    assert api.get("/api/v1/endpoints/", {"enabled": "maybe"}).status_code == 400


def test_credential_secrets_are_write_only(api: APIClient) -> None:
    created = api.post(
        "/api/v1/credentials/", {"name": "github", "kind": "bearer", "secret": "tok-123"}
    )
    missing = api.post("/api/v1/credentials/", {"name": "other", "kind": "bearer"})
    kept = api.patch(f"/api/v1/credentials/{created.json()['id']}/", {"description": "GH"})

    assert created.status_code == 201
    assert "secret" not in created.json() and created.json()["has_secret"] is True
    assert "tok-123" not in created.content.decode() + kept.content.decode()
    assert missing.json()["errors"][0]["path"] == "secret"
    assert decrypt_secret(Credential.objects.get()) == "tok-123"


def test_disable_and_enable_bump_the_catalog_version(api: APIClient, main: Endpoint) -> None:
    tool = tool_create(name="echo", kind="python", config={"function": "echo"}, endpoints=[main])

    disabled = api.post(f"/api/v1/tools/{tool.pk}/disable/")
    version = Endpoint.objects.get().catalog_version
    enabled = api.post(f"/api/v1/tools/{tool.pk}/enable/")

    assert disabled.json()["enabled"] is False and enabled.json()["enabled"] is True
    assert Endpoint.objects.get().catalog_version > version > main.catalog_version


def test_enable_refuses_a_row_that_cannot_go_live_as_the_admin_does(
    api: APIClient, main: Endpoint
) -> None:
    tool = tool_create(name="echo", kind="python", config={"function": "echo"}, enabled=False)
    # A synced tool whose upstream is gone since: its config no longer passes the write path.
    Tool.objects.filter(pk=tool.pk).update(
        kind=Tool.Kind.MCP_UPSTREAM, config={"upstream": "gone", "tool": "search"}
    )
    versions = tool.history.count()

    refused = api.post(f"/api/v1/tools/{tool.pk}/enable/")
    disabled = api.post(f"/api/v1/tools/{tool.pk}/disable/")

    assert refused.status_code == 400, refused.content
    assert "No upstream named 'gone' here." in refused.content.decode()
    assert disabled.status_code == 200
    assert not Tool.objects.get(pk=tool.pk).enabled
    assert tool.history.count() == versions


# The call log's writer thread commits on its own connection: these tests use committed data.
@pytest.mark.django_db(transaction=True)
def test_try_it_runs_the_tool_and_records_an_admin_test_call(
    api: APIClient, main: Endpoint
) -> None:
    tool = tool_create(name="echo", kind="python", config={"function": "echo"}, endpoints=[main])

    response = api.post(f"/api/v1/tools/{tool.pk}/try/", {"arguments": {"message": "hi"}})

    assert response.status_code == 200
    assert response.json()["is_error"] is False
    assert response.json()["result"]["content"][0]["text"] == "hi"
    assert call_log_flush(timeout=10)
    # Only the admin test call: rows of other modules' live servers may still be arriving.
    assert CallLog.objects.get(target="echo").http_method == "ADMIN"


def test_openapi_import_previews_then_creates_disabled_tools(
    api: APIClient, main: Endpoint
) -> None:
    document = {
        "openapi": "3.1.0",
        "info": {"title": "Pets", "version": "1"},
        "servers": [{"url": "https://pets.example.com"}],
        "paths": {"/pets": {"get": {"operationId": "listPets", "summary": "List pets"}}},
    }

    preview = api.post(
        "/api/v1/tools/openapi-import/", {"document": document, "endpoints": ["main"]}
    )
    created = api.post(
        "/api/v1/tools/openapi-import/",
        {"document": document, "endpoints": ["main"], "preview": False},
    )
    broken = api.post("/api/v1/tools/openapi-import/", {"document": {"swagger": "2.0"}})

    assert [tool["name"] for tool in preview.json()["tools"]] == ["listPets"]
    assert created.status_code == 201
    assert Tool.objects.get().enabled is False
    assert broken.json()["errors"][0]["path"] == "document"


def test_prompts_are_written_with_their_arguments_and_messages(
    api: APIClient, main: Endpoint
) -> None:
    response = api.post(
        "/api/v1/prompts/",
        {
            "name": "review",
            "description": "Review code.",
            "arguments": [{"name": "code", "required": True}],
            "messages": [{"role": "user", "text": "Review {code}"}, {"role": "robot"}],
            "endpoints": ["main"],
        },
    )
    fixed = api.post(
        "/api/v1/prompts/",
        {
            "name": "review",
            "description": "Review code.",
            "arguments": [{"name": "code", "required": True}],
            "messages": [{"role": "user", "text": "Review {code}"}],
            "endpoints": ["main"],
        },
    )

    assert [error["path"] for error in response.json()["errors"]] == ["messages.1.role"]
    assert fixed.status_code == 201
    prompt = Prompt.objects.get()
    assert [m.text for m in prompt.messages.all()] == ["Review {code}"]


@pytest.mark.django_db(transaction=True)
def test_call_log_payloads_need_their_own_permission(
    token_client: Callable[..., APIClient], main: Endpoint
) -> None:
    tool = tool_create(name="echo", kind="python", config={"function": "echo"}, endpoints=[main],
                       capture_mode="full")  # fmt: skip
    auditor = token_client("mcp_app.view_calllog", "mcp_app.audit_calls", username="auditor")
    payloads = token_client(
        "mcp_app.view_calllog", "mcp_app.audit_calls", "mcp_app.view_call_payloads",
        "mcp_app.change_tool", "mcp_app.view_tool", username="payloads",
    )  # fmt: skip
    payloads.post(f"/api/v1/tools/{tool.pk}/try/", {"arguments": {"message": "hi"}})
    bare = token_client("mcp_app.view_calllog", username="bare")
    assert call_log_flush(timeout=10)

    rows = auditor.get("/api/v1/call-log/", {"tool": "echo"}).json()["results"]
    full = payloads.get("/api/v1/call-log/", {"tool": "echo"}).json()["results"]

    assert len(rows) == 1 == CallLog.objects.filter(target="echo").count()
    assert rows[0]["arguments"] is None
    assert full[0]["arguments"] == {"message": "hi"}
    assert bare.get("/api/v1/call-log/").status_code == 403


def test_a_session_is_closed_through_the_api(api: APIClient, main: Endpoint) -> None:
    session = session_open(endpoint_id=main.pk, protocol_version="2025-06-18", client_info={},
                           client_capabilities={})  # fmt: skip

    closed = api.post(f"/api/v1/sessions/{session.id}/close/")
    again = api.post(f"/api/v1/sessions/{session.id}/close/")

    assert closed.status_code == 200 and closed.json()["closed_at"] is not None
    assert again.status_code == 404


def test_catalog_export_and_import_through_the_api(api: APIClient, main: Endpoint) -> None:
    tool_create(name="echo", kind="python", config={"function": "echo"}, endpoints=[main])
    exported = api.get("/api/v1/catalog/export/", {"format": "json"})
    document = json.loads(exported.getvalue())
    document["tools"][0]["description"] = "Echoes."

    dry = api.post("/api/v1/catalog/import/", {"document": document, "dry_run": True})
    document["tools"][0]["config"] = {"function": "nope"}
    bad = api.post("/api/v1/catalog/import/", {"document": document})

    assert exported["Content-Type"].startswith("application/json")
    assert dry.json()["changes"] == [
        {"action": "update", "section": "tools", "key": "echo", "fields": ["description"],
         "detail": ""}
    ]  # fmt: skip
    assert bad.json()["errors"][0]["path"] == "document.tools[0].config (echo)"
    assert Tool.objects.get().description != "Echoes."
    yaml_export = api.get(f"/api/v1/endpoints/{main.pk}/export/")
    assert yaml_export.getvalue().startswith(b"format: mcphost-catalog/2\n")


def test_catalog_import_takes_the_exported_file(api: APIClient, main: Endpoint) -> None:
    tool_create(name="echo", kind="python", config={"function": "echo"}, endpoints=[main])
    document = yaml.safe_load(api.get("/api/v1/catalog/export/").getvalue())  # YAML by default
    document["tools"][0]["description"] = "Echoes."
    edited = yaml.safe_dump(document)

    def upload(text: str, **fields: str) -> Any:
        file = SimpleUploadedFile("catalog.yaml", text.encode(), "application/yaml")
        return api.post("/api/v1/catalog/import/", {"file": file, **fields}, format="multipart")

    dry = upload(edited, dry_run="true")
    assert dry.json() == {
        "dry_run": True,
        "changes": [
            {"action": "update", "section": "tools", "key": "echo", "fields": ["description"],
             "detail": ""}
        ],
    }  # fmt: skip
    assert Tool.objects.get().description != "Echoes."

    applied = upload(edited)
    assert applied.json()["dry_run"] is False and Tool.objects.get().description == "Echoes."
    document["tools"][0]["config"] = {"function": "nope"}
    bad = upload(yaml.safe_dump(document))
    assert bad.json()["errors"][0]["path"] == "file.tools[0].config (echo)"
    assert upload("- not a catalog\n").json()["errors"][0]["path"] == "file"
    neither = api.post("/api/v1/catalog/import/", {"dry_run": True}, format="json")
    assert neither.json()["errors"][0]["message"] == "Send either document or file."


def test_an_upstream_is_managed_with_its_health_read_only(api: APIClient) -> None:
    api.post("/api/v1/credentials/", {"name": "peer-key", "kind": "bearer", "secret": "k"})
    created = api.post(
        "/api/v1/upstreams/",
        {
            "name": "peer",
            "url": "https://peer.example.com/mcp",
            "credential": "peer-key",
            "consecutive_failures": 7,  # read-only: ignored
            "probe_state": "active",  # read-only: ignored
            "probe_interval_seconds": 60,
        },
        format="json",
    )
    peer = Upstream.objects.get()
    Upstream.objects.filter(pk=peer.pk).update(
        consecutive_failures=5, circuit_open_until=timezone.now() + timedelta(minutes=5)
    )
    reset = api.post(f"/api/v1/upstreams/{peer.pk}/reset-breaker/")
    listed = api.get("/api/v1/upstreams/?enabled=true")

    assert created.status_code == 201, created.json()
    assert created.json()["credential"] == "peer-key"
    assert created.json()["consecutive_failures"] == 0
    assert created.json()["probe_state"] == "unknown"
    assert created.json()["probe_interval_seconds"] == 60
    assert created.json()["tools_out_of_sync"] is False
    assert reset.status_code == 200
    assert (reset.json()["consecutive_failures"], reset.json()["circuit_open_until"]) == (0, None)
    assert [row["name"] for row in listed.json()["results"]] == ["peer"]


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"url": "not a url"}, "url"),
        ({"allow_networks": "everywhere"}, "allow_networks"),
        ({"credential": "nowhere"}, "credential"),
        ({"call_timeout": -1}, "call_timeout"),
    ],
)
def test_a_bad_upstream_is_refused_with_its_field(api: APIClient, body: Any, path: str) -> None:
    response = api.post(
        "/api/v1/upstreams/",
        {"name": "peer", "url": "https://peer.example.com/mcp", **body},
        format="json",
    )

    assert response.status_code == 400
    assert path in {error["path"] for error in response.json()["errors"]}
    assert not Upstream.objects.exists()


def test_resources_templates_and_prompts_name_their_upstream(
    api: APIClient, main: Endpoint
) -> None:
    peer = Upstream.objects.create(name="peer", url="https://peer.example.com/mcp")
    resource = api.post(
        "/api/v1/resources/",
        {"uri": "peer://readme", "name": "readme", "upstream": "peer", "remote_uri": "up://r",
         "endpoints": ["main"]},
        format="json",
    )  # fmt: skip
    with_messages = api.post(
        "/api/v1/prompts/",
        {"name": "review", "description": "Review.", "upstream": "peer",
         "messages": [{"role": "user", "text": "Hi"}]},
        format="json",
    )  # fmt: skip
    prompt = api.post(
        "/api/v1/prompts/",
        {"name": "review", "description": "Review.", "upstream": "peer",
         "arguments": [{"name": "code", "required": True}]},
        format="json",
    )  # fmt: skip
    template = api.post(
        "/api/v1/resource-templates/",
        {"uri_template": "peer://notes/{topic}", "name": "notes", "kind": "upstream",
         "upstream": "peer", "remote_uri_template": "up://notes/{topic}"},
        format="json",
    )  # fmt: skip
    orphan = api.post(
        "/api/v1/resource-templates/",
        {"uri_template": "peer://orphan/{x}", "name": "orphan", "kind": "upstream"},
        format="json",
    )
    in_use = api.delete(f"/api/v1/upstreams/{peer.pk}/")

    assert template.status_code == 201, template.json()
    assert template.json()["remote_uri_template"] == "up://notes/{topic}"
    assert orphan.status_code == 400
    assert orphan.json()["errors"][0]["path"] == "upstream"
    assert resource.status_code == 201, resource.json()
    assert (resource.json()["upstream"], resource.json()["size"]) == ("peer", None)
    assert with_messages.status_code == 400
    assert with_messages.json()["errors"][0]["path"] == "messages"
    assert prompt.status_code == 201, prompt.json()
    assert Prompt.objects.get().upstream == peer
    assert in_use.status_code == 409
    assert "peer://readme" in in_use.json()["detail"]
    assert Upstream.objects.filter(pk=peer.pk).exists()
