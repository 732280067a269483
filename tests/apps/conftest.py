"""Fixtures of the MCP Apps tests: the extension's own JSON Schema, bundled (schemas/), and a
sample view."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

HERE = Path(__file__).parent
SCHEMA = json.loads((HERE / "schemas" / "ext-apps.schema.json").read_text())
SAMPLE_VIEW = (HERE / "sample_view.html").read_text()


# The published file refers to "#/$defs/__schema0" (a JSON Schema of a tool's input property,
# left out by its generator) without defining it: any value is accepted there, as its types
# say (schemas/README.md).
DEFS = {"__schema0": {}, **SCHEMA["$defs"]}


def assert_valid(definition: str, value: Any) -> None:
    """Check ``value`` against the ``$defs`` entry ``definition`` of the extension's schema."""
    schema = {**SCHEMA, "$defs": DEFS, "$ref": f"#/$defs/{definition}"}
    Draft202012Validator.check_schema(schema)
    errors = [error.message for error in Draft202012Validator(schema).iter_errors(value)]
    assert errors == [], errors
