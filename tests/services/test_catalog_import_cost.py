"""What a catalog import costs grows with what it changes, not with the catalog
(services/catalog_io.py, services/catalog_changes.py ``catalog_changes_coalesced``).

Counted in queries and version bumps, never in seconds: bench/catalog_bulk.py measures time.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mcp_app.models import Endpoint, Tool
from mcp_app.services.catalog_io import catalog_import


def document(tools: int, *, description: str = "Says hello.") -> dict[str, Any]:
    return {
        "format": "mcphost-catalog/1",
        "endpoints": [{"slug": "bulk", "auth_mode": "public"}],
        "tools": [
            {
                "name": f"tool_{n:03d}",
                "description": description,
                "kind": "template",
                "config": {"template": "Hello {{ name }}"},
                "input_schema": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                    "required": ["name"],
                },
                "endpoints": ["bulk"],
                "allowed_groups": [],
            }
            for n in range(tools)
        ],
    }


def queries_of(document: dict[str, Any]) -> int:
    with CaptureQueriesContext(connection) as captured:
        catalog_import(document=document)
    return len(captured.captured_queries)


@pytest.mark.django_db
def test_an_unchanged_reimport_costs_the_same_for_ten_tools_as_for_sixty() -> None:
    small, large = document(10), document(60)
    catalog_import(document=large)
    assert not catalog_import(document=small).changes
    assert queries_of(small) == queries_of(large)


@pytest.mark.django_db
def test_an_import_bumps_each_endpoint_version_once() -> None:
    catalog_import(document=document(1))
    before = Endpoint.objects.get(slug="bulk").catalog_version
    with CaptureQueriesContext(connection) as captured:
        report = catalog_import(document=document(30, description="Reworded."))
    assert len(report.changes) == 1 + 29 * 2  # 1 updated, 29 created and attached
    assert Endpoint.objects.get(slug="bulk").catalog_version == before + 1
    bumps = [q for q in captured.captured_queries if '"catalog_version" =' in q["sql"]]
    assert len(bumps) == 1
    assert Tool.objects.filter(description="Reworded.").count() == 30
