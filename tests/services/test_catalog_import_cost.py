"""What a catalog import costs grows with what it changes, not with the catalog
(services/catalog_io.py, services/catalog_changes.py ``catalog_changes_coalesced``).

Counted in queries and version bumps, never in seconds: bench/catalog_bulk.py measures time.
"""

from __future__ import annotations

import json
import tracemalloc
from collections import Counter
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import Group
from django.db import connection
from django.db.models import Model
from django.test.utils import CaptureQueriesContext
from jsonschema import Draft202012Validator

from bench import catalog_bulk
from mcp_app.models import Endpoint, Tool
from mcp_app.models.fields import validate_input_schema
from mcp_app.protocol.metaschema import FAST_2020_12
from mcp_app.services import catalog_yaml
from mcp_app.services.catalog_io import (
    BULK_CHUNK,
    catalog_dump,
    catalog_export,
    catalog_import,
)
from mcp_app.services.catalog_writes import prompt_create


def document(
    tools: int,
    *,
    description: str = "Says hello.",
    slug: str = "bulk",
    groups: bool = False,
    prefix: str = "tool",
) -> dict[str, Any]:
    return {
        "format": "mcphost-catalog/1",
        "endpoints": [{"slug": slug, "auth_mode": "public"}],
        "tools": [
            {
                "name": f"{prefix}_{n:03d}",
                "description": description,
                "kind": "template",
                "config": {"template": "Hello {{ name }}"},
                "input_schema": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                    "required": ["name"],
                },
                "endpoints": [slug],
                "allowed_groups": ["callers"] if groups and n % 2 else [],
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


@pytest.mark.django_db
def test_a_fresh_import_costs_the_same_for_twenty_tools_as_for_two_hundred() -> None:
    # New tools are written in bulk (catalog_writes.catalog_rows_create), a chunk at a time.
    assert BULK_CHUNK > 200
    Group.objects.create(name="callers")
    # Names of their own: tools are matched by name, and a known one is an update.
    small = queries_of(document(20, slug="small", groups=True, prefix="small"))
    large = queries_of(document(200, slug="large", groups=True, prefix="large"))
    assert Tool.objects.filter(endpoints__slug="large").count() == 200
    assert small == large


@pytest.mark.django_db
def test_an_export_costs_the_same_for_five_rows_as_for_thirty() -> None:
    def exported(rows: int) -> int:
        catalog_import(document=document(rows, slug=f"export-{rows}", groups=True))
        for n in range(rows):
            prompt_create(
                name=f"prompt_{rows}_{n}",
                description="Asks.",
                arguments=[{"name": "topic"}],
                messages=[{"role": "user", "text": "About {topic}"}],
                endpoints=Endpoint.objects.filter(slug=f"export-{rows}"),
            )
        with CaptureQueriesContext(connection) as captured:
            document_out = catalog_export(endpoint_slugs=[f"export-{rows}"])
        assert len(document_out["tools"]) == len(document_out["prompts"]) == rows
        return len(captured.captured_queries)

    assert exported(5) == exported(30)


@pytest.mark.django_db
def test_an_import_checks_each_distinct_input_schema_once(monkeypatch: Any) -> None:
    # The metaschema check was most of a new tool's cost: planning and the write path both
    # validate the row, and many tools share a schema. Counted, not timed: each check is a
    # walk of the schema against a metaschema (jsonschema's, or protocol/metaschema.py's
    # one-document twin), which both start with iter_errors.
    checked: list[str] = []
    iter_errors = Draft202012Validator.iter_errors
    metaschemas = (Draft202012Validator.META_SCHEMA, FAST_2020_12 and FAST_2020_12.schema)

    def counted(self: Any, instance: Any, *args: Any, **kwargs: Any) -> Any:
        if any(self.schema is schema for schema in metaschemas):
            checked.append(json.dumps(instance, sort_keys=True))
        return iter_errors(self, instance, *args, **kwargs)

    monkeypatch.setattr(Draft202012Validator, "iter_errors", counted)
    tools = document(4)
    for n, entry in enumerate(tools["tools"]):
        entry["input_schema"]["properties"]["name"]["description"] = f"Whom {n % 3} greets."

    catalog_import(document=tools)

    assert Tool.objects.filter(endpoints__slug="bulk").count() == 4
    assert sorted(Counter(checked).values()) == [1, 1, 1]
    # Outside an import every check runs: a form or an API save checks its own row.
    validate_input_schema(tools["tools"][0]["input_schema"])
    validate_input_schema(tools["tools"][0]["input_schema"])
    assert len(checked) == 5


@pytest.mark.django_db
def test_an_import_holds_each_new_tool_to_its_models_rules_once(monkeypatch: Any) -> None:
    # Planning checks each new tool and catalog_rows_create checks it again as it writes it;
    # the second time, the rules reading its values alone are not run again (they were a
    # fifth of a fresh import). Counted, not timed.
    cleaned: list[Any] = []
    full_clean = Model.full_clean

    def counted(self: Model, *args: Any, **kwargs: Any) -> None:
        if isinstance(self, Tool):
            cleaned.append(self.name)
        full_clean(self, *args, **kwargs)

    monkeypatch.setattr(Model, "full_clean", counted)
    catalog_import(document=document(5))

    assert Tool.objects.filter(endpoints__slug="bulk").count() == 5
    assert sorted(Counter(cleaned).values()) == [1] * 5


def test_a_whole_document_dump_holds_its_text_not_a_node_per_value() -> None:
    # catalog_dump writes through the export's writer (services/catalog_yaml.py): at its
    # peak it holds the text about twice (the entries' pieces, then joined). PyYAML's
    # representer, which it used before, held a node per value: 27 times the text here.
    generated = catalog_bulk.document(tools=2000, endpoints=10)
    tracemalloc.start()
    try:
        text = catalog_dump(generated)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert text == catalog_yaml.dump(generated)
    assert peak < 4 * len(text), (peak, len(text))
    with pytest.raises(yaml.representer.RepresenterError):
        catalog_dump({"tools": [object()]})
