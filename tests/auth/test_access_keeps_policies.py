"""The snapshot an OAuth caller sees (group-gated items left out) keeps the endpoint's
policies: hiding an item from a caller must not take the rules around the calls away."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from mcp_app.auth.access import state_for
from mcp_app.auth.bearer import Principal
from mcp_app.models import Endpoint, Policy
from mcp_app.services.endpoint_directory import get_endpoint_state
from mcp_app.services.policies.writes import policy_save
from tests.support.catalog import echo_schema, make_endpoint, make_python_tool

pytestmark = pytest.mark.django_db


def test_a_callers_filtered_view_keeps_the_endpoints_policies() -> None:
    endpoint = make_endpoint("gated", auth_mode=Endpoint.AuthMode.OAUTH)
    open_tool = make_python_tool("echo", "echo", input_schema=echo_schema())
    gated = make_python_tool("admin_echo", "echo", input_schema=echo_schema())
    gated.allowed_groups.add(Group.objects.create(name="admins"))
    endpoint.tools.add(open_tool, gated)
    policy_save(Policy(endpoint=endpoint, name="mask", kind="mask"), actor=None, source="test")
    state = get_endpoint_state("gated")
    assert state is not None and state.snapshot.policies is not None

    seen = state_for(state, Principal(key="user:1", user_id=1)).snapshot

    assert [tool.name for tool in seen.tools] == ["echo"]
    assert seen.policies is state.snapshot.policies
