"""Saving a tool that no client can use warns the operator then, not first at call time."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from mcp_app.models import Endpoint, Tool, Upstream
from tests.admin.conftest import tool_payload
from tests.support.admin_forms import upstream_form

pytestmark = pytest.mark.django_db

HTTP_FIELDS = {
    "kind": "http", "template": "", "http_method": "GET", "http_query": "", "http_headers": "",
    "http_body": "none", "http_body_template": "", "http_timeout": "", "http_retries": "",
    "http_expected_status": "2xx", "http_select": "", "http_credential": "",
    "http_allow_hosts": "", "http_allow_networks": "",
    "input_schema": '{"type": "object", "properties": {}}',
}  # fmt: skip


def save(client: Client, **overrides: Any) -> list[str]:
    response = client.post(reverse("admin:mcp_app_tool_add"), tool_payload(**overrides))
    assert response.status_code == 302, response.context["adminform"].form.errors
    return [
        str(message)
        for message in get_messages(response.wsgi_request)
        if message.level_tag == "warning"
    ]


def test_a_tool_on_no_endpoint_is_saved_with_a_warning(admin_client: Client) -> None:
    assert save(admin_client) == [
        "greet is on no endpoint: no client can call it until you choose one under Endpoints."
    ]
    assert Tool.objects.get().name == "greet"


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9/x", "http://169.254.169.254/latest", "http://localhost/x",
            "http://[::1]/x", "http://10.1.2.3/x"],
)  # fmt: skip
def test_an_http_tool_whose_host_is_refused_is_saved_with_a_warning(
    admin_client: Client, endpoint: Endpoint, url: str
) -> None:
    (warning,) = save(admin_client, **HTTP_FIELDS, http_url=url, endpoints=[str(endpoint.pk)])

    assert warning.startswith("Calls will be refused: ")
    assert "is not a public address" in warning


def test_an_allow_listed_private_host_saves_without_a_warning(
    admin_client: Client, endpoint: Endpoint
) -> None:
    fields = {**HTTP_FIELDS, "http_allow_networks": "127.0.0.0/8"}
    warnings = save(
        admin_client, **fields, http_url="http://127.0.0.1:9/x", endpoints=[str(endpoint.pk)]
    )

    assert warnings == []


def save_upstream(client: Client, **overrides: Any) -> list[str]:
    response = client.post(reverse("admin:mcp_app_upstream_add"), upstream_form(**overrides))
    assert response.status_code == 302, response.context["adminform"].form.errors
    return [
        str(message)
        for message in get_messages(response.wsgi_request)
        if message.level_tag == "warning"
    ]


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9/mcp", "http://localhost/mcp", "http://[::1]/mcp",
            "http://10.1.2.3/mcp"],
)  # fmt: skip
def test_an_upstream_whose_host_is_refused_is_saved_with_a_warning(
    admin_client: Client, url: str
) -> None:
    (warning,) = save_upstream(admin_client, url=url)

    assert warning.startswith("Requests will be refused: ")
    assert "is not a public address" in warning
    assert warning.endswith("under Limits, Allow networks.")
    assert Upstream.objects.get().url == url


def test_an_upstream_on_an_allow_listed_network_saves_without_a_warning(
    admin_client: Client,
) -> None:
    warnings = save_upstream(
        admin_client, url="http://127.0.0.1:9/mcp", allow_networks="127.0.0.0/8"
    )

    assert warnings == []
