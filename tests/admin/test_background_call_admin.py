"""The background-call admin: staff watch calls and cancel running ones, nothing else."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from mcp_app.models import BackgroundCall, Endpoint, Tool
from tests.admin.conftest import tool_payload

pytestmark = pytest.mark.django_db


def make_call(status: str) -> BackgroundCall:
    endpoint, _ = Endpoint.objects.get_or_create(slug="bg", defaults={"auth_mode": "public"})
    return BackgroundCall.objects.create(
        endpoint=endpoint, tool_name="countdown", protocol_version="2025-11-25",
        soft_time_limit=5, hard_time_limit=10, status=status,
    )  # fmt: skip


def test_running_calls_are_cancelled_and_finished_ones_left_alone(admin_client: Client) -> None:
    running = make_call(BackgroundCall.Status.WORKING)
    done = make_call(BackgroundCall.Status.COMPLETED)
    changelist = reverse("admin:mcp_app_backgroundcall_changelist")
    assert admin_client.get(changelist).status_code == 200
    response = admin_client.post(
        changelist,
        {"action": "cancel_calls", "_selected_action": [running.id, done.id]},
        follow=True,
    )
    assert "Cancelled 1 running call(s)." in response.content.decode()
    running.refresh_from_db()
    done.refresh_from_db()
    assert (running.status, running.status_message) == ("cancelled", "Cancelled by an operator.")
    assert done.status == "completed"


def test_calls_cannot_be_added_edited_or_deleted(admin_client: Client) -> None:
    call = make_call(BackgroundCall.Status.WORKING)
    change = reverse("admin:mcp_app_backgroundcall_change", args=[call.id])
    assert admin_client.post(change, {"status": "completed"}).status_code == 403
    assert admin_client.get(reverse("admin:mcp_app_backgroundcall_add")).status_code == 403
    delete = reverse("admin:mcp_app_backgroundcall_delete", args=[call.id])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    call.refresh_from_db()
    assert call.status == "working"


def test_a_tool_is_made_a_background_tool_in_its_form(admin_client: Client) -> None:
    payload = tool_payload(
        execution_mode="background", task_support="required", soft_time_limit="30",
        hard_time_limit="60",
    )  # fmt: skip
    response = admin_client.post(reverse("admin:mcp_app_tool_add"), payload)
    assert response.status_code == 302, response.content.decode()[:2000]
    tool = Tool.objects.get(name="greet")
    assert (tool.execution_mode, tool.task_support) == ("background", "required")
    assert (tool.soft_time_limit, tool.hard_time_limit) == (30, 60)


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"task_support": "required"}, "An inline tool cannot require tasks"),
        (
            {"execution_mode": "background", "soft_time_limit": "30", "hard_time_limit": "10"},
            "The hard limit must be longer than the soft limit.",
        ),
        ({"execution_mode": "background", "soft_time_limit": "0"}, "greater than or equal to"),
        ({"execution_mode": "elsewhere"}, "Select a valid choice."),
    ],
)
def test_bad_execution_settings_are_refused_and_save_nothing(
    admin_client: Client, fields: dict[str, str], error: str
) -> None:
    response = admin_client.post(reverse("admin:mcp_app_tool_add"), tool_payload(**fields))
    assert response.status_code == 200
    assert error in response.content.decode()
    assert not Tool.objects.exists()
