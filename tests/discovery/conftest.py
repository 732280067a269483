"""Fixtures of the discovery tests: the bundled schemas and validators for what we serve."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker
from pytest_django.fixtures import Settings

from tests.api.conftest import token_client  # noqa: F401  (fixture)

SCHEMAS = Path(__file__).parent / "schemas"


def _validator(name: str, ref: str | None = None) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / name).read_text())
    if ref is not None:
        # The published file holds only $defs; a card is its ServerCard definition.
        schema = {**schema, "$ref": ref}
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=FormatChecker())


CARD_VALIDATOR = _validator("server-card.schema.json", "#/$defs/ServerCard")
CATALOG_VALIDATOR = _validator("ai-catalog-entries.schema.json")


def assert_valid_card(card: dict[str, Any]) -> None:
    errors = [error.message for error in CARD_VALIDATOR.iter_errors(card)]
    assert errors == [], errors


def assert_valid_catalog(catalog: dict[str, Any]) -> None:
    errors = [error.message for error in CATALOG_VALIDATOR.iter_errors(catalog)]
    assert errors == [], errors


@pytest.fixture
def site(settings: Settings) -> str:
    """A site whose public URL has a real domain name (the reverse-DNS name comes from it)."""
    settings.PUBLIC_BASE_URL = "https://mcp.example.com"
    settings.ALLOWED_HOSTS = ["testserver", "mcp.example.com"]
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return "https://mcp.example.com"
