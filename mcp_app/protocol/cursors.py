"""Opaque, tamper-evident, stable pagination cursors for the four list methods.

A cursor says "continue after key K of list L": keyset pagination over the snapshot's sorted
lists, so a page boundary survives rows being added or removed between requests (an offset
would skip or repeat items), and finding the next page is a binary search.

Wire form: ``base64url(payload) "." base64url(HMAC-SHA256(secret, payload)[:16])`` with a
JSON payload ``{"l": list, "k": key}``. The MAC makes a forged or edited cursor an
``InvalidParams`` (spec SHOULD, basic/utilities/pagination) and binds a cursor to its list,
so a ``tools/list`` cursor cannot page ``prompts/list``.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import hashlib
import hmac
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import orjson

from mcp_app.protocol.errors import InvalidParams

T = TypeVar("T")
_MAC_BYTES = 16


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: bytes, payload: bytes) -> bytes:
    return hmac.new(secret, payload, hashlib.sha256).digest()[:_MAC_BYTES]


def encode_cursor(list_name: str, after_key: str, secret: bytes) -> str:
    """Return the cursor that resumes ``list_name`` after ``after_key``."""
    payload = orjson.dumps({"l": list_name, "k": after_key})
    return f"{_b64(payload)}.{_b64(_mac(secret, payload))}"


def decode_cursor(cursor: Any, list_name: str, secret: bytes) -> str:
    """Return the key a cursor of ``list_name`` resumes after.

    Raises:
        InvalidParams: the cursor is not a string, was not issued by this server with this
            secret, or belongs to another list.
    """
    invalid = InvalidParams("Invalid cursor")
    if not isinstance(cursor, str) or cursor.count(".") != 1:
        raise invalid
    body, mac = cursor.split(".")
    try:
        payload = _unb64(body)
        given = _unb64(mac)
    except (binascii.Error, ValueError):
        raise invalid from None
    if not hmac.compare_digest(given, _mac(secret, payload)):
        raise invalid
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError:
        raise invalid from None
    if not isinstance(data, dict) or data.get("l") != list_name:
        raise invalid
    if not isinstance(data.get("k"), str):
        raise invalid
    key: str = data["k"]
    return key


def paginate(
    items: Sequence[T],
    key: Callable[[T], str],
    cursor: str | None,
    *,
    list_name: str,
    page_size: int,
    secret: bytes,
) -> tuple[Sequence[T], str | None]:
    """Return one page of ``items`` (sorted by ``key``) and the cursor of the next, if any.

    ``None`` or an empty string starts at the beginning: this server never issues an empty
    cursor, and some clients send ``""`` for "first page". Cost is O(log n + page).

    Raises:
        InvalidParams: the cursor is invalid (see ``decode_cursor``).
    """
    start = 0
    if cursor:
        after = decode_cursor(cursor, list_name, secret)
        start = bisect.bisect_right(items, after, key=key)
    size = max(page_size, 1)
    page = items[start : start + size]
    if start + size < len(items):
        return page, encode_cursor(list_name, key(page[-1]), secret)
    return page, None
