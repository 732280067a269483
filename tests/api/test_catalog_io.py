"""Catalog export/import (services/catalog_io.py and the mcp_export / mcp_import commands)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.files.base import ContentFile
from django.core.management import CommandError, call_command
from pytest_django.fixtures import Settings

from mcp_app.models import Credential, Endpoint, Prompt, Resource, ResourceTemplate, Tool, Upstream
from mcp_app.services.catalog_io import (
    CatalogImportError,
    catalog_dump,
    catalog_export,
    catalog_import,
    catalog_parse,
)
from mcp_app.services.catalog_writes import (
    endpoint_create,
    prompt_create,
    resource_create,
    resource_template_create,
    tool_create,
)
from mcp_app.services.credentials import credential_create

SECRET = "s3cr3t-value-never-exported"
PNG = b"\x89PNG\r\n\x1a\n-not-really-an-image"


@pytest.fixture
def catalog(db: None, settings: Settings, tmp_path: Path) -> dict[str, Any]:
    """Two endpoints with every tool kind, text and file resources, a template and prompts."""
    settings.MEDIA_ROOT = tmp_path
    credential_create(name="github", kind="bearer", secret=SECRET)
    staff = Group.objects.create(name="staff")
    main = endpoint_create(slug="main", title="Main", instructions="Line one.\nLine two.")
    side = endpoint_create(slug="side", auth_mode="public")
    echo = tool_create(name="echo", kind="python", config={"function": "echo"}, endpoints=[main])
    echo.allowed_groups.add(staff)
    tool_create(
        name="greet",
        kind="template",
        config={"template": "Hello {{ name }}!\nBye.", "output": "text"},
        description="Greets.",
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        endpoints=[main, side],
    )
    tool_create(
        name="repos",
        kind="http",
        config={
            "method": "GET",
            "url": "https://api.example.com/users/{user}/repos",
            "credential": "github",
        },
        description="Lists repos.",
        input_schema={"type": "object", "properties": {"user": {"type": "string"}}},
        execution_mode="background",
        soft_time_limit=12.5,
        endpoints=[side],
    )
    # Tool names are unique per endpoint only: a second "echo" on the other endpoint.
    tool_create(
        name="echo",
        kind="template",
        config={"template": "{{ message }}"},
        input_schema={"type": "object", "properties": {"message": {"type": "string"}}},
        description="Echo by template.",
        endpoints=[side],
    )
    resource_create(uri="demo://readme", name="readme", text="# Read me", endpoints=[main])
    resource_create(
        uri="demo://logo",
        name="logo",
        mime_type="image/png",
        file=ContentFile(PNG, name="logo.png"),
        endpoints=[main, side],
    )
    resource_template_create(
        uri_template="demo://notes/{topic}",
        name="notes",
        kind="template",
        config={"template": "Notes on {{ topic }}"},
        completions={"topic": ["a", "b"]},
        endpoints=[main],
    )
    prompt_create(
        name="review",
        description="Review code.",
        arguments=[{"name": "code", "required": True}, {"name": "style"}],
        messages=[
            {"role": "user", "text": "Review {code}"},
            {
                "role": "user",
                "kind": "image",
                "file": ContentFile(PNG, name="diagram.png"),
                "mime_type": "image/png",
            },
            {"role": "assistant", "kind": "resource_link", "uri": "demo://readme", "name": "r"},
        ],
        endpoints=[main],
    )
    return {"main": main, "side": side}


def wipe_catalog() -> None:
    for model in (Prompt, ResourceTemplate, Resource, Tool, Endpoint, Upstream):
        model.objects.all().delete()
    Group.objects.all().delete()


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_export_import_into_empty_database_exports_the_same_file(
    catalog: dict[str, Any], fmt: str
) -> None:
    first = catalog_dump(catalog_export(), fmt=fmt)
    wipe_catalog()

    report = catalog_import(document=catalog_parse(first))

    assert report.changed
    assert catalog_dump(catalog_export(), fmt=fmt) == first
    assert {tool.kind for tool in Tool.objects.all()} == {"python", "template", "http"}


def test_export_names_rows_by_natural_key_and_credentials_by_reference(
    catalog: dict[str, Any],
) -> None:
    document = catalog_export()
    text = catalog_dump(document)

    assert SECRET not in text
    assert document["credentials"] == [{"name": "github", "kind": "bearer", "team": None}]
    assert "id" not in document["tools"][0]
    echoes = [tool for tool in document["tools"] if tool["name"] == "echo"]
    assert [tool["endpoints"] for tool in echoes] == [["main"], ["side"]]
    assert echoes[0]["allowed_groups"] == ["staff"]
    logo = next(row for row in document["resources"] if row["uri"] == "demo://logo")
    assert logo["file"]["name"] == "logo.png"


def test_export_of_chosen_endpoints_lists_only_what_they_publish(
    catalog: dict[str, Any],
) -> None:
    document = catalog_export(endpoint_slugs=["side"])

    assert document["scope"] == {"endpoints": ["side"]}
    assert [endpoint["slug"] for endpoint in document["endpoints"]] == ["side"]
    assert sorted(tool["name"] for tool in document["tools"]) == ["echo", "greet", "repos"]
    assert [row["uri"] for row in document["resources"]] == ["demo://logo"]
    assert document["prompts"] == []
    assert all(tool["endpoints"] == ["side"] for tool in document["tools"])


def test_importing_the_same_file_twice_changes_nothing(catalog: dict[str, Any]) -> None:
    document = catalog_parse(catalog_dump(catalog_export()))
    versions = dict(Endpoint.objects.values_list("slug", "catalog_version"))
    updated = dict(Tool.objects.values_list("pk", "updated_at"))

    first = catalog_import(document=document)
    second = catalog_import(document=document)

    assert first.changes == []
    assert second.changes == []
    assert dict(Endpoint.objects.values_list("slug", "catalog_version")) == versions
    assert dict(Tool.objects.values_list("pk", "updated_at")) == updated


def test_an_edit_is_applied_and_bumps_the_catalog_version_of_its_endpoints(
    catalog: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    document = catalog_export()
    greet = next(tool for tool in document["tools"] if tool["name"] == "greet")
    greet["description"] = "Greets warmly."
    before = dict(Endpoint.objects.values_list("slug", "catalog_version"))

    with django_capture_on_commit_callbacks() as callbacks:
        report = catalog_import(document=document)

    assert [str(change) for change in report.changes] == ["update tools greet (description)"]
    after = dict(Endpoint.objects.values_list("slug", "catalog_version"))
    assert after["main"] > before["main"] and after["side"] > before["side"]
    assert callbacks  # list_changed is published once the transaction commits
    assert Tool.objects.get(name="greet").description == "Greets warmly."


def test_dry_run_reports_the_diff_and_changes_nothing(catalog: dict[str, Any]) -> None:
    document = catalog_export()
    document["endpoints"][0]["title"] = "Renamed"
    document["tools"] = [tool for tool in document["tools"] if tool["name"] != "repos"]
    document["prompts"][0]["messages"][0]["text"] = "Please review {code}"
    document["prompts"][0]["endpoints"] = []

    report = catalog_import(document=document, dry_run=True, prune=True)

    assert [str(change) for change in report.changes] == [
        "update endpoints main (title)",
        "update prompts review (messages)",
        "detach prompts review: endpoints main",
        "delete tools repos",
    ]
    assert Endpoint.objects.get(slug="main").title == "Main"
    assert Tool.objects.filter(name="repos").exists()
    assert Prompt.objects.get().messages.first().text == "Review {code}"


def test_an_invalid_file_changes_nothing_and_names_entry_and_field(
    catalog: dict[str, Any],
) -> None:
    document = catalog_export()
    document["endpoints"][0]["title"] = "Changed before the bad entries"
    tools = {tool["name"] + tool["endpoints"][0]: tool for tool in document["tools"]}
    tools["echomain"]["config"] = {"function": "no_such_function"}
    tools["repossie"] = tools.pop("reposside")
    tools["repossie"]["config"]["url"] = "https://api.example.com/{owner}/{user}"
    document["resources"][0]["file"] = {"name": "x.png", "base64": "***"}
    document["prompts"][0]["messages"].append({"role": "robot", "text": "hi"})
    tools["greetmain"]["endpoints"].append("nowhere")

    with pytest.raises(CatalogImportError) as raised:
        catalog_import(document=document)

    paths = [error.path for error in raised.value.errors]
    assert "tools[0].config (echo)" in paths
    assert "tools[3].config.url (repos)" in paths
    assert "resources[0].file (demo://logo)" in paths
    assert "tools[2].endpoints (greet)" in paths
    assert Endpoint.objects.get(slug="main").title == "Main"


def test_errors_found_while_writing_roll_back_the_whole_import(
    catalog: dict[str, Any],
) -> None:
    document = catalog_export()
    document["endpoints"][0]["title"] = "Changed"
    document["prompts"][0]["messages"].append({"role": "robot", "text": "hi"})

    with pytest.raises(CatalogImportError) as raised:
        catalog_import(document=document)

    assert [error.path for error in raised.value.errors] == ["prompts[0].messages[3].role (review)"]
    assert Endpoint.objects.get(slug="main").title == "Main"
    assert Prompt.objects.get().messages.count() == 3


def test_a_missing_credential_is_an_error_not_a_guess(catalog: dict[str, Any]) -> None:
    document = catalog_export()
    document["credentials"].append({"name": "stripe", "kind": "bearer"})

    with pytest.raises(CatalogImportError) as raised:
        catalog_import(document=document)

    assert [str(error) for error in raised.value.errors] == [
        "credentials[1].name: No credential named 'stripe' here: create it (with its secret) first."
    ]


def test_a_tool_name_clash_on_one_endpoint_is_refused(catalog: dict[str, Any]) -> None:
    document = catalog_export()
    greet = next(tool for tool in document["tools"] if tool["name"] == "greet")
    greet["name"] = "repos"  # "repos" is already on "side"

    with pytest.raises(CatalogImportError) as raised:
        catalog_import(document=document)

    assert any("'repos'" in error.message for error in raised.value.errors)
    assert Tool.objects.filter(name="greet").exists()


def test_prune_of_a_partial_file_detaches_and_keeps_the_rows(catalog: dict[str, Any]) -> None:
    document = catalog_export(endpoint_slugs=["side"])
    document["tools"] = [tool for tool in document["tools"] if tool["name"] != "greet"]

    report = catalog_import(document=document, prune=True)

    assert [str(change) for change in report.changes] == ["detach tools greet: side"]
    greet = Tool.objects.get(name="greet")
    assert [endpoint.slug for endpoint in greet.endpoints.all()] == ["main"]


def test_a_python_tool_written_by_hand_takes_its_function_defaults(db: None) -> None:
    document = catalog_parse(
        "format: mcphost-catalog/1\n"
        "endpoints: [{slug: hand}]\n"
        "tools:\n"
        "- {name: adder, kind: python, config: {function: add}, endpoints: [hand]}\n"
    )

    catalog_import(document=document)

    tool = Tool.objects.get(name="adder")
    assert tool.description and tool.input_schema["properties"]
    assert [endpoint.slug for endpoint in tool.endpoints.all()] == ["hand"]


def test_commands_export_then_dry_run_import(catalog: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "catalog.yaml"
    call_command("mcp_export", "--endpoint", "main", "-o", str(path))
    path.write_text(path.read_text().replace("title: Main", "title: Main site"))
    out = io.StringIO()

    call_command("mcp_import", str(path), "--dry-run", stdout=out)

    assert out.getvalue() == "update endpoints main (title)\nWould make 1 change(s).\n"
    assert Endpoint.objects.get(slug="main").title == "Main"


def test_import_command_lists_errors_and_fails(catalog: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "catalog.json"
    call_command("mcp_export", "--format", "json", "-o", str(path))
    path.write_text(path.read_text().replace('"slug": "main"', '"slug": "Not a slug!"', 1))
    err = io.StringIO()

    with pytest.raises(CommandError, match="nothing was changed"):
        call_command("mcp_import", str(path), stderr=err)

    assert err.getvalue().startswith("endpoints[0].slug (Not a slug!): ")


@pytest.fixture
def with_peer(catalog: dict[str, Any]) -> dict[str, Any]:
    """The catalog, and another MCP server with a tool, a resource and a prompt of it."""
    side = catalog["side"]
    peer = Upstream(
        name="peer",
        url="https://peer.example.com/mcp",
        credential=Credential.objects.get(name="github"),
        call_timeout=20,
        failure_threshold=3,
        probe_interval_seconds=60,
        sync_policy=Upstream.SyncPolicy.APPLY,
        consecutive_failures=2,  # health: never exported
        probe_state=Upstream.ProbeState.OFFLINE,  # likewise
    )
    peer.full_clean()
    peer.save()
    tool_create(
        name="peer_echo",
        kind="mcp_upstream",
        config={"upstream": "peer", "tool": "echo"},
        description="The peer's echo.",
        endpoints=[side],
    )
    resource_create(
        uri="peer://readme", name="peer readme", upstream=peer, remote_uri="up://readme",
        endpoints=[side],
    )  # fmt: skip
    notes = ResourceTemplate(
        uri_template="peer://notes/{topic}", name="notes", kind="upstream", upstream=peer,
        remote_uri_template="up://notes/{topic}",
    )  # fmt: skip
    notes.full_clean()
    notes.save()
    side.resource_templates.add(notes)
    prompt_create(
        name="peer_review",
        description="The peer's review.",
        upstream=peer,
        remote_name="review",
        arguments=[{"name": "code", "required": True}],
        endpoints=[side],
    )
    return catalog


def test_upstreams_and_what_uses_them_survive_a_round_trip(with_peer: dict[str, Any]) -> None:
    first = catalog_dump(catalog_export())
    wipe_catalog()

    catalog_import(document=catalog_parse(first))

    assert catalog_dump(catalog_export()) == first
    peer = Upstream.objects.get()
    assert (peer.credential.name, peer.call_timeout, peer.consecutive_failures) == ("github", 20, 0)
    assert (peer.probe_interval_seconds, peer.probe_state) == (60, Upstream.ProbeState.UNKNOWN)
    assert peer.sync_policy == Upstream.SyncPolicy.APPLY
    assert Tool.objects.get(name="peer_echo").config == {"upstream": "peer", "tool": "echo"}
    assert Resource.objects.get(uri="peer://readme").upstream_uri == "up://readme"
    notes = ResourceTemplate.objects.get(uri_template="peer://notes/{topic}")
    assert (notes.upstream, notes.upstream_uri_template) == (peer, "up://notes/{topic}")
    assert Prompt.objects.get(name="peer_review").upstream_name == "review"
    assert not catalog_import(document=catalog_parse(first)).changed


def test_export_carries_the_upstreams_of_what_it_exports_never_their_health(
    with_peer: dict[str, Any],
) -> None:
    document = catalog_export(endpoint_slugs=["side"])

    [peer] = document["upstreams"]
    assert peer["name"] == "peer" and peer["credential"] == "github"
    assert not {"consecutive_failures", "last_error", "circuit_open_until"} & set(peer)
    assert not {"probe_state", "last_probe_at", "tools_fingerprint"} & set(peer)
    assert not {"synced_tools", "tools_gone"} & set(peer)  # sync state, not settings
    assert (peer["probe_interval_seconds"], peer["sync_policy"]) == (60, "apply")
    readme = next(row for row in document["resources"] if row["uri"] == "peer://readme")
    assert (readme["upstream"], readme["remote_uri"]) == ("peer", "up://readme")
    assert catalog_export(endpoint_slugs=["main"])["upstreams"] == []


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (lambda d: d["upstreams"][0].update(url="not a url"), "upstreams[0].url", "valid URL"),
        (
            lambda d: d["upstreams"][0].update(credential="nowhere"),
            "upstreams[0].credential",
            "No credential named 'nowhere'",
        ),
        (
            lambda d: d["upstreams"][0].update(allow_networks="not-a-network"),
            "upstreams[0].allow_networks",
            "CIDR",
        ),
        (
            lambda d: next(r for r in d["resources"] if r.get("upstream")).update(
                upstream="missing"
            ),
            "resources[",
            "No upstream named 'missing'",
        ),
        (
            lambda d: next(t for t in d["resource_templates"] if t.get("upstream")).update(
                upstream="missing"
            ),
            "resource_templates[",
            "No upstream named 'missing'",
        ),
        (
            lambda d: d.update(upstreams=[]),
            "tools[",
            "No upstream named 'peer' here",
        ),
    ],
)
def test_a_bad_upstream_entry_is_refused_and_changes_nothing(
    with_peer: dict[str, Any], change: Any, field: str, message: str
) -> None:
    document = catalog_export()
    wipe_catalog()
    change(document)

    with pytest.raises(CatalogImportError) as excinfo:
        catalog_import(document=document)

    assert any(
        str(error).startswith(field) and message in str(error) for error in excinfo.value.errors
    ), [str(error) for error in excinfo.value.errors]
    assert not Upstream.objects.exists() and not Tool.objects.exists()
