"""Run only by tests/ops/test_replica.py, in a pytest of its own with ``DATABASE_REPLICA_URL``
set (its name keeps the ordinary collection away): the replica alias must be a mirror of the
test database, so tests of the audit see their own rows, in a transaction or not.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client

from tests.audit.factories import make_call


def test_the_replica_alias_names_the_test_database() -> None:
    replica, primary = connections["replica"].settings_dict, connections["default"].settings_dict
    assert (replica["HOST"], replica["PORT"], replica["NAME"]) == (
        primary["HOST"],
        primary["PORT"],
        primary["NAME"],
    )


@pytest.mark.parametrize("transaction", [False, True])
def test_the_audit_lists_the_tests_own_rows(
    transaction: bool, request: pytest.FixtureRequest
) -> None:
    request.getfixturevalue("transactional_db" if transaction else "db")
    make_call(target="mirrored")
    client = Client()
    client.force_login(User.objects.create_superuser("mirror-op"))
    page = client.get("/audit/")
    assert page.status_code == 200
    assert "mirrored" in page.content.decode()
    assert "X-Read-Source" not in page  # the mirror is the primary: no replica to name
