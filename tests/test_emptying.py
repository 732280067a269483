"""A transactional test leaves the next test the database Django's flush would: no row of its
own anywhere, the content types and permissions as post_migrate makes them
(tests/support/emptying.py empties only the tables written).

The tests run in file order: each ``test_*_leaves`` writes, the ``check`` after it looks.
The check reads every model through the ORM, independently of how emptying finds tables.
"""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.utils import timezone

from mcp_app.models import CallLog
from tests.support.catalog import make_endpoint, make_python_tool

pytestmark = pytest.mark.django_db(transaction=True)

CODENAME = "leaked_by_an_earlier_test"


def _models_with_rows() -> list[str]:
    """Every model (m2m tables included) holding a row, but the two post_migrate fills."""
    kept = {ContentType, Permission}
    return [
        model._meta.label
        for model in apps.get_models(include_auto_created=True)
        if model not in kept and model._base_manager.exists()
    ]


def _check_clean() -> None:
    assert _models_with_rows() == []
    assert not Permission.objects.filter(codename=CODENAME).exists()
    # post_migrate's permissions, as it names them: one renamed by a test is named again.
    assert Permission.objects.get(codename="add_endpoint").name == "Can add endpoint"
    assert ContentType.objects.filter(app_label="mcp_app", model="endpoint").exists()


def test_rows_in_many_tables_leaves() -> None:
    endpoint = make_endpoint("leak")
    endpoint.tools.add(make_python_tool("echo", "echo"))
    user = User.objects.create_user("leak")
    user.groups.add(Group.objects.create(name="leak"))
    user.user_permissions.add(Permission.objects.get(codename="view_endpoint"))
    CallLog.objects.create(
        endpoint=endpoint, endpoint_slug="leak", era="modern", rpc_method="tools/call",
        target="echo", status="ok", created_at=timezone.now(),
    )  # fmt: skip
    assert len(_models_with_rows()) > 5


def test_rows_in_many_tables_check() -> None:
    _check_clean()


def test_a_changed_permission_leaves() -> None:
    content_type = ContentType.objects.get(app_label="mcp_app", model="endpoint")
    Permission.objects.create(codename=CODENAME, name="Leaked", content_type=content_type)
    Permission.objects.filter(codename="add_endpoint").update(name="Renamed by a test")


def test_a_changed_permission_check() -> None:
    _check_clean()


def test_a_removed_content_type_leaves() -> None:
    ContentType.objects.filter(app_label="mcp_app", model="endpoint").delete()


def test_a_removed_content_type_check() -> None:
    _check_clean()
