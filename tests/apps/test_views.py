"""MCP Apps views (SEP-1865): linking a tool to a ui:// view, the view's _meta.ui, and every
write path (service, admin, API, import) refusing a wrong link; history and export carry both.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from mcp_app.models import Endpoint, Resource, Tool
from mcp_app.protocol import apps
from mcp_app.protocol.catalog import ToolDef
from mcp_app.protocol.shaping import shape_tool
from mcp_app.services.catalog_io import CatalogImportError, catalog_export, catalog_import
from mcp_app.services.catalog_writes import (
    catalog_row_save,
    endpoint_create,
    resource_create,
    tool_create,
    tool_update,
)
from mcp_app.services.references import RowInUseError
from mcp_app.services.row_writes import row_delete
from mcp_app.services.snapshots import build_snapshot
from tests.admin.conftest import tool_payload
from tests.api.conftest import CATALOG_PERMISSIONS, token_client  # noqa: F401  (fixture)
from tests.apps.conftest import SAMPLE_VIEW, assert_valid

pytestmark = pytest.mark.django_db

VIEW_URI = "ui://echo/view"
UI_META = {"csp": {"connectDomains": ["https://api.example.com"]}, "prefersBorder": True}


@pytest.fixture
def main() -> Endpoint:
    return endpoint_create(slug="main", auth_mode="public")


@pytest.fixture
def view(main: Endpoint) -> Resource:
    return resource_create(
        uri=VIEW_URI,
        name="echo-view",
        mime_type=apps.MIME_TYPE,
        text=SAMPLE_VIEW,
        ui_meta=UI_META,
        endpoints=[main],
    )


def echo(main: Endpoint, **fields: object) -> Tool:
    return tool_create(
        name="echo", kind="python", config={"function": "echo"}, endpoints=[main], **fields
    )


def test_a_tool_links_a_view_and_history_records_it(main: Endpoint, view: Resource) -> None:
    tool = echo(main, ui_resource_uri=VIEW_URI)

    assert tool.history.latest().ui_resource_uri == VIEW_URI
    assert view.history.latest().ui_meta == UI_META


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("demo://readme", "An MCP Apps view has a ui:// URI."),
        ("ui://missing", "No resource 'ui://missing' here: create the view first."),
        ("ui://plain", "Resource 'ui://plain' has MIME type 'text/html'"),
    ],
)
def test_a_link_to_anything_but_a_view_is_refused(main: Endpoint, uri: str, message: str) -> None:
    resource_create(uri="ui://plain", name="plain", mime_type="text/html", text="<p>hi</p>")

    with pytest.raises(ValidationError) as raised:
        echo(main, ui_resource_uri=uri)

    assert message in raised.value.message_dict["ui_resource_uri"][0]
    assert not Tool.objects.exists()


@pytest.mark.parametrize(
    ("ui_meta", "message"),
    [
        ({"csp": {"scriptDomains": ["https://x.example"]}}, "Unknown csp key 'scriptDomains'"),
        ({"csp": {"connectDomains": ["https://x.example; script-src *"]}}, "list of origins"),
        ({"permissions": {"usb": {}}}, "Unknown permission 'usb'"),
        ({"border": True}, "Unknown key 'border'"),
        ({"prefersBorder": "yes"}, '"prefersBorder" must be true or false.'),
    ],
)
def test_bad_view_metadata_is_refused(ui_meta: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        resource_create(
            uri=VIEW_URI, name="v", mime_type=apps.MIME_TYPE, text="<p>x</p>", ui_meta=ui_meta
        )

    assert any(message in text for text in raised.value.message_dict["ui_meta"])
    assert not Resource.objects.exists()


def test_a_linked_view_keeps_its_uri_and_type(main: Endpoint, view: Resource) -> None:
    echo(main, ui_resource_uri=VIEW_URI)

    view.mime_type = "text/html"
    view.ui_meta = {}
    with pytest.raises(ValidationError) as raised:
        catalog_row_save(view, actor=None, source=None)
    assert "Tools link this view (echo)" in raised.value.message_dict["mime_type"][0]

    view.refresh_from_db()
    view.uri = "ui://echo/moved"
    with pytest.raises(ValidationError) as raised:
        catalog_row_save(view, actor=None, source=None)
    assert "Tools link this view (echo)" in raised.value.message_dict["uri"][0]


def test_tools_list_links_the_view_only_for_clients_that_render_views() -> None:
    tool = ToolDef(
        name="echo",
        description="Echoes.",
        input_schema={"type": "object"},
        meta={"ui": {"visibility": ["model", "app"]}},
        view_uri=VIEW_URI,
    )

    for version in ("2025-11-25", "2026-07-28"):
        linked = shape_tool(tool, version, views=True)["_meta"]["ui"]
        assert linked == {"visibility": ["model", "app"], "resourceUri": VIEW_URI}
        assert_valid("McpUiToolMeta", linked)
        assert shape_tool(tool, version)["_meta"] == {"ui": {"visibility": ["model", "app"]}}


def test_the_client_capability_is_read_as_the_extension_defines_it() -> None:
    declared = {"mimeTypes": [apps.MIME_TYPE]}
    assert_valid("McpUiClientCapabilities", declared)

    assert apps.client_renders_apps({"extensions": {apps.EXTENSION: declared}})
    assert not apps.client_renders_apps({"extensions": {apps.EXTENSION: {"mimeTypes": []}}})
    assert not apps.client_renders_apps({"extensions": {}})
    assert not apps.client_renders_apps({})


def test_the_csp_allows_only_what_the_view_declares() -> None:
    assert apps.content_security_policy({}) == (
        "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' "
        "'unsafe-inline'; img-src 'self' data:; font-src 'self'; media-src 'self' data:; "
        "connect-src 'none'; frame-src 'none'; object-src 'none'; base-uri 'self'"
    )
    policy = apps.content_security_policy(
        {
            "csp": {
                "connectDomains": ["https://api.example.com"],
                "resourceDomains": ["https://cdn.example.com"],
            }
        }
    )
    assert "connect-src https://api.example.com;" in policy
    assert "script-src 'self' 'unsafe-inline' https://cdn.example.com;" in policy
    assert apps.permission_allow({"permissions": {"camera": {}, "clipboardWrite": {}}}) == (
        "camera; clipboard-write"
    )
    assert_valid("McpUiResourceMeta", UI_META)


def test_the_admin_refuses_a_wrong_link_and_saves_nothing(
    admin_client: Client, main: Endpoint
) -> None:
    resource_create(uri="ui://plain", name="plain", mime_type="text/html", text="<p>hi</p>")

    response = admin_client.post(
        reverse("admin:mcp_app_tool_add"), tool_payload(ui_resource_uri="ui://plain")
    )

    assert response.status_code == 200
    assert "not &#x27;text/html;profile=mcp-app&#x27;" in response.content.decode()
    assert not Tool.objects.exists()


def test_the_admin_edits_view_metadata_as_json(admin_client: Client) -> None:
    payload = {
        "uri": VIEW_URI,
        "name": "echo-view",
        "title": "",
        "description": "",
        "mime_type": apps.MIME_TYPE,
        "enabled": "on",
        "text": SAMPLE_VIEW,
        "icons": "[]",
        "ui_meta": '{"csp": {"connectDomains": ["https://api.example.com"]}, "border": 1}',
    }
    refused = admin_client.post(reverse("admin:mcp_app_resource_add"), payload)
    assert refused.status_code == 200
    assert "Unknown key &#x27;border&#x27;" in refused.content.decode()
    assert not Resource.objects.exists()

    page = admin_client.get(reverse("admin:mcp_app_resource_add")).content.decode()
    assert f'<option value="{apps.MIME_TYPE}">' in page

    payload["ui_meta"] = '{"csp": {"connectDomains": ["https://api.example.com"]}}'
    assert admin_client.post(reverse("admin:mcp_app_resource_add"), payload).status_code == 302
    assert Resource.objects.get().ui_meta == {
        "csp": {"connectDomains": ["https://api.example.com"]}
    }


def test_the_api_refuses_a_wrong_link_and_carries_a_good_one(
    token_client: Callable[..., APIClient],  # noqa: F811
    main: Endpoint,
    view: Resource,
) -> None:
    api = token_client(*CATALOG_PERMISSIONS)
    tool = {"name": "echo", "kind": "python", "config": {"function": "echo"}}

    refused = api.post("/api/v1/tools/", {**tool, "ui_resource_uri": "ui://missing"})
    created = api.post("/api/v1/tools/", {**tool, "ui_resource_uri": VIEW_URI})

    assert refused.status_code == 400
    assert "create the view first" in str(refused.json())
    assert created.status_code == 201
    assert created.json()["ui_resource_uri"] == VIEW_URI
    read = api.get(f"/api/v1/resources/{view.pk}/").json()
    assert read["ui_meta"] == UI_META


def test_export_and_import_carry_the_link_and_the_view(main: Endpoint, view: Resource) -> None:
    echo(main, ui_resource_uri=VIEW_URI)
    document = catalog_export()
    (tool_entry,) = document["tools"]
    (resource_entry,) = document["resources"]
    assert tool_entry["ui_resource_uri"] == VIEW_URI
    assert resource_entry["ui_meta"] == UI_META

    Tool.objects.all().delete()
    Resource.objects.all().delete()
    # The tool is planned before the view it links, which the same document creates.
    catalog_import(document=document)

    assert Tool.objects.get().ui_resource_uri == VIEW_URI
    assert Resource.objects.get().ui_meta == UI_META
    assert not catalog_import(document=document).changed


def test_an_import_linking_no_view_is_refused(main: Endpoint) -> None:
    echo(main)
    document = catalog_export()
    document["tools"][0]["ui_resource_uri"] = "ui://missing"

    with pytest.raises(CatalogImportError) as raised:
        catalog_import(document=document)

    assert "tools[0].ui_resource_uri (echo)" in str(raised.value)
    assert Tool.objects.get().ui_resource_uri == ""


def test_unlinking_is_recorded(main: Endpoint, view: Resource) -> None:
    tool = echo(main, ui_resource_uri=VIEW_URI)

    tool_update(tool=tool, data={"ui_resource_uri": ""})

    assert [row.ui_resource_uri for row in tool.history.order_by("history_id")] == [VIEW_URI, ""]


def test_a_view_the_endpoint_does_not_publish_is_not_linked(main: Endpoint, view: Resource) -> None:
    other = endpoint_create(slug="other", auth_mode="public")
    tool = echo(main, ui_resource_uri=VIEW_URI)
    tool.endpoints.add(other)

    assert build_snapshot(main).tools[0].view_uri == VIEW_URI
    assert build_snapshot(other).tools[0].view_uri == ""


LINKED = "The resource 'ui://echo/view' is still used by: tool 'echo' (links it as its view)."


def test_a_linked_view_cannot_be_deleted_by_any_interface(
    admin_client: Client,
    token_client: Callable[..., APIClient],  # noqa: F811
    main: Endpoint,
    view: Resource,
) -> None:
    """Deleting a view tools link would leave them showing none: the service, the admin's
    delete page and "delete selected", the API and an import's prune refuse it, naming the
    tools, and nothing is deleted."""
    echo(main, ui_resource_uri=VIEW_URI)

    with pytest.raises(RowInUseError) as raised:
        row_delete(view, actor=None, source=None)
    page = admin_client.post(
        reverse("admin:mcp_app_resource_delete", args=[view.pk]), {"post": "yes"}
    )
    selected = admin_client.post(
        reverse("admin:mcp_app_resource_changelist"),
        {"action": "delete_selected", "_selected_action": [view.pk], "post": "yes"},
    )
    api = token_client(*CATALOG_PERMISSIONS).delete(f"/api/v1/resources/{view.pk}/")
    document = catalog_export()
    document["resources"] = []
    with pytest.raises(CatalogImportError) as pruned:
        catalog_import(document=document, prune=True)

    assert str(raised.value).startswith(LINKED)
    assert "echo" in page.content.decode() and "echo" in selected.content.decode()
    assert api.status_code == 409 and LINKED in str(api.json())
    assert LINKED in str(pruned.value)
    assert Resource.objects.filter(pk=view.pk).exists()


def test_a_prune_of_a_view_and_the_tools_linking_it_deletes_both(
    main: Endpoint, view: Resource
) -> None:
    echo(main, ui_resource_uri=VIEW_URI)
    document = catalog_export()
    document["resources"] = document["tools"] = []

    catalog_import(document=document, prune=True)

    assert not Tool.objects.exists() and not Resource.objects.exists()


def test_an_upstream_tools_own_view_link_goes_out_as_ours(main: Endpoint) -> None:
    """A tool synced from an upstream keeps the upstream's ``_meta.ui.resourceUri``: it goes
    only to clients that render views, and only while this endpoint publishes the view."""
    upstream_meta = {"ui": {"resourceUri": VIEW_URI, "visibility": ["model", "app"]}}
    echo(main, meta=upstream_meta)

    def shaped(views: bool) -> object:
        return shape_tool(build_snapshot(main).tools[0], "2026-07-28", views=views)["_meta"]

    unpublished = shaped(True)
    resource_create(uri=VIEW_URI, name="echo-view", mime_type=apps.MIME_TYPE,
                    text=SAMPLE_VIEW, endpoints=[main])  # fmt: skip

    assert unpublished == {"ui": {"visibility": ["model", "app"]}}
    assert shaped(False) == {"ui": {"visibility": ["model", "app"]}}
    assert shaped(True) == upstream_meta
    echo_flat = Tool.objects.get(name="echo")
    tool_update(tool=echo_flat, data={"meta": {"ui/resourceUri": VIEW_URI}})
    assert "_meta" not in shape_tool(build_snapshot(main).tools[0], "2026-07-28")
    assert shaped(True) == {"ui": {"resourceUri": VIEW_URI}}
