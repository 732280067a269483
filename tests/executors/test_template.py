"""The "template" executor: Django templates over the arguments, as text or JSON."""

from __future__ import annotations

import pytest
from django.test import override_settings

from mcp_app.executors import get_executor
from mcp_app.executors.base import ConfigError
from mcp_app.executors.template import compile_template, template_variables
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.results import NO_STRUCTURED, ToolError, ToolResult

template = get_executor("template")


async def test_text_output_renders_arguments_without_escaping(ctx: ToolCallContext) -> None:
    config = {"template": "Hello {{ name }}! {% if shout %}HEY{% endif %}", "output": "text"}

    result = await template.run(
        template.prepare(config), {"name": "<Ann & Bob>", "shout": True}, ctx
    )

    assert result == ToolResult(content=[{"type": "text", "text": "Hello <Ann & Bob>! HEY"}])


async def test_json_output_becomes_structured_content_and_text(ctx: ToolCallContext) -> None:
    config = {"template": '{"name": "{{ name }}", "tags": [{{ n }}, 2]}', "output": "json"}

    result = await template.run(template.prepare(config), {"name": "Ann", "n": 1}, ctx)

    assert result.structured == {"name": "Ann", "tags": [1, 2]}
    assert result.content == [{"type": "text", "text": '{"name": "Ann", "tags": [1, 2]}'}]


async def test_output_defaults_to_text(ctx: ToolCallContext) -> None:
    prepared = template.prepare({"template": "{{ a|add:b }}"})
    result = await template.run(prepared, {"a": 1, "b": 2}, ctx)

    assert result.content == [{"type": "text", "text": "3"}]
    assert result.structured is NO_STRUCTURED


async def test_invalid_json_output_is_a_tool_error_naming_the_position(
    ctx: ToolCallContext,
) -> None:
    config = {"template": '{"name": {{ name }}}', "output": "json"}

    with pytest.raises(ToolError) as caught:
        await template.run(template.prepare(config), {"name": "Ann"}, ctx)

    assert caught.value.message.startswith(
        "The template did not render valid JSON: Expecting value"
    )
    assert "line 1 column 10" in caught.value.message


def test_syntax_error_is_a_config_error_with_djangos_message() -> None:
    with pytest.raises(ConfigError) as caught:
        template.validate_config({"template": "{% if %}", "output": "text"})

    assert caught.value.message.startswith("Template syntax error:")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "A template tool needs its template text."),
        ({"template": "x", "output": "xml"}, 'The output must be "text" or "json", not "xml".'),
        ({"template": "x", "output": None}, 'The output must be "text" or "json", not null.'),
        ({"template": "x", "code": "1"}, "Unknown config keys: code."),
    ],
)
def test_malformed_config_is_rejected(config: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        template.validate_config(config)

    assert caught.value.message == message


@pytest.mark.parametrize(
    "source",
    [
        '{% load static %}{% static "x" %}',
        '{% include "admin/base.html" %}',
        '{% extends "admin/base.html" %}',
        "{% debug %}",
        '{% url "admin:index" %}',
        "{% ssi '/etc/passwd' %}",
    ],
)
def test_tags_that_reach_outside_the_arguments_do_not_exist(source: str) -> None:
    with pytest.raises(ConfigError):
        template.validate_config({"template": source})


def test_underscore_attributes_do_not_parse() -> None:
    with pytest.raises(ConfigError):
        template.validate_config({"template": "{{ name.__class__.__mro__ }}"})


async def test_template_gets_a_private_copy_of_the_arguments(ctx: ToolCallContext) -> None:
    arguments = {"name": "ann", "items": [1, 2]}
    config = {"template": "[{{ name.upper }}][{{ items.pop }}][{{ items|length }}]"}

    result = await template.run(template.prepare(config), arguments, ctx)

    assert result.content == [{"type": "text", "text": "[ANN][2][1]"}]
    assert arguments == {"name": "ann", "items": [1, 2]}


async def test_output_longer_than_the_cap_is_a_tool_error(ctx: ToolCallContext) -> None:
    config = {"template": "{% for i in items %}xxxxxxxxxx{% endfor %}"}

    with override_settings(MCP_TEMPLATE_MAX_OUTPUT=50):
        with pytest.raises(ToolError) as caught:
            await template.run(template.prepare(config), {"items": list(range(6))}, ctx)
        short = await template.run(template.prepare(config), {"items": list(range(5))}, ctx)

    assert caught.value.message == "Template output is longer than the limit of 50 characters."
    assert short.content == [{"type": "text", "text": "x" * 50}]


@pytest.mark.parametrize(
    ("source", "variables"),
    [
        ("Hello {{ name }}!", {"name"}),
        ("{{ user.name|default:fallback }}", {"user", "fallback"}),
        ("{% for x in items %}{{ x }}{{ forloop.counter }}{% endfor %}", {"items"}),
        ("{% if a and not b %}{% elif c == 'x' %}{% endif %}", {"a", "b", "c"}),
        ("{% with d=e %}{{ d }}{% endwith %}", {"e"}),
        ("{% filter upper|cut:x %}{{ f }}{% endfilter %}", {"x", "f"}),
        ("{% firstof a 'b' as z %}{{ z }}{{ 'text' }}{{ 3 }}{{ True }}", {"a"}),
    ],
)
def test_template_variables_are_what_the_context_must_supply(
    source: str, variables: set[str]
) -> None:
    assert template_variables(compile_template(source)) == variables


def test_a_variable_no_property_declares_is_a_config_problem() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}

    assert template.config_problems({"template": "Hi {{ name }}{{ nmae }}{{ b }}"}, schema) == {
        "template": "{{ b }}, {{ nmae }} names no property of the input schema."
    }
    assert template.config_problems({"template": "Hi {{ name }}"}, schema) == {}
