"""Hostile values in the admin's forms: a clear form error, never a 500, nothing saved.

The values the API refuses (docs/api.md, Limits): NUL characters and unpaired surrogates in
any field, JSON nested past the bound.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from mcp_app.models import Credential, Endpoint, ResourceTemplate, Tool
from mcp_app.services.catalog_writes import endpoint_create
from tests.admin.conftest import tool_payload

pytestmark = pytest.mark.django_db

NUL = "\x00"


def nested(depth: int) -> str:
    """JSON text of ``depth`` objects nested in one another."""
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def deep_schema(wraps: int) -> str:
    return '{"type": "object", "properties": {"x": ' * wraps + '{"type": "object"}' + "}}" * wraps


def form_errors(response: Any) -> dict[str, list[str]]:
    assert response.status_code == 200, response.status_code
    form = response.context["adminform"].form
    return {name: [str(message) for message in messages] for name, messages in form.errors.items()}


TOOL_CASES = {
    "NUL in the name": ("name", f"gr{NUL}eet"),
    "NUL in the description": ("description", f"Greets{NUL}."),
    "NUL in the template": ("template", f"Hello {NUL}{{{{ name }}}}"),
    "NUL escaped in the input schema": (
        "input_schema",
        '{"type": "object", "description": "a\\u0000b"}',
    ),
    "NUL escaped in a member name": ("meta", '{"a\\u0000": 1}'),
    "a lone surrogate in the input schema": (
        "input_schema",
        '{"type": "object", "description": "\\ud800"}',
    ),
    "100 levels of input schema": ("input_schema", deep_schema(50)),
    "10,000 levels of input schema": ("input_schema", nested(10_000)),
    "10,000 levels of arrays in the output schema": ("output_schema", "[" * 10_000 + "]" * 10_000),
    "10,000 levels of meta": ("meta", nested(10_000)),
    "NUL in a choice": ("kind", f"template{NUL}"),
}


@pytest.mark.parametrize("case", TOOL_CASES, ids=list(TOOL_CASES))
def test_a_hostile_tool_form_value_is_a_form_error(admin_client: Client, case: str) -> None:
    field, value = TOOL_CASES[case]

    response = admin_client.post(reverse("admin:mcp_app_tool_add"), tool_payload(**{field: value}))

    errors = form_errors(response)
    assert field in errors, errors
    assert not Tool.objects.exists()


def test_a_schema_within_the_bound_is_saved(admin_client: Client) -> None:
    # 31 "properties"/"x" wraps nest 63 levels: the API's bound for a field's value. The
    # template names no variable: the deep schema declares none.
    response = admin_client.post(
        reverse("admin:mcp_app_tool_add"),
        tool_payload(input_schema=deep_schema(31), template="Hello!"),
    )

    assert response.status_code == 302, form_errors(response)
    assert Tool.objects.get().name == "greet"


def test_a_nul_in_a_change_form_saves_nothing(admin_client: Client) -> None:
    endpoint = endpoint_create(slug="demo", auth_mode="public")
    before = Endpoint.objects.values().get(pk=endpoint.pk)

    response = admin_client.post(
        reverse("admin:mcp_app_endpoint_change", args=[endpoint.pk]),
        {"slug": "demo", "title": f"De{NUL}mo", "auth_mode": "public"},
    )

    assert "title" in form_errors(response)
    assert Endpoint.objects.values().get(pk=endpoint.pk) == before


@pytest.mark.parametrize(
    ("url", "data", "field", "model"),
    [
        (
            "admin:mcp_app_credential_add",
            {"name": f"gh{NUL}", "kind": "bearer", "secret": "s3cret"},
            "name",
            Credential,
        ),
        (
            "admin:mcp_app_credential_add",
            {"name": "gh", "kind": "bearer", "secret": f"s3{NUL}cret"},
            "secret",
            Credential,
        ),
        (
            "admin:mcp_app_resourcetemplate_add",
            {"uri_template": f"demo://{NUL}{{id}}", "name": "t", "kind": "function"},
            "uri_template",
            ResourceTemplate,
        ),
    ],
)
def test_a_nul_in_other_forms_is_a_form_error(
    admin_client: Client, url: str, data: dict[str, str], field: str, model: Any
) -> None:
    response = admin_client.post(reverse(url), data)

    assert field in form_errors(response)
    assert not model.objects.exists()
