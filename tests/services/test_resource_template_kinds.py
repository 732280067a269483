"""Resource-template kinds live wholly behind their registry (MCP_RESOURCE_TEMPLATE_KINDS): a
kind defined in a test module is written by the admin, the API and catalog import, and read by
the official ``mcp`` client from a live server, without any other file naming it."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.test import Client, override_settings
from django.urls import reverse
from mcp import Client as McpClient
from rest_framework.test import APIClient

import mcp_app
from mcp_app.admin.forms import UNSTORABLE_MESSAGE
from mcp_app.checks import check_catalog_rows, check_resource_template_kinds
from mcp_app.executors.resource_kinds import DEFAULT_RESOURCE_TEMPLATE_KINDS, get_resolvers
from mcp_app.models import Endpoint, ResourceTemplate
from mcp_app.services.api_tokens import api_token_create
from mcp_app.services.catalog_io import FORMAT
from mcp_app.services.catalog_writes import (
    catalog_rows_publish,
    endpoint_create,
    resource_template_create,
)
from tests.api.conftest import CATALOG_PERMISSIONS, make_user
from tests.services.resource_kinds_sample import PATH
from tests.support.live import asgi_server, wait_until_idle

KINDS = [*DEFAULT_RESOURCE_TEMPLATE_KINDS, PATH]
WITH_SHOUT = override_settings(MCP_RESOURCE_TEMPLATE_KINDS=KINDS)
# Each interface writes its own template of kind "shout", on an endpoint of its own.
SHOUT = {"name": "shout", "mime_type": "text/plain", "kind": "shout", "config": {"suffix": "!"}}


@pytest.fixture
def api() -> APIClient:
    user = make_user("robot", CATALOG_PERMISSIONS)
    _token, key = api_token_create(user=user, name="ci")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def admin_form(**overrides: str) -> dict[str, Any]:
    return {
        "uri_template": "shout://by-admin/{word}", "name": "shout", "title": "",
        "description": "", "mime_type": "text/plain", "kind": "shout", "shout_suffix": "!",
        "upstream": "", "remote_uri_template": "", "completions": "{}", "icons": "[]",
        "enabled": "on", **overrides,
    }  # fmt: skip


async def read(base_url: str, slug: str, uri: str, mode: str) -> str:
    async with asyncio.timeout(20), McpClient(f"{base_url}/mcp/{slug}", mode=mode) as client:
        result = await client.read_resource(uri)
    return str(result.contents[0].text)


# Committed: the live server reads the rows on its own connection.
@pytest.mark.django_db(transaction=True)
@WITH_SHOUT
def test_a_kind_from_a_test_module_is_written_by_every_interface_and_read_by_a_client(
    admin_client: Client, api: APIClient
) -> None:
    by_admin, _ = (
        endpoint_create(slug=slug, auth_mode=Endpoint.AuthMode.PUBLIC)
        for slug in ("by-admin", "by-api")
    )
    added = admin_client.post(reverse("admin:mcp_app_resourcetemplate_add"), admin_form())
    catalog_rows_publish(
        [ResourceTemplate.objects.get(uri_template="shout://by-admin/{word}")],
        endpoints=[by_admin],
        actor=None,
        source=None,
    )
    posted = api.post(
        "/api/v1/resource-templates/",
        {**SHOUT, "uri_template": "shout://by-api/{word}", "endpoints": ["by-api"]},
        format="json",
    )
    document = {
        "format": FORMAT,
        "endpoints": [{"slug": "by-import", "auth_mode": "public"}],
        "resource_templates": [
            {**SHOUT, "uri_template": "shout://by-import/{word}", "endpoints": ["by-import"]}
        ],
    }
    imported = api.post("/api/v1/catalog/import/", {"document": document}, format="json")
    env = {"MCP_RESOURCE_TEMPLATE_KINDS": ",".join(KINDS)}
    with asgi_server("daphne", env) as base_url:
        texts = [
            asyncio.run(read(base_url, slug, f"shout://{slug}/hello", mode))
            for slug in ("by-admin", "by-api", "by-import")
            for mode in ("legacy", "2026-07-28")
        ]
        wait_until_idle(base_url)

    assert (added.status_code, posted.status_code, imported.status_code) == (302, 201, 200)
    assert sorted(ResourceTemplate.objects.values_list("uri_template", "kind", "config")) == [
        (f"shout://{slug}/{{word}}", "shout", {"suffix": "!"})
        for slug in ("by-admin", "by-api", "by-import")
    ]
    assert texts == ["HELLO!"] * 6


@pytest.mark.django_db
@WITH_SHOUT
def test_a_kind_from_a_test_module_has_its_config_checked_everywhere(
    admin_client: Client, api: APIClient
) -> None:
    words = 'A shout needs {"suffix": "<text>"}.'
    bad = {**SHOUT, "uri_template": "shout://bad/{word}", "config": {"suffix": ""}}

    form = admin_client.post(
        reverse("admin:mcp_app_resourcetemplate_add"), admin_form(shout_suffix="")
    )
    posted = api.post("/api/v1/resource-templates/", bad, format="json")
    imported = api.post(
        "/api/v1/catalog/import/",
        {"document": {"format": FORMAT, "resource_templates": [bad]}},
        format="json",
    )
    with pytest.raises(ValidationError) as service:
        resource_template_create(**bad)

    assert form.context["adminform"].form.errors == {
        "shout_suffix": ["Enter what follows the shouted word."]
    }
    assert [error["message"] for error in posted.json()["errors"]] == [words]
    assert [error["message"] for error in imported.json()["errors"]] == [words]
    assert service.value.message_dict == {"config": [words]}
    assert not ResourceTemplate.objects.exists()


@pytest.mark.django_db
@WITH_SHOUT
def test_a_kind_s_admin_field_refuses_what_the_database_cannot_store(
    admin_client: Client,
) -> None:
    form = admin_client.post(
        reverse("admin:mcp_app_resourcetemplate_add"), admin_form(shout_suffix="!\x00")
    )

    assert form.context["adminform"].form.errors == {"shout_suffix": [UNSTORABLE_MESSAGE]}
    assert not ResourceTemplate.objects.exists()


@pytest.mark.django_db
def test_a_kind_not_configured_is_refused(api: APIClient) -> None:
    posted = api.post(
        "/api/v1/resource-templates/",
        {**SHOUT, "uri_template": "shout://x/{word}"},
        format="json",
    )

    assert posted.status_code == 400
    assert [error["path"] for error in posted.json()["errors"]] == ["kind"]
    assert not ResourceTemplate.objects.exists()


@pytest.mark.parametrize(
    ("kinds", "words"),
    [
        (["tests.services.resource_kinds_sample.Missing"], "cannot be imported"),
        (["tests.services.resource_kinds_sample.ShoutResolverForm"], "is not a Resolver class"),
        ([PATH, PATH], "claim kind 'shout'"),
    ],
)
def test_a_bad_kind_list_is_improperly_configured(kinds: list[str], words: str) -> None:
    with (
        override_settings(MCP_RESOURCE_TEMPLATE_KINDS=kinds),
        pytest.raises(ImproperlyConfigured, match=words),
    ):
        get_resolvers()


@override_settings(MCP_RESOURCE_TEMPLATE_KINDS=[*DEFAULT_RESOURCE_TEMPLATE_KINDS, f"{PATH}Form"])
def test_check_fails_on_a_kind_list_that_does_not_load() -> None:
    (error,) = check_resource_template_kinds()

    assert error.id == "mcp_app.E040"
    assert "ShoutResolverForm is not a Resolver class" in error.msg


def test_a_template_whose_kind_went_away_is_a_warning(db: None) -> None:
    with WITH_SHOUT:
        resource_template_create(**SHOUT, uri_template="shout://gone/{word}")
        assert check_catalog_rows(databases=["default"]) == []

    (warning,) = check_catalog_rows(databases=["default"])

    assert warning.id == "mcp_app.W002"
    assert "no resolver for kind 'shout'" in warning.msg


APP = Path(mcp_app.__file__).parent
# A built-in resource-template kind named in code: the Kind member, or a kind compared with
# its value.
NAMES_A_KIND = re.compile(
    r"(ResourceTemplate|self)\.Kind\.(PYTHON|TEMPLATE|UPSTREAM)\b"
    r"|\bkind\b[^=\n]*[!=]=\s*[\"'](python|template|upstream)[\"']"
)
# Code that names a kind on purpose, as the row it creates: (file, fragment, why).
NAMES_A_KIND_ALLOWED = [
    ("services/upstream_sync.py", "kind=ResourceTemplate.Kind.UPSTREAM", "an upstream's templates"),
    ("management/commands/seed_demo.py", "kind=ResourceTemplate.Kind.TEMPLATE", "the demo's"),
]


def test_no_code_outside_the_kind_modules_branches_on_a_resource_template_kind() -> None:
    found = [
        (str(path.relative_to(APP)), line.strip())
        for path in sorted(APP.rglob("*.py"))
        if not path.is_relative_to(APP / "executors" / "resource_kinds")
        and not path.is_relative_to(APP / "migrations")
        for line in path.read_text().splitlines()
        if NAMES_A_KIND.search(line)
    ]

    assert [
        (name, line)
        for name, line in found
        if not any(
            name == where and fragment in line for where, fragment, _ in NAMES_A_KIND_ALLOWED
        )
    ] == []
