"""Tool admin: JSON and schema errors are explained, nothing is saved on error."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from mcp_app.executors.python import tool_functions
from mcp_app.models import Endpoint, Tool
from mcp_app.services.catalog_writes import tool_create
from tests.admin.conftest import tool_payload

ADD_URL = reverse("admin:mcp_app_tool_add")


def post_tool(client: Client, **overrides: Any) -> Any:
    return client.post(ADD_URL, tool_payload(**overrides))


def form_errors(response: Any) -> list[str]:
    form = response.context["adminform"].form
    return [str(message) for messages in form.errors.values() for message in messages]


@pytest.mark.django_db
def test_add_page_offers_kinds_and_registered_functions(admin_client: Client) -> None:
    response = admin_client.get(ADD_URL)

    assert response.status_code == 200
    # Each option carries its full text in a title: the picker is narrower than the text.
    assert b'<option value="sleep_with_progress" title="sleep_with_progress: Wait' in (
        response.content
    )
    assert b'<option value="template">' in response.content
    assert b"mcp-code" in response.content


@pytest.mark.django_db
def test_invalid_json_names_the_field_and_position_and_saves_nothing(
    admin_client: Client,
) -> None:
    response = post_tool(admin_client, input_schema='{\n  "type": "object",\n  "x": }')

    assert response.status_code == 200
    assert form_errors(response) == [
        "Input schema: invalid JSON at line 3 column 8: Expecting value"
    ]
    assert not Tool.objects.exists()


@pytest.mark.django_db
def test_schema_that_is_not_json_schema_is_rejected(admin_client: Client) -> None:
    response = post_tool(admin_client, input_schema={"type": 5})

    (error,) = form_errors(response)
    assert error.startswith("Input schema is not a valid JSON Schema 2020-12 at /type: 5 is not")
    assert not Tool.objects.exists()


@pytest.mark.django_db
def test_schema_of_another_dialect_is_checked_with_that_dialect(admin_client: Client) -> None:
    draft7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"n": {"type": "integer", "exclusiveMinimum": True}},
    }

    response = post_tool(admin_client, input_schema=draft7)

    (error,) = form_errors(response)
    assert error.startswith("Input schema is not a valid JSON Schema draft 7")


@pytest.mark.parametrize(
    ("field", "schema", "message"),
    [
        ("input_schema", {"type": "array"}, 'Input schema must have "type": "object" at its root'),
        ("output_schema", {"type": "string"}, 'Output schema must have "type": "object"'),
        ("input_schema", "[]", "Input schema must be a JSON object."),
    ],
)
@pytest.mark.django_db
def test_schemas_must_have_an_object_root(
    admin_client: Client, field: str, schema: Any, message: str
) -> None:
    response = post_tool(admin_client, **{field: schema})

    (error,) = form_errors(response)
    assert error.startswith(message)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}},
        {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "bad header"}}},
        {
            "type": "object",
            "properties": {
                "a": {"type": "string", "x-mcp-header": "Region"},
                "b": {"type": "string", "x-mcp-header": "region"},
            },
        },
        {"type": "object", "items": {"type": "string", "x-mcp-header": "Item"}},
    ],
    ids=["number", "not-a-token", "duplicate", "off-properties-chain"],
)
@pytest.mark.django_db
def test_invalid_x_mcp_header_marks_are_rejected(admin_client: Client, schema: Any) -> None:
    response = post_tool(admin_client, input_schema=schema)

    (error,) = form_errors(response)
    assert "x-mcp-header" in error
    assert not Tool.objects.exists()


@pytest.mark.parametrize("name", ["bad name", "", "x" * 129, "émoji"])
@pytest.mark.django_db
def test_tool_names_outside_the_mcp_charset_are_rejected(admin_client: Client, name: str) -> None:
    response = post_tool(admin_client, name=name)

    assert response.status_code == 200
    assert "name" in response.context["adminform"].form.errors
    assert not Tool.objects.exists()


@pytest.mark.django_db
def test_a_second_tool_with_the_same_name_on_one_endpoint_is_rejected(
    admin_client: Client, endpoint: Endpoint
) -> None:
    tool_create(name="greet", kind="template", config={"template": "x"}, description="d",
                endpoints=[endpoint])  # fmt: skip

    response = post_tool(admin_client, endpoints=[str(endpoint.pk)])

    assert form_errors(response) == ["Endpoint 'test' already has another tool named 'greet'."]
    assert Tool.objects.count() == 1


@pytest.mark.django_db
def test_valid_tool_is_saved_verbatim_and_published(
    admin_client: Client, endpoint: Endpoint
) -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"age": {"type": "integer", "minimum": 0}},
        "properties": {
            "name": {"type": "string", "x-mcp-header": "Name"},
            "age": {"$ref": "#/$defs/age"},
        },
        "required": ["name"],
        "additionalProperties": False,
    }

    response = post_tool(
        admin_client,
        input_schema=schema,
        output_schema={"type": "object", "additionalProperties": {"type": "string"}},
        template_output="json",
        template='{"greeting": "Hello {{ name }}"}',
        read_only_hint="true",
        endpoints=[str(endpoint.pk)],
    )

    assert response.status_code == 302
    tool = Tool.objects.get()
    assert tool.input_schema == schema
    assert tool.output_schema == {"type": "object", "additionalProperties": {"type": "string"}}
    assert tool.config == {"template": '{"greeting": "Hello {{ name }}"}', "output": "json"}
    assert tool.read_only_hint is True
    assert tool.destructive_hint is None
    assert list(tool.endpoints.all()) == [endpoint]


@pytest.mark.django_db
def test_python_tool_left_empty_is_filled_in_from_the_function(admin_client: Client) -> None:
    response = post_tool(
        admin_client,
        name="clock",
        kind="python",
        function="current_time",
        description="",
        input_schema="",
        template="",
    )

    assert response.status_code == 302
    tool = Tool.objects.get()
    assert tool.config == {"function": "current_time"}
    assert tool.title == "Current time"
    assert tool.description.startswith("Return the current date and time")
    assert tool.input_schema["properties"]["timezone"]["type"] == "string"
    assert tool.output_schema is not None and tool.output_schema["type"] == "object"
    assert tool.read_only_hint is True


def rendered_textarea(content: bytes, name: str) -> str:
    match = re.search(rf'<textarea name="{name}"[^>]*>(.*?)</textarea>', content.decode(), re.S)
    assert match is not None, name
    return html.unescape(match.group(1)).strip()


@pytest.mark.django_db
def test_python_tool_saved_as_the_add_form_offers_it_publishes_the_functions_schema(
    admin_client: Client, endpoint: Endpoint
) -> None:
    # The README's flow: pick the function and the endpoint, keep every other field as offered.
    page = admin_client.get(ADD_URL).content
    offered = {name: rendered_textarea(page, name) for name in ("input_schema", "output_schema")}

    response = post_tool(
        admin_client, name="word_count", kind="python", function="word_count",
        description=rendered_textarea(page, "description"), template="",
        endpoints=[str(endpoint.pk)], **offered,
    )  # fmt: skip

    assert response.status_code == 302
    tool = Tool.objects.get()
    assert tool.input_schema == tool_functions()["word_count"].input_schema
    assert tool.output_schema == tool_functions()["word_count"].output_schema


@pytest.mark.django_db
def test_python_tool_needs_a_function(admin_client: Client) -> None:
    response = post_tool(admin_client, kind="python", function="")

    assert form_errors(response) == ["Choose the python function this tool runs."]


@pytest.mark.django_db
def test_template_syntax_errors_are_shown_on_the_template(admin_client: Client) -> None:
    response = post_tool(admin_client, template="{% for %}")

    form = response.context["adminform"].form
    assert list(form.errors) == ["template"]
    assert form.errors["template"][0].startswith("Template syntax error:")


@pytest.mark.django_db
def test_change_page_shows_the_current_config_and_pretty_json(admin_client: Client) -> None:
    tool = tool_create(name="echo", kind="python", config={"function": "echo"})

    response = admin_client.get(reverse("admin:mcp_app_tool_change", args=[tool.pk]))

    assert response.status_code == 200
    assert (
        b'<option value="echo" selected title="echo: Return the given message unchanged.">'
        in response.content
    )
    assert b"&quot;type&quot;: &quot;object&quot;" in response.content


@pytest.mark.django_db
def test_changelist_filters_by_endpoint(admin_client: Client, endpoint: Endpoint) -> None:
    tool_create(name="echo", kind="python", config={"function": "echo"}, endpoints=[endpoint])
    tool_create(name="add", kind="python", config={"function": "add"})

    response = admin_client.get(
        reverse("admin:mcp_app_tool_changelist"), {"endpoints__id__exact": endpoint.pk}
    )

    assert [tool.name for tool in response.context["cl"].result_list] == ["echo"]


@pytest.mark.django_db
def test_a_missing_description_is_said_once(admin_client: Client) -> None:
    """Issue #28: the message must not repeat on the page."""
    response = post_tool(admin_client, description="")

    assert form_errors(response) == ["A tool needs a description."]
    assert response.content.decode().count("A tool needs a description.") == 1


@pytest.mark.django_db
@pytest.mark.parametrize("function", ["", "no_such_function"], ids=["none", "unknown"])
def test_a_python_tool_without_its_function_is_not_asked_for_a_description(
    admin_client: Client, function: str
) -> None:
    """Issue #28: the function supplies the description, so only the function is asked for."""
    response = post_tool(
        admin_client, kind="python", function=function, description="", input_schema="",
        template="",
    )  # fmt: skip

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["function"]
    assert "needs a description" not in response.content.decode()
    assert not Tool.objects.exists()
