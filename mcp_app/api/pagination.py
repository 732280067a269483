"""Cursor pagination: opaque, stable cursors that do not skip or repeat rows under writes."""

from __future__ import annotations

import re
from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import CursorPagination


class Cursor(CursorPagination):
    page_size_query_param = "page_size"
    max_page_size = 1000

    def get_page_size(self, request: Any) -> int | None:
        # DRF falls back to the default for a page_size it cannot read: a client asking for
        # "ten" or -1 rows would get 100 without knowing why. More than max_page_size is
        # capped, as documented.
        values = request.query_params.getlist(self.page_size_query_param)
        if values and not (len(values) == 1 and _PAGE_SIZE.fullmatch(values[0])):
            raise ValidationError(
                {f"query.{self.page_size_query_param}": ["Expected one positive integer."]}
            )
        size: int | None = super().get_page_size(request)
        return size

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters: list[dict[str, Any]] = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1}
        return parameters


# A positive integer in ASCII digits, short enough for int() (which refuses 4,300 digits).
_PAGE_SIZE = re.compile("[1-9][0-9]{0,99}")
