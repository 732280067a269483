"""The admin and the staff pages as one site: "View site", the icon, links both ways."""

from __future__ import annotations

import pytest
from django.contrib.staticfiles import finders
from django.test import Client
from django.urls import reverse

from mcp_app.models import Endpoint
from mcp_app.services.catalog_writes import tool_create

pytestmark = pytest.mark.django_db


def test_view_site_and_favicon_lead_somewhere(admin_client: Client) -> None:
    admin_page = admin_client.get(reverse("admin:index")).content.decode()

    assert admin_client.get("/", follow=True).status_code == 200
    assert admin_client.get("/").url == reverse("mcp_app:endpoint_index")
    icon = admin_client.get("/favicon.ico")
    assert icon.status_code == 301
    assert icon.url == "/static/mcp_app/favicon.svg" and finders.find("mcp_app/favicon.svg")
    assert 'rel="icon" href="/static/mcp_app/favicon.svg"' in admin_page
    staff_page = admin_client.get(reverse("mcp_app:endpoint_index")).content.decode()
    assert 'rel="icon" href="/static/mcp_app/favicon.svg"' in staff_page


def test_admin_links_to_the_call_log_and_a_tool_to_its_calls(
    admin_client: Client, endpoint: Endpoint
) -> None:
    tool = tool_create(name="echo", kind="python", config={"function": "echo"})

    index = admin_client.get(reverse("admin:index")).content.decode()
    tool_page = admin_client.get(reverse("admin:mcp_app_tool_change", args=[tool.pk]))
    endpoint_page = admin_client.get(reverse("admin:mcp_app_endpoint_change", args=[endpoint.pk]))

    assert f'href="{reverse("mcp_app:audit_list")}">Call log</a>' in index
    assert (
        f'href="{reverse("mcp_app:audit_list")}?tool=echo">Calls</a>' in tool_page.content.decode()
    )
    assert (
        f'href="{reverse("mcp_app:audit_list")}?endpoint=test">Calls</a>'
        in endpoint_page.content.decode()
    )
