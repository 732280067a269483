"""The "who may use it" part of the catalog admins (Tool, Resource, ResourceTemplate, Prompt)."""

from __future__ import annotations

from typing import Any

ACCESS_FIELDS = ["required_scope", "allowed_groups"]

# Shown on OAuth endpoints only; public endpoints let everyone use everything.
ACCESS_FIELDSET: tuple[str, dict[str, Any]] = (
    "Who may use it (OAuth endpoints)",
    {"fields": ACCESS_FIELDS},
)
