"""Cursor pagination: opaque, stable cursors that do not skip or repeat rows under writes."""

from __future__ import annotations

from rest_framework.pagination import CursorPagination


class Cursor(CursorPagination):
    page_size_query_param = "page_size"
    max_page_size = 1000
