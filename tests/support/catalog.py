"""Committed catalog data for live-server tests (the server runs in another process)."""

from __future__ import annotations

from typing import Any

from mcp_app.models import Endpoint, Tool


def make_endpoint(slug: str, **fields: Any) -> Endpoint:
    """An endpoint for tests; public (no OAuth) unless ``auth_mode`` says otherwise."""
    fields.setdefault("title", f"{slug} endpoint")
    fields.setdefault("auth_mode", Endpoint.AuthMode.PUBLIC)
    return Endpoint.objects.create(slug=slug, **fields)


def make_python_tool(name: str, function: str, **fields: Any) -> Tool:
    fields.setdefault("description", f"Runs the built-in {function} function.")
    tool = Tool(name=name, kind=Tool.Kind.PYTHON, config={"function": function}, **fields)
    tool.full_clean()
    tool.save()
    return tool


def echo_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
    }
