"""Row validation applied by the create services (the same rules the admin forms apply)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from mcp_app.models import Tool
from mcp_app.services.catalog_writes import (
    endpoint_create,
    prompt_create,
    resource_template_create,
    tool_create,
)


def make_tool(**fields: Any) -> Tool:
    fields.setdefault("description", "d")
    return tool_create(name="t", kind="python", config={"function": "echo"}, **fields)


@pytest.mark.parametrize(
    ("icons", "message"),
    [
        ({"src": "https://x/a.png"}, "Icons must be a JSON list of objects."),
        (["https://x/a.png"], "Icon 1 must be an object."),
        ([{"src": "javascript:alert(1)"}], "Icon 1: src must be an https:"),
        ([{"src": "https://x/a.png", "size": "48x48"}], "Icon 1 has unknown keys: size"),
        ([{"src": "https://x/a.png", "sizes": "48x48"}], "Icon 1: sizes must be a list"),
        ([{"src": "data:image/png;base64,AA==", "theme": "blue"}], 'Icon 1: theme must be "light"'),
    ],
)
def test_malformed_icons_are_rejected(db: None, icons: Any, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        make_tool(icons=icons)

    assert caught.value.message_dict["icons"][0].startswith(message)


def test_well_formed_icons_are_accepted(db: None) -> None:
    icons = [
        {"src": "https://x/a.png", "mimeType": "image/png", "sizes": ["48x48"], "theme": "dark"}
    ]

    assert make_tool(icons=icons).icons == icons


def test_python_tool_naming_an_unregistered_function_is_rejected(db: None) -> None:
    with pytest.raises(ValidationError) as caught:
        tool_create(name="t", kind="python", config={"function": "nope"}, description="d")

    assert caught.value.message_dict["config"][0].startswith("No python tool function named")


def test_blank_descriptions_are_rejected(db: None) -> None:
    # A kind whose config declares no description (a python function's fills a blank one).
    with pytest.raises(ValidationError) as caught:
        tool_create(name="t", kind="template", config={"template": "x"}, description="   ")

    assert caught.value.message_dict["description"] == ["A tool needs a description."]


def test_x_mcp_header_on_nested_plain_properties_is_accepted(db: None) -> None:
    schema = {
        "type": "object",
        "properties": {
            "filter": {
                "type": "object",
                "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
            },
            "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
        },
    }

    assert make_tool(input_schema=schema).input_schema == schema


def test_resource_template_needs_a_variable_and_a_known_function(db: None) -> None:
    with pytest.raises(ValidationError) as caught:
        resource_template_create(
            uri_template="demo://fixed", name="n", kind="python", config={"function": "nope"}
        )

    errors = caught.value.message_dict
    assert errors["uri_template"][0].startswith("A URI template needs at least one {variable}")
    assert errors["config"][0].startswith("Unknown resource function 'nope'")


def test_prompt_messages_are_checked_per_kind(db: None) -> None:
    with pytest.raises(ValidationError) as caught:
        prompt_create(
            name="p", description="d", messages=[{"role": "user", "kind": "resource_link"}]
        )

    assert caught.value.message_dict == {"uri": ["A resource message needs a URI."]}


def test_duplicate_slug_is_rejected(db: None) -> None:
    endpoint_create(slug="one")

    with pytest.raises(ValidationError) as caught:
        endpoint_create(slug="one")

    assert "slug" in caught.value.message_dict


@pytest.mark.django_db
def test_a_python_tool_takes_what_its_function_declares_unless_given() -> None:
    tool = tool_create(name="wc", kind="python", config={"function": "word_count"})
    assert tool.description and tool.input_schema["properties"]
    given = tool_create(
        name="wc2", kind="python", config={"function": "word_count"}, description="Mine."
    )
    assert given.description == "Mine."


@pytest.mark.django_db
def test_a_tool_of_an_unregistered_function_or_kind_is_refused_and_not_saved() -> None:
    with pytest.raises(ValidationError) as function:
        tool_create(name="ghost", kind="python", config={"function": "no_such_function"})
    assert "config" in function.value.message_dict
    with pytest.raises(ValidationError) as kind:
        tool_create(name="ghost", kind="no_such_kind", config={}, description="x")
    assert "kind" in kind.value.message_dict
    assert not Tool.objects.filter(name="ghost").exists()
