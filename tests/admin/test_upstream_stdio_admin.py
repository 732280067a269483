"""Registering a stdio upstream in the admin: only what the administrator's allow-list offers.

The allow-list (``MCP_STDIO_SERVERS``) names the programs; an operator picks one and may add
only the arguments, working directory and credential variables it offers. Each refusal names
the field and what is allowed, and creates nothing; arguments are stored as given, shell
metacharacters and all (no shell ever sees them: tests/e2e/test_upstream_stdio.py shows them
reaching the program verbatim).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from pytest_django.fixtures import Settings

from mcp_app.models import Upstream
from mcp_app.services.credentials import credential_create
from tests.support.admin_forms import upstream_form

pytestmark = pytest.mark.django_db
ALLOWED = {
    "files": {
        "command": ["npx", "-y", "@modelcontextprotocol/server-filesystem"],
        "args": ["/srv/data", "--mode=*"],
        "credential_env": ["API_TOKEN"],
        "cwd_allowed": ["/srv"],
    },
    "everything": {"command": ["node", "/opt/everything/dist/index.js", "stdio"]},
}


@pytest.fixture(autouse=True)
def _allow_list(settings: Settings) -> None:
    settings.MCP_STDIO_SERVERS = json.dumps(ALLOWED)


def form(**overrides: Any) -> dict[str, Any]:
    """The add form of the stdio upstream "files"."""
    stdio = {"name": "files", "transport": "stdio", "url": "", "stdio_server": "files"}
    return upstream_form(**{**stdio, **overrides})


def add(admin_client: Client, **overrides: Any) -> dict[str, list[str]]:
    """Post the add form; return its errors by field (empty: it was saved)."""
    response = admin_client.post(reverse("admin:mcp_app_upstream_add"), form(**overrides))
    if response.status_code == 302:
        return {}
    assert response.status_code == 200
    return {
        name: list(errors) for name, errors in response.context["adminform"].form.errors.items()
    }


def test_an_allowed_server_with_allowed_extras_is_saved_verbatim(admin_client: Client) -> None:
    credential_create(name="files-token", kind="bearer", secret="s3cret")
    args = ["/srv/data", "--mode=a b;$(rm -rf /)|`x`"]
    errors = add(
        admin_client,
        stdio_args=json.dumps(args),
        stdio_cwd="/srv",
        stdio_env=json.dumps({"API_TOKEN": "files-token"}),
    )
    assert errors == {}
    upstream = Upstream.objects.get(name="files")
    assert upstream.transport == Upstream.Transport.STDIO
    assert upstream.stdio_args == args
    assert upstream.stdio_env == {"API_TOKEN": "files-token"}


def test_an_unknown_server_is_refused_naming_the_allowed_ones(admin_client: Client) -> None:
    errors = add(admin_client, stdio_server="bash")
    assert errors == {
        "stdio_server": ["'bash' is not an allowed stdio server (allowed: everything, files)."]
    }
    assert not Upstream.objects.exists()


@pytest.mark.parametrize(
    ("overrides", "field", "says"),
    [
        (
            {"stdio_args": '["--mode=x", "/etc"]'},
            "stdio_args",
            "The argument '/etc' is not allowed",
        ),
        ({"stdio_args": '["--mode"]'}, "stdio_args", "The argument '--mode' is not allowed"),
        ({"stdio_args": '"--mode=x"'}, "stdio_args", "A JSON list of strings."),
        ({"stdio_cwd": "/"}, "stdio_cwd", "The working directory '/' is not allowed"),
        ({"stdio_env": '{"PATH": "files-token"}'}, "stdio_env", "The variable 'PATH' is not one"),
        ({"stdio_env": '{"API_TOKEN": "nope"}'}, "stdio_env", "No credential named 'nope'."),
        ({"url": "https://example.com/mcp"}, "url", "A stdio upstream has no URL"),
    ],
)
def test_what_the_allow_list_does_not_offer_is_refused(
    admin_client: Client, overrides: dict[str, str], field: str, says: str
) -> None:
    credential_create(name="files-token", kind="bearer", secret="s3cret")
    errors = add(admin_client, **overrides)
    assert list(errors) == [field]
    assert errors[field][0].startswith(says), errors
    assert not Upstream.objects.exists()


def test_a_credential_header_is_refused_for_a_stdio_upstream(admin_client: Client) -> None:
    credential = credential_create(name="files-token", kind="bearer", secret="s3cret")
    errors = add(admin_client, credential=str(credential.pk))
    assert list(errors) == ["credential"]
    assert "as environment variables" in errors["credential"][0]


def test_nothing_is_allowed_without_an_allow_list(admin_client: Client, settings: Settings) -> None:
    settings.MCP_STDIO_SERVERS = ""
    errors = add(admin_client)
    assert errors == {
        "stdio_server": [
            "'files' is not an allowed stdio server (allowed: none: MCP_STDIO_SERVERS is empty)."
        ]
    }


def test_an_invalid_allow_list_is_reported_not_applied(
    admin_client: Client, settings: Settings
) -> None:
    settings.MCP_STDIO_SERVERS = json.dumps({"files": {"command": "npx server"}})
    errors = add(admin_client)
    assert errors == {
        "stdio_server": ["MCP_STDIO_SERVERS['files'].command must be a list of strings."]
    }


def test_an_http_upstream_still_needs_its_url(admin_client: Client) -> None:
    errors = add(admin_client, transport="http", stdio_server="")
    assert errors == {"url": ["A Streamable HTTP upstream needs its URL."]}
