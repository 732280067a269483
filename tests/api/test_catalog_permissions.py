"""Who may export and import the catalog: the API's catalog/ and endpoint export actions, and
the endpoint admin's export actions, against model permissions (services/catalog_io.py,
``catalog_permissions``).

Every route is tried by users lacking exactly one of the permissions it needs: each is refused
with a 403 naming that permission and changes nothing; with all of them it goes through.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from mcp_app.models import Endpoint, ResourceTemplate, Upstream
from mcp_app.services.catalog_io import (
    catalog_dump,
    catalog_export,
    catalog_parse,
    catalog_with_end,
)
from mcp_app.services.catalog_writes import (
    endpoint_create,
    prompt_create,
    resource_create,
    tool_create,
)
from mcp_app.services.credentials import credential_create
from tests.api.conftest import make_user

pytestmark = pytest.mark.django_db

VIEW_ALL = [
    "mcp_app.view_credential",
    "mcp_app.view_endpoint",
    "mcp_app.view_policy",
    "mcp_app.view_prompt",
    "mcp_app.view_ratelimit",
    "mcp_app.view_resource",
    "mcp_app.view_resourcetemplate",
    "mcp_app.view_tool",
    "mcp_app.view_upstream",
]
# The import below: a tool's description and groups change (one group is new) and an upstream
# is added. Every section lists entries, credentials among them.
IMPORT_NEEDS = [*VIEW_ALL, "auth.add_group", "mcp_app.add_upstream", "mcp_app.change_tool"]
# With prune, the resource and the upstream "peer" the file leaves out are deleted too.
PRUNE_NEEDS = [*IMPORT_NEEDS, "mcp_app.delete_resource", "mcp_app.delete_upstream"]


@pytest.fixture
def catalog(db: None) -> Endpoint:
    """One row of every model a document holds, the tool allowed to a group."""
    credential_create(name="github", kind="bearer", secret="never-exported")
    peer = Upstream(name="peer", url="https://peer.example.com/mcp")
    peer.full_clean()
    peer.save()
    main = endpoint_create(slug="main", auth_mode="public")
    echo = tool_create(name="echo", kind="python", config={"function": "echo"}, endpoints=[main])
    echo.allowed_groups.add(Group.objects.create(name="staff"))
    resource_create(uri="demo://readme", name="readme", text="# Read me", endpoints=[main])
    notes = ResourceTemplate(
        uri_template="demo://notes/{topic}", name="notes", kind="template",
        config={"template": "Notes on {{ topic }}"},
    )  # fmt: skip
    notes.full_clean()
    notes.save()
    main.resource_templates.add(notes)
    prompt_create(
        name="review", description="Review.", messages=[{"role": "user", "text": "Review"}],
        endpoints=[main],
    )  # fmt: skip
    return main


def edited(*, prune: bool = False) -> dict[str, Any]:
    """The exported catalog with the changes IMPORT_NEEDS (PRUNE_NEEDS) describes."""
    document = copy.deepcopy(catalog_export())
    tool = document["tools"][0]
    tool["description"] = "Changed."
    tool["allowed_groups"] = ["newcomers", "staff"]
    document["upstreams"].append(
        {**document["upstreams"][0], "name": "peer2", "url": "https://peer2.example.com/mcp"}
    )
    if prune:
        document["resources"] = []
        document["upstreams"] = document["upstreams"][1:]
    return document


def state() -> tuple[str, list[str]]:
    """What an import could change: the catalog as exported, and the groups."""
    return catalog_dump(catalog_export()), sorted(Group.objects.values_list("name", flat=True))


def denied(permission: str, what: str) -> str:
    return f"{what} needs permissions you do not have: {permission}."


def post_import(client: APIClient, variant: str) -> Any:
    document = edited(prune=variant == "prune")
    if variant == "file":
        file = SimpleUploadedFile("catalog.yaml", catalog_dump(document).encode())
        return client.post("/api/v1/catalog/import/", {"file": file}, format="multipart")
    return client.post(
        "/api/v1/catalog/import/",
        {"document": document, "dry_run": variant == "dry_run", "prune": variant == "prune"},
        format="json",
    )


IMPORT_CASES = [
    (variant, missing)
    for variant, needs in (
        ("json", IMPORT_NEEDS),
        ("file", IMPORT_NEEDS),
        ("dry_run", IMPORT_NEEDS),  # a dry run needs what the import would
        ("prune", PRUNE_NEEDS),
    )
    for missing in needs
]


@pytest.mark.parametrize(("variant", "missing"), IMPORT_CASES)
def test_an_import_lacking_one_permission_is_refused_naming_it_and_changes_nothing(
    catalog: Endpoint, token_client: Callable[..., APIClient], variant: str, missing: str
) -> None:
    needs = PRUNE_NEEDS if variant == "prune" else IMPORT_NEEDS
    client = token_client(*(name for name in needs if name != missing))
    before = state()

    response = post_import(client, variant)

    assert response.status_code == 403, response.content
    assert response.json()["detail"] == denied(missing, "Importing this document")
    assert state() == before


@pytest.mark.parametrize("variant", ["json", "file", "dry_run", "prune"])
def test_an_import_with_exactly_the_permissions_it_needs_goes_through(
    catalog: Endpoint, token_client: Callable[..., APIClient], variant: str
) -> None:
    client = token_client(*(PRUNE_NEEDS if variant == "prune" else IMPORT_NEEDS))
    before = state()

    response = post_import(client, variant)

    assert response.status_code == 200, response.content
    if variant == "dry_run":
        assert response.json()["changes"] and state() == before
        return
    assert set(Group.objects.values_list("name", flat=True)) == {"staff", "newcomers"}
    upstreams = set(Upstream.objects.values_list("name", flat=True))
    assert upstreams == ({"peer2"} if variant == "prune" else {"peer", "peer2"})


def test_import_rights_on_the_five_item_models_do_not_reach_upstreams_or_groups(
    catalog: Endpoint, token_client: Callable[..., APIClient]
) -> None:
    # The user: every right on endpoints, tools, resources, templates and prompts
    # (what import used to ask for), and may see upstreams and credentials, no more.
    client = token_client(
        *(
            f"mcp_app.{action}_{model}"
            for model in ("endpoint", "tool", "resource", "resourcetemplate", "prompt")
            for action in ("view", "add", "change", "delete")
        ),
        "mcp_app.view_upstream",
        "mcp_app.view_credential",
        # The endpoint's limits and policies are compared too (none here: nothing to write).
        "mcp_app.view_ratelimit",
        "mcp_app.view_policy",
    )
    before = state()

    response = post_import(client, "prune")

    assert response.status_code == 403
    assert response.json()["detail"] == denied(
        "auth.add_group, mcp_app.add_upstream, mcp_app.delete_upstream", "Importing this document"
    )
    assert client.post("/api/v1/upstreams/", {"name": "x"}).status_code == 403
    assert state() == before


def test_a_user_without_rights_learns_nothing_from_an_invalid_document(
    catalog: Endpoint, token_client: Callable[..., APIClient]
) -> None:
    # The document's own part of the rule is checked before it is compared with the catalog,
    # so errors (which name rows here) are not a way to probe it.
    document = edited()
    document["tools"][0]["config"] = {"function": "nope"}

    response = token_client().post(
        "/api/v1/catalog/import/", {"document": document, "dry_run": True}, format="json"
    )

    assert response.status_code == 403
    assert response.json()["detail"] == denied(", ".join(VIEW_ALL), "Importing this document")


def test_a_document_of_chosen_endpoints_pruned_needs_change_on_what_it_detaches(
    catalog: Endpoint, token_client: Callable[..., APIClient]
) -> None:
    document = catalog_export(endpoint_slugs=["main"])
    document["prompts"] = []
    needs = [
        "mcp_app.change_prompt",
        "mcp_app.view_endpoint",
        "mcp_app.view_policy",
        "mcp_app.view_prompt",
        "mcp_app.view_ratelimit",
        "mcp_app.view_resource",
        "mcp_app.view_resourcetemplate",
        "mcp_app.view_tool",
    ]
    body = {"document": document, "prune": True}

    refused = token_client(*needs[1:]).post("/api/v1/catalog/import/", body, format="json")
    applied = token_client(*needs, username="full").post(
        "/api/v1/catalog/import/", body, format="json"
    )

    assert refused.status_code == 403
    assert refused.json()["detail"] == denied("mcp_app.change_prompt", "Importing this document")
    assert applied.status_code == 200, applied.content
    assert applied.json()["changes"] == [
        {"action": "detach", "section": "prompts", "key": "review", "fields": [],
         "detail": "main"},
    ]  # fmt: skip


def test_naming_an_upstream_or_a_credential_needs_view_on_it(
    catalog: Endpoint, token_client: Callable[..., APIClient]
) -> None:
    # The import answers whether a named upstream or credential exists: naming one reads it.
    body = {
        "document": {
            "format": "mcphost-catalog/1",
            "tools": [
                {"name": "peer_echo", "kind": "mcp_upstream", "description": "Echo.",
                 "config": {"upstream": "peer", "tool": "echo"}},
                {"name": "repos", "kind": "http", "description": "Repos.",
                 "config": {"method": "GET", "url": "https://api.example.com/repos",
                            "credential": "github"}},
            ],
        },
        "dry_run": True,
    }  # fmt: skip
    needs = ["mcp_app.add_tool", "mcp_app.view_tool"]

    refused = token_client(*needs).post("/api/v1/catalog/import/", body, format="json")
    allowed = token_client(
        *needs, "mcp_app.view_upstream", "mcp_app.view_credential", username="full"
    ).post("/api/v1/catalog/import/", body, format="json")

    assert refused.status_code == 403
    assert refused.json()["detail"] == denied(
        "mcp_app.view_credential, mcp_app.view_upstream", "Importing this document"
    )
    assert allowed.status_code == 200, allowed.content
    assert [change["key"] for change in allowed.json()["changes"]] == ["peer_echo", "repos"]


# ---------------------------------------------------------------------------------- export


@pytest.mark.parametrize("missing", VIEW_ALL)
def test_an_export_lacking_one_view_permission_is_refused_naming_it(
    catalog: Endpoint, token_client: Callable[..., APIClient], missing: str
) -> None:
    client = token_client(*(name for name in VIEW_ALL if name != missing))

    whole = client.get("/api/v1/catalog/export/")
    chosen = client.get("/api/v1/catalog/export/", {"endpoint": "main"})
    one = client.get(f"/api/v1/endpoints/{catalog.pk}/export/")

    assert [whole.status_code, chosen.status_code, one.status_code] == [403, 403, 403]
    assert whole.json()["detail"] == denied(missing, "Exporting the catalog")
    assert chosen.json()["detail"] == denied(missing, "Exporting the catalog")
    if missing != "mcp_app.view_endpoint":  # otherwise the endpoint itself is not readable
        assert one.json()["detail"] == denied(missing, "Exporting the catalog")


def test_an_export_with_every_view_permission_is_the_whole_file(
    catalog: Endpoint, token_client: Callable[..., APIClient]
) -> None:
    client = token_client(*VIEW_ALL)

    whole = client.get("/api/v1/catalog/export/")
    one = client.get(f"/api/v1/endpoints/{catalog.pk}/export/")

    assert whole.status_code == 200 and one.status_code == 200
    assert whole.getvalue().decode() == catalog_dump(catalog_with_end(catalog_export()))
    one_file = catalog_with_end(catalog_export(endpoint_slugs=["main"]))
    assert one.getvalue().decode() == catalog_dump(one_file)


def test_view_endpoint_alone_exports_nothing(
    catalog: Endpoint, token_client: Callable[..., APIClient]
) -> None:
    # The user: refused the tools list, it was given every tool through export.
    client = token_client("mcp_app.view_endpoint")

    tools = client.get("/api/v1/tools/")
    exported = client.get("/api/v1/catalog/export/")

    assert tools.status_code == 403 and exported.status_code == 403
    assert b"echo" not in exported.content and b"peer" not in exported.content


def admin_export(permissions: list[str], fmt: str = "yaml") -> Any:
    user = make_user("operator", permissions)
    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    return client.post(
        reverse("admin:mcp_app_endpoint_changelist"),
        {"action": f"export_{fmt}", "_selected_action": [Endpoint.objects.get().pk]},
        follow=True,
    )


@pytest.mark.parametrize("fmt", ["yaml", "json"])
@pytest.mark.parametrize("missing", [name for name in VIEW_ALL if name != "mcp_app.view_endpoint"])
def test_the_admin_export_action_lacking_one_view_permission_is_refused_naming_it(
    catalog: Endpoint, missing: str, fmt: str
) -> None:
    # Without view_endpoint the list itself, and so the action, is out of reach.
    response = admin_export([name for name in VIEW_ALL if name != missing], fmt)

    assert response.status_code == 200  # back on the changelist
    assert "Content-Disposition" not in response
    assert [str(message) for message in response.context["messages"]] == [
        denied(missing, "Exporting the catalog")
    ]


def test_the_admin_export_action_with_every_view_permission_downloads_the_file(
    catalog: Endpoint,
) -> None:
    response = admin_export(VIEW_ALL)

    assert response["Content-Disposition"] == 'attachment; filename="main.yaml"'
    assert catalog_parse(response.getvalue()) == catalog_export(endpoint_slugs=["main"])
