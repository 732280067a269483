"""Server-Sent Events framing (WHATWG HTML, "Server-sent events"): bytes in, bytes out.

Every frame ends with a blank line. Multi-line data is split into one ``data:`` line per
line, so a payload containing newlines survives (JSON from orjson never does, but tool text
relayed verbatim might).
"""

from __future__ import annotations

import re

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


def _field(name: str, value: str) -> bytes:
    # A field value cannot carry a line break or NUL: it would end the field (or, in `id`,
    # make the browser ignore it) and let a value inject frames.
    if any(ch in value for ch in "\r\n\0"):
        raise ValueError(f"SSE {name} must not contain CR, LF or NUL")
    return f"{name}: {value}\n".encode()


def encode_event(
    data: bytes,
    *,
    event: str | None = "message",
    event_id: str | None = None,
    retry_ms: int | None = None,
) -> bytes:
    """Encode one SSE event whose ``data`` field carries ``data``."""
    parts: list[bytes] = []
    if event_id is not None:
        parts.append(_field("id", event_id))
    if event is not None:
        parts.append(_field("event", event))
    if retry_ms is not None:
        if retry_ms < 0:
            raise ValueError("SSE retry must be a non-negative number of milliseconds")
        parts.append(b"retry: %d\n" % retry_ms)
    for line in _LINE_BREAK.split(data):
        parts.append(b"data: " + line + b"\n" if line else b"data:\n")
    parts.append(b"\n")
    return b"".join(parts)


def priming_event(event_id: str, retry_ms: int) -> bytes:
    """Encode the 2025-11-25 priming event: an id, a retry hint and empty data.

    Clients record the id as their Last-Event-ID without dispatching anything (empty data),
    so they can resume by polling after the server closes the connection (SEP-1699).
    """
    return encode_event(b"", event=None, event_id=event_id, retry_ms=retry_ms)


def keepalive() -> bytes:
    """Return an SSE comment line: keeps proxies from timing out an idle stream."""
    return b": ping\n\n"
