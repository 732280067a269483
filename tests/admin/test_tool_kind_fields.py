"""The tool form's kind fields come from the executors, with names unique across kinds."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from mcp_app.admin.forms import kind_config_fields
from mcp_app.executors import DEFAULT_EXECUTORS
from mcp_app.executors.template import TemplateExecutor


class SecondTemplateExecutor(TemplateExecutor):
    """A kind that reuses the template kind's form, field names and all."""

    kind = "second-template"


def test_each_kind_supplies_its_own_config_fields() -> None:
    assert kind_config_fields() == {
        "python": ["function"],
        "template": ["template", "template_output"],
        "http": [
            "http_method", "http_url", "http_query", "http_headers", "http_body",
            "http_body_template", "http_timeout", "http_retries", "http_expected_status",
            "http_select", "http_credential", "http_allow_hosts", "http_allow_networks",
        ],
        "mcp_upstream": ["upstream_name", "upstream_tool"],
    }  # fmt: skip


def test_two_kinds_with_one_field_name_are_refused() -> None:
    second = f"{__name__}.SecondTemplateExecutor"

    with (
        override_settings(MCP_EXECUTORS=[*DEFAULT_EXECUTORS, second]),
        pytest.raises(ImproperlyConfigured, match="second-template executor's form fields"),
    ):
        kind_config_fields()
