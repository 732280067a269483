"""``manage.py check`` refuses a MCP_POLICY_KINDS that does not load (mcp_app.E030)."""

from __future__ import annotations

import pytest
from django.test import override_settings

from mcp_app.checks import check_policy_kinds
from mcp_app.services.policies import DEFAULT_POLICY_KINDS


def test_the_default_policy_kinds_pass_the_check() -> None:
    assert check_policy_kinds() == []


@pytest.mark.parametrize(
    "path",
    [
        "tests.services.no_such_module.Policy",  # does not import
        "mcp_app.executors.python.PythonExecutor",  # not a PolicyKind
        DEFAULT_POLICY_KINDS[0],  # listed twice: two classes claim one kind
    ],
)
def test_a_policy_kind_that_does_not_load_fails_the_check(path: str) -> None:
    with override_settings(MCP_POLICY_KINDS=[*DEFAULT_POLICY_KINDS, path]):
        errors = check_policy_kinds()
    assert [error.id for error in errors] == ["mcp_app.E030"]
