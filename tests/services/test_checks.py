"""System checks: broken executor settings and tool rows are reported by manage.py check."""

from __future__ import annotations

from django.test import override_settings

from mcp_app.checks import check_catalog_rows, check_executors
from mcp_app.models import Tool
from mcp_app.services.catalog_writes import tool_create


def test_a_healthy_configuration_passes() -> None:
    assert check_executors() == []


@override_settings(MCP_PYTHON_TOOL_MODULES=["tests.services.no_such_module"])
def test_unimportable_tool_module_is_an_error() -> None:
    (error,) = check_executors()

    assert error.id == "mcp_app.E001"


@override_settings(MCP_EXECUTORS=["mcp_app.executors.python.PythonExecutor"])
def test_a_tool_kind_without_executor_is_an_error() -> None:
    (error,) = check_executors()

    assert error.id == "mcp_app.E002"
    assert "'template'" in error.msg


def test_a_tool_whose_function_went_away_is_a_warning(db: None) -> None:
    tool = tool_create(name="t", kind=Tool.Kind.PYTHON, config={"function": "echo"})
    Tool.objects.filter(pk=tool.pk).update(config={"function": "removed"})

    (warning,) = check_catalog_rows(databases=["default"])

    assert warning.id == "mcp_app.W001"
    assert "'removed'" in warning.msg
    assert check_catalog_rows(databases=None) == []
