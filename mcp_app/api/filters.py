"""Filtering by exact field values named in the view's ``filter_fields`` (``?kind=http``).

Boolean filters (``boolean_filters``, ``__isnull`` lookups) take true/false (or 1/0) and are
typed boolean in the schema.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework.exceptions import ValidationError
from rest_framework.filters import BaseFilterBackend
from rest_framework.request import Request

_BOOLEANS = {"true": True, "false": False, "1": True, "0": False}


class FieldFilter(BaseFilterBackend):
    def filter_queryset(
        self, request: Request, queryset: QuerySet[Any], view: Any
    ) -> QuerySet[Any]:
        for name, lookup in getattr(view, "filter_fields", {}).items():
            given = request.query_params.get(name)
            if given is None:
                continue
            value: str | bool = given
            if _is_boolean(view, name, lookup):
                if given.lower() not in _BOOLEANS:
                    raise ValidationError({name: ["Expected true or false."]})
                value = _BOOLEANS[given.lower()]
            queryset = queryset.filter(**{lookup: value})
        return (
            queryset.distinct()
            if "__" in "".join(getattr(view, "filter_fields", {}).values())
            else queryset
        )

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            {
                "name": name,
                "required": False,
                "in": "query",
                "description": f"Only rows whose {lookup.replace('__', ' ')} is this value.",
                "schema": {"type": "boolean" if _is_boolean(view, name, lookup) else "string"},
            }
            for name, lookup in getattr(view, "filter_fields", {}).items()
        ]


def _is_boolean(view: Any, name: str, lookup: str) -> bool:
    return lookup.endswith("__isnull") or name in getattr(view, "boolean_filters", ())
