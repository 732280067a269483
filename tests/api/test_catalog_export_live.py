"""The API's catalog export under a real ASGI server (services/catalog_io.py
``catalog_text_async``): the body streams (chunked, in several pieces) and is the whole
document to the byte; a client that goes away mid-way leaves no transaction open in the
database, and the server goes on serving exports."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.db import connection

from mcp_app.services.api_tokens import api_token_create
from mcp_app.services.catalog_io import (
    catalog_dump,
    catalog_export,
    catalog_import,
    catalog_with_end,
)
from tests.api.test_catalog_export_stream import _generated
from tests.support.live import asgi_server, flush_database
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db

TOOLS = 2000  # about 1.5 MB of YAML: many of the server's 64 KiB pieces, and 4 row chunks
APPLICATION = "mcphost-export-live"  # the server's connections, in pg_stat_activity


@pytest.fixture(scope="module")
def server(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    with django_db_blocker.unblock():
        catalog_import(document=_generated(TOOLS))
        user = User.objects.create_superuser("exporter", password="pw")
        _token, key = api_token_create(user=user, name="export")
        expected = catalog_dump(catalog_with_end(catalog_export(user=user))).encode()
    try:
        with asgi_server("daphne", {"DATABASE_APPLICATION_NAME": APPLICATION}) as base:
            yield {
                "url": f"{base}/api/v1/catalog/export/",
                "headers": {"Authorization": f"Bearer {key}"},
                "expected": expected,
            }
    finally:
        flush_database(django_db_blocker)


def open_transactions() -> list[tuple[Any, ...]]:
    """The server's connections inside a transaction (or running a statement)."""
    with connection.cursor() as cursor:
        # The test runs in a transaction, and PostgreSQL keeps the first view of
        # pg_stat_activity for the rest of it: without this every poll saw the first.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT pid, state, query FROM pg_stat_activity "
            "WHERE application_name = %s AND xact_start IS NOT NULL",
            [APPLICATION],
        )
        return list(cursor.fetchall())


def test_the_export_streams_the_whole_document(server: dict[str, Any]) -> None:
    pieces: list[bytes] = []
    with httpx.stream("GET", server["url"], headers=server["headers"], timeout=120) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/yaml; charset=utf-8"
        assert "content-length" not in response.headers
        pieces.extend(response.iter_raw())

    assert b"".join(pieces) == server["expected"]
    assert len(pieces) > 1


def test_a_client_gone_mid_export_leaves_no_transaction_open(server: dict[str, Any]) -> None:
    with httpx.stream("GET", server["url"], headers=server["headers"], timeout=120) as response:
        first = next(response.iter_raw())
    assert first.startswith(b"format: mcphost-catalog/2\n")

    wait_until(
        lambda: not open_transactions(),
        "no transaction of the server's left open",
        timeout=30,
        detail=lambda: repr(open_transactions()),
    )
    # Nothing was left holding a connection: the next export is whole.
    again = httpx.get(server["url"], headers=server["headers"], timeout=120)
    assert again.content == server["expected"]
