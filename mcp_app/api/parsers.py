"""What the management API refuses before any view sees it: request bodies and query strings
holding what the server cannot store or walk.

Registered as the API's parsers (``REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]``), so every
route and every body format is checked in one place:

- **NUL and unpaired surrogates.** PostgreSQL ``text`` and ``jsonb`` refuse U+0000 and a lone
  surrogate cannot be encoded, so a value holding either anywhere (a key, a nested value, a
  group name) would fail when written: 400 naming its path, as the MCP path does
  (``protocol.storable``).
- **Nesting.** Objects and arrays nested deeper than ``MAX_DEPTH`` levels are refused (400):
  schema checks, catalog imports and JSON columns walk values recursively. JSON is read by
  orjson, which never recurses in Python, so even 10,000 levels cost no stack.
- **Size.** A JSON or form body larger than Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (2.5 MB
  unless set) and a multipart upload larger than ``MAX_UPLOAD_BYTES`` are refused with 413
  (``PayloadTooLarge``) before they are read.

Query strings get the same NUL check (``check_query``), repeated parameters included.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

import orjson
from django.conf import settings
from django.http import QueryDict
from rest_framework import parsers, status
from rest_framework.exceptions import APIException, ErrorDetail, ParseError, ValidationError

# Objects and arrays nested in one another, the body's own object counting as the first:
# far more than any schema, config or catalog document needs, far less than what exhausts
# a recursive walk.
MAX_DEPTH: Final = 64
# A multipart upload (the catalog import's ``file``): room for an export carrying resource
# files, which are embedded as base64.
MAX_UPLOAD_BYTES: Final = 64 * 1024 * 1024


class PayloadTooLarge(APIException):
    # Here, not in errors.py: DRF's views import the parsers, and errors.py imports DRF's views.
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is larger than this server accepts (docs/api.md, Limits)."
    default_code = "too_large"


_UNSTORABLE: Final = re.compile("[\x00\ud800-\udfff]")
_CANNOT_STORE: Final = "a NUL character or an unpaired surrogate, which this server cannot store"
UNSTORABLE_MESSAGE: Final = f"The value holds {_CANNOT_STORE}."
SURROGATE_MESSAGE: Final = "A string holds an unpaired surrogate, which this server cannot store."
TOO_DEEP_MESSAGE: Final = f"Objects and arrays are nested deeper than {MAX_DEPTH} levels."


def check_value(value: Any, path: str = "") -> None:
    """Refuse ``value`` (parsed JSON or form data) holding unstorable text or nested too deep.

    The walk uses its own stack. ``path`` names ``value`` in the error (dotted, list items
    by index, as every API error path).

    Raises:
        ValidationError: naming the first offending member's path.
    """
    stack: list[tuple[Any, str, int]] = [(value, path, 1)]
    while stack:
        node, where, depth = stack.pop()
        if isinstance(node, str):
            if _UNSTORABLE.search(node):
                raise _refused(where, UNSTORABLE_MESSAGE, "unstorable")
            continue
        members: Iterable[tuple[Any, Any]]
        if isinstance(node, Mapping):
            members = node.items()
        elif isinstance(node, list):
            members = ((str(index), item) for index, item in enumerate(node))
        else:
            continue
        if depth > MAX_DEPTH:
            raise _refused(where, TOO_DEEP_MESSAGE, "too_deep")
        for key, member in members:
            name = str(key)
            if _UNSTORABLE.search(name):
                raise _refused(where, f"A member name holds {_CANNOT_STORE}.", "unstorable")
            stack.append((member, f"{where}.{name}" if where else name, depth + 1))


def check_query(query: QueryDict) -> None:
    """Refuse a query string any of whose names or values holds NUL (repeated ones too).

    Raises:
        ValidationError: naming the parameter.
    """
    for name, values in query.lists():
        if _UNSTORABLE.search(name) or any(_UNSTORABLE.search(value) for value in values):
            raise _refused(f"query.{name}", f"The URL holds {_CANNOT_STORE}.", "unstorable")


def loads(text: bytes | str) -> Any:
    """Parse JSON text with orjson and check it (``check_value``).

    Raises:
        ParseError: not JSON (or not UTF-8).
        ValidationError: unstorable text, or nested deeper than ``MAX_DEPTH``.
    """
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):
            raise _refused("", TOO_DEEP_MESSAGE, "too_deep") from None
        if "surrogate" in str(exc):
            raise _refused("", SURROGATE_MESSAGE, "unstorable") from None
        raise ParseError(f"JSON parse error - {exc}") from None
    check_value(data)
    return data


def _refused(path: str, message: str, code: str) -> ValidationError:
    # Paths go into the answer: keep a deep one short.
    shown = path if len(path) <= 200 else path[:200] + "..."
    return ValidationError({shown: [ErrorDetail(message, code=code)]})


def _content_length(parser_context: Mapping[str, Any] | None) -> int:
    request = (parser_context or {}).get("request")
    meta = getattr(request, "META", {})
    try:
        return int(meta.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


class JsonParser(parsers.JSONParser):
    """JSON read by orjson (UTF-8, no NaN or Infinity, 64-bit numbers), then checked."""

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and _content_length(parser_context) > limit:
            raise PayloadTooLarge()
        return loads(stream.read() if stream is not None else b"")


class FormParser(parsers.FormParser):
    """URL-encoded forms (the browsable API), checked as JSON bodies are."""

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        data = super().parse(stream, media_type, parser_context)
        _check_form(data)
        return data


class MultiPartParser(parsers.MultiPartParser):
    """Multipart forms (the catalog import's ``file``): bounded in size; fields checked."""

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        if _content_length(parser_context) > MAX_UPLOAD_BYTES:
            raise PayloadTooLarge()
        parsed = super().parse(stream, media_type, parser_context)
        _check_form(parsed.data)
        for name, uploads in parsed.files.lists():
            for upload in uploads:
                check_value({name: upload.name or ""})
        return parsed


def _check_form(data: QueryDict) -> None:
    check_value({name: values[0] if len(values) == 1 else values for name, values in data.lists()})
