"""Which client strings the server can store: no NUL, no unpaired surrogate.

PostgreSQL ``text`` and ``jsonb`` refuse U+0000, and orjson refuses to encode a lone
surrogate (U+D800..U+DFFF), so a value holding either fails when it is written: the client
would get an internal error for what is bad input. Values the server keeps (a session's
client info and capabilities, subscription URIs, the request id, progress token and
arguments of a background call, task ids it looks up) are checked here, at the protocol
boundary, and refused with a clear error; every other string passes untouched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import orjson

from mcp_app.protocol.errors import InvalidParams

_UNSTORABLE: Final = re.compile("[\x00\ud800-\udfff]")


def is_storable_text(text: str) -> bool:
    """Whether ``text`` holds neither NUL nor an unpaired surrogate."""
    return _UNSTORABLE.search(text) is None


def unstorable_path(value: Any, path: str) -> str | None:
    """Return the path of the first string (or object key) in ``value`` that cannot be stored.

    ``path`` names ``value`` itself (``"params.clientInfo"``); members are appended as
    ``.key`` and items as ``[i]``. None means every string in ``value`` is storable. The walk
    uses its own stack, so a deeply nested body cannot exhaust Python's recursion limit.
    """
    if _plainly_storable(value):
        return None
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            if not is_storable_text(node):
                return where
        elif isinstance(node, Mapping):
            members = []
            for key, member in node.items():
                key_text = str(key)
                if not is_storable_text(key_text):
                    return f"{where} (a member name)"
                members.append((member, f"{where}.{_printable(key_text)}"))
            stack.extend(reversed(members))
        elif isinstance(node, list):
            stack.extend(reversed([(item, f"{where}[{i}]") for i, item in enumerate(node)]))
    return None


def _plainly_storable(value: Any) -> bool:
    # Most values are plain JSON with nothing to find: one pass in C says so. orjson refuses
    # a lone surrogate (and keys that are not strings), and writes U+0000 only as its
    # escape; any of these leaves the answer to the walk, which also names the path.
    try:
        encoded = orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        return False
    return b"\\u0000" not in encoded


def plainly_storable(*values: Any) -> bool:
    """Whether every string in all of ``values`` is storable, told in one pass in C; False
    means "ask ``require_storable`` of each", never "unstorable"."""
    return _plainly_storable(values)


def require_storable(value: Any, path: str) -> None:
    """Refuse ``value`` when any string in it holds NUL or an unpaired surrogate.

    Raises:
        InvalidParams: naming the first such string's path.
    """
    found = unstorable_path(value, path)
    if found is not None:
        raise InvalidParams(
            f"{found} contains a NUL character or an unpaired surrogate, which this server "
            "cannot store"
        )


def _printable(key: str) -> str:
    # Keys go into an error message: keep them short.
    return key if len(key) <= 64 else key[:64] + "..."
