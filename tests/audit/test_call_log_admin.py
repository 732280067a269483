"""The call log in Django admin is read-only, and retention is the one way records leave."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.admin.sites import site
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from mcp_app.models import CallLog, Tool
from tests.audit.factories import make_call

pytestmark = pytest.mark.django_db


def test_admin_can_list_and_view_but_never_add_change_or_delete(admin_client, rf, admin_user):
    record = make_call(None)
    model_admin = site._registry[CallLog]
    request = rf.get("/")
    request.user = admin_user
    assert model_admin.has_view_permission(request, record)
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request, record)
    assert not model_admin.has_delete_permission(request, record)
    assert admin_client.get(reverse("admin:mcp_app_calllog_changelist")).status_code == 200
    change_url = reverse("admin:mcp_app_calllog_change", args=[record.pk])
    assert admin_client.get(change_url).status_code == 200
    assert admin_client.post(change_url, {"target": "edited"}).status_code == 403
    delete_url = reverse("admin:mcp_app_calllog_delete", args=[record.pk])
    assert admin_client.post(delete_url, {"post": "yes"}).status_code == 403
    record.refresh_from_db()
    assert record.target == "echo"


def test_tool_admin_edits_the_capture_policy(admin_client):
    tool = Tool(name="echo", description="Echo.", kind="python", config={"function": "echo"})
    tool.full_clean()
    tool.save()
    page = admin_client.get(reverse("admin:mcp_app_tool_change", args=[tool.pk])).content
    for name in (b"capture_mode", b"capture_max_bytes", b"capture_redact"):
        assert b'name="' + name + b'"' in page


def test_purge_deletes_only_records_older_than_the_retention():
    now = timezone.now()
    old = [make_call(None, created_at=now - timedelta(days=40 + i)) for i in range(3)]
    kept = make_call(None, created_at=now - timedelta(days=10))
    out = StringIO()
    call_command("purge_call_logs", "--days", "30", stdout=out)
    assert "Deleted 3 call-log record(s)" in out.getvalue()
    assert list(CallLog.objects.values_list("pk", flat=True)) == [kept.pk]
    assert not CallLog.objects.filter(pk__in=[r.pk for r in old]).exists()
