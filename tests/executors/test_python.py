"""The "python" executor: registered functions, return-value conversion, the module setting."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from mcp_app.executors import executor_kinds, get_executor
from mcp_app.executors.base import ConfigError, Executor
from mcp_app.executors.python import resource_functions, tool_functions
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.results import NO_STRUCTURED, ToolError, ToolResult

SAMPLES = "tests.executors.sample_tools"
python = get_executor("python")


def test_registry_offers_the_configured_kinds() -> None:
    assert executor_kinds() == [
        ("python", "Python function"),
        ("template", "Text template"),
        ("http", "HTTP request"),
        ("mcp_upstream", "MCP upstream tool"),
    ]


def test_unknown_kind_is_a_lookup_error() -> None:
    with pytest.raises(LookupError):
        get_executor("shell")


def test_executor_registry_follows_the_setting() -> None:
    with override_settings(MCP_EXECUTORS=["mcp_app.executors.template.TemplateExecutor"]):
        assert [kind for kind, _label in executor_kinds()] == ["template"]
    assert [kind for kind, _label in executor_kinds()] == [
        "python",
        "template",
        "http",
        "mcp_upstream",
    ]


def test_base_executor_methods_must_be_overridden() -> None:
    with pytest.raises(NotImplementedError, match="subclasses of Executor must provide"):
        Executor().validate_config({})


def test_builtins_are_registered_by_default() -> None:
    assert set(tool_functions()) == {
        "echo", "add", "current_time", "sleep_with_progress", "countdown", "word_count",
        "json_format", "uuid", "ask_confirmation", "ask_value", "ask_model", "client_roots",
    }  # fmt: skip
    assert set(resource_functions()) == {"echo"}


def test_only_functions_of_listed_modules_are_visible() -> None:
    with override_settings(MCP_PYTHON_TOOL_MODULES=[SAMPLES]):
        assert "sample_list" in tool_functions()
        assert "echo" not in tool_functions()
    assert "sample_list" not in tool_functions()


@override_settings(MCP_PYTHON_TOOL_MODULES=["mcp_app.builtin_tools", SAMPLES])
def test_duplicate_names_across_modules_are_a_configuration_error() -> None:
    with pytest.raises(ImproperlyConfigured, match="'echo' is registered by both"):
        resource_functions()


@override_settings(MCP_PYTHON_TOOL_MODULES=["tests.executors.no_such_module"])
def test_unimportable_module_is_a_configuration_error() -> None:
    with pytest.raises(ImproperlyConfigured, match="cannot be imported"):
        tool_functions()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "A Python tool needs a function: choose one of the registered functions."),
        ({"function": "rm_rf"}, "No python tool function named 'rm_rf' is registered"),
    ],
)
def test_config_must_name_a_registered_function(config: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        python.validate_config(config)

    assert caught.value.message.startswith(message)


@override_settings(MCP_PYTHON_TOOL_MODULES=[SAMPLES])
async def test_sync_function_runs_and_cannot_mutate_the_callers_arguments(
    ctx: ToolCallContext,
) -> None:
    arguments = {"a": 1}

    result = await python.run(python.prepare({"function": "sample_sync_text"}), arguments, ctx)

    assert result == ToolResult.text("plain")
    assert arguments == {"a": 1}


@override_settings(MCP_PYTHON_TOOL_MODULES=[SAMPLES])
async def test_list_becomes_structured_content_with_json_text(ctx: ToolCallContext) -> None:
    result = await python.run(python.prepare({"function": "sample_list"}), {}, ctx)

    assert result == ToolResult(content=[{"type": "text", "text": "[1,2]"}], structured=[1, 2])


@override_settings(MCP_PYTHON_TOOL_MODULES=[SAMPLES])
async def test_tool_result_passes_through_and_none_is_empty_content(
    ctx: ToolCallContext,
) -> None:
    result = await python.run(python.prepare({"function": "sample_result"}), {}, ctx)
    empty = await python.run(python.prepare({"function": "sample_none"}), {}, ctx)

    assert result.content == [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]
    assert empty == ToolResult(content=[], structured=NO_STRUCTURED)


@override_settings(MCP_PYTHON_TOOL_MODULES=[SAMPLES])
async def test_non_json_return_value_is_a_type_error(ctx: ToolCallContext) -> None:
    with pytest.raises(TypeError, match="returned set"):
        await python.run(python.prepare({"function": "sample_bad"}), {}, ctx)


async def test_arguments_are_checked_against_the_functions_own_schema(
    ctx: ToolCallContext,
) -> None:
    # A tool row may publish a looser schema than its function needs (rows saved with the
    # no-argument schema the add form used to pre-fill): the function's schema still holds.
    with pytest.raises(ToolError) as caught:
        await python.run(python.prepare({"function": "word_count"}), {}, ctx)

    assert caught.value.message == "Invalid arguments: 'text' is a required property"


@override_settings(MCP_PYTHON_TOOL_MODULES=[SAMPLES])
async def test_a_functions_own_exception_is_a_tool_error_without_a_traceback(
    ctx: ToolCallContext,
) -> None:
    with pytest.raises(ToolError) as caught:
        await python.run(python.prepare({"function": "sample_key_error"}), {}, ctx)

    assert caught.value.message == "sample_key_error failed: KeyError: 'text'"


@override_settings(MCP_PYTHON_TOOL_MODULES=f"{SAMPLES}, mcp_app.builtin_tools")
def test_module_setting_from_the_environment_is_comma_separated() -> None:
    assert {"sample_list", "echo"} <= set(tool_functions())
