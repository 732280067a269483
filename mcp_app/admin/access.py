"""The "who may use it" part of the catalog admins (Tool, Resource, ResourceTemplate, Prompt)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # django-stubs' type of a fieldset's options (a TypedDict); stubs only, never imported.
    from django.contrib.admin.options import _FieldOpts

ACCESS_FIELDS = ("required_scope", "allowed_groups")

# Shown on OAuth endpoints only; public endpoints let everyone use everything.
ACCESS_FIELDSET: tuple[str, _FieldOpts] = (
    "Who may use it (OAuth endpoints)",
    {"fields": ACCESS_FIELDS},
)
