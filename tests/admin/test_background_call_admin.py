"""The background-call admin: staff watch calls and cancel running ones, nothing else; and
what it and the call-log admin show of a call's payloads."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from mcp_app.models import BackgroundCall, CallLog, Endpoint, Tool
from mcp_app.services.catalog_writes import tool_create
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
    change = reverse("admin:mcp_app_backgroundcall_change", args=[quote(call.id)])
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


def staff_with(*codenames: str) -> User:
    """A staff user holding ``codenames``, of no team: they see every team's rows."""
    user = User.objects.create_user("watcher", password="unused-password-123", is_staff=True)
    codenames = (*codenames, "manage_every_team")
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return user


def call_with_payloads(capture_mode: str) -> BackgroundCall:
    tool = tool_create(
        name="lookup", kind="template", config={"template": "{{ q }}"},
        description="Looks up.", capture_mode=capture_mode,
        input_schema={
            "type": "object",
            "properties": {"q": {"type": "string"}, "api_key": {"type": "string"}},
        },
    )  # fmt: skip
    call = make_call(BackgroundCall.Status.COMPLETED)
    call.tool = tool
    call.arguments = {"q": "visible-query", "api_key": "sk-hidden-key-123"}
    call.result = {"content": [{"type": "text", "text": "answer-text"}], "isError": False}
    call.input_responses = {"ask-1": {"action": "accept", "content": {"pin": "4242"}}}
    call.save()
    return call


@pytest.mark.parametrize(
    ("codenames", "capture_mode", "shown", "hidden"),
    [
        # No payload permission: neither payload, whatever the tool keeps.
        (["view_backgroundcall"], "full", [], ["visible-query", "answer-text", "&lt;string&gt;"]),
        # The permission, and a tool that keeps metadata only: the shapes, no values.
        (
            ["view_backgroundcall", "view_call_payloads"], "metadata",
            ["&lt;string&gt;"], ["visible-query", "answer-text"],
        ),
        # Full capture: the values, with the secret-named field redacted.
        (
            ["view_backgroundcall", "view_call_payloads"], "full",
            ["visible-query", "answer-text", "[redacted]"], [],
        ),
    ],
)  # fmt: skip
def test_a_calls_payloads_show_as_its_call_log_keeps_them(
    client: Client, codenames: list[str], capture_mode: str, shown: list[str], hidden: list[str]
) -> None:
    call = call_with_payloads(capture_mode)
    client.force_login(staff_with(*codenames))
    page = client.get(reverse("admin:mcp_app_backgroundcall_change", args=[quote(call.id)]))
    assert page.status_code == 200
    body = page.content.decode()
    for text in shown:
        assert text in body
    # Never: the secret, the answers to the tool's questions.
    for text in [*hidden, "sk-hidden-key-123", "4242"]:
        assert text not in body


@pytest.mark.parametrize("payloads", [False, True])
def test_the_call_log_admin_shows_payloads_only_with_their_permission(
    client: Client, payloads: bool
) -> None:
    endpoint = Endpoint.objects.create(slug="logged", auth_mode="public")
    row = CallLog.objects.create(
        endpoint=endpoint, endpoint_slug="logged", era="legacy", rpc_method="tools/call",
        target="lookup", status="ok", created_at=timezone.now(), client_name="claude-code",
        arguments={"q": "logged-query"},
        result={"content": [{"type": "text", "text": "logged-answer"}]},
    )  # fmt: skip
    codenames = ["view_calllog", *(["view_call_payloads"] if payloads else [])]
    client.force_login(staff_with(*codenames))
    page = client.get(reverse("admin:mcp_app_calllog_change", args=[row.id]))
    assert page.status_code == 200
    body = page.content.decode()
    assert ("logged-query" in body, "logged-answer" in body) == (payloads, payloads)
    assert "lookup" in body


def test_the_call_log_list_names_each_calls_client(admin_client: Client) -> None:
    endpoint = Endpoint.objects.create(slug="logged", auth_mode="public")
    CallLog.objects.create(
        endpoint=endpoint, endpoint_slug="logged", era="modern", rpc_method="tools/call",
        target="lookup", status="ok", created_at=timezone.now(), client_name="claude-code",
    )  # fmt: skip
    page = admin_client.get(reverse("admin:mcp_app_calllog_changelist"))
    assert page.status_code == 200
    assert '<td class="field-client_name">claude-code</td>' in page.content.decode()
