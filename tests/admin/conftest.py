"""Helpers for admin tests: cheap password hashing, form payloads as a browser posts them, and
the tool the history tests edit (``greet``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pytest_django.fixtures import Settings

from mcp_app.models import Endpoint, Tool
from mcp_app.services.catalog_writes import tool_create


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Settings) -> None:
    """admin_client's user is created with a password; hash it cheaply."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def tool_payload(**overrides: Any) -> dict[str, Any]:
    """Return the POST data of a valid template tool; JSON fields may be given as objects."""
    data: dict[str, Any] = {
        "name": "greet",
        "title": "",
        "description": "Greets someone.",
        "enabled": "on",
        "kind": "template",
        "function": "",
        "template": "Hello {{ name }}!",
        "template_output": "text",
        "input_schema": '{"type": "object", "properties": {"name": {"type": "string"}}}',
        "output_schema": "",
        "read_only_hint": "unknown",
        "destructive_hint": "unknown",
        "idempotent_hint": "unknown",
        "open_world_hint": "unknown",
        "icons": "[]",
        "meta": "{}",
        "execution_mode": "inline",
        "task_support": "optional",
        "soft_time_limit": "",
        "hard_time_limit": "",
    }
    for key, value in overrides.items():
        data[key] = value if isinstance(value, str | list) else json.dumps(value)
    return data


@pytest.fixture
def greet(endpoint: Endpoint) -> Tool:
    """A template tool published on ``endpoint``: the row the history tests edit and revert."""
    return tool_create(
        name="greet",
        kind=Tool.Kind.TEMPLATE,
        config={"template": "Hello {{ name }}!", "output": "text"},
        description="Greets someone.",
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        endpoints=[endpoint],
    )
