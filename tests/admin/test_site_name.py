"""One product name and links between the admin, the call log and the API docs (issue #28):
the admin said "Django administration" while the staff pages said "MCP host" and the API docs
"mcphost management API", and no page linked to /api/docs/."""

from __future__ import annotations

import re

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

NAME = "mcphost"


def title(page: str) -> str:
    found = re.search(r"<title>(.*?)</title>", page, re.S)
    assert found is not None
    return found.group(1).strip()


def links(page: str) -> set[str]:
    return set(re.findall(r'href="([^"]+)"', page))


def test_the_admin_says_the_products_name_and_links_the_call_log_and_api_docs(
    admin_client: Client,
) -> None:
    page = admin_client.get("/admin/").content.decode()
    assert "Django administration" not in page and "Django site admin" not in page
    assert title(page) == f"Administration | {NAME}"
    assert re.search(rf'<div id="site-name"><a href="/admin/">{NAME}</a></div>', page)
    assert {"/audit/", "/api/docs/"} <= links(page)


@pytest.mark.parametrize("path", ["/endpoints/", "/audit/"])
def test_the_staff_pages_say_the_same_name_and_link_the_admin_and_api_docs(
    admin_client: Client, path: str
) -> None:
    page = admin_client.get(path).content.decode()
    assert title(page).endswith(f" · {NAME}")
    assert re.search(rf'<a class="site-name" href="[^"]+">{NAME}</a>', page)
    assert {"/admin/", "/audit/", "/api/docs/"} <= links(page)


def test_the_api_docs_say_the_same_name_and_link_back(client: Client, admin_client: Client) -> None:
    page = admin_client.get("/api/docs/").content.decode()
    assert title(page) == f"{NAME} management API"
    assert {"/admin/", "/audit/", "/endpoints/"} <= links(page)
    # Open to all, with the links every visitor may follow (the call log needs its permission).
    public = client.get("/api/docs/").content.decode()
    assert {"/admin/", "/endpoints/", "/api/docs/"} <= links(public)
    assert "/audit/" not in links(public)
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert schema["info"]["title"] == f"{NAME} management API"
