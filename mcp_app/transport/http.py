"""HTTP-level checks of an MCP request: headers, media types, Host and Origin.

Channels runs no Django middleware, so DNS-rebinding protection (Host and Origin, all revisions,
basic/transports "Security Warning") is done here, for every MCP request.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from operator import itemgetter
from urllib.parse import urlsplit

from django.http.request import split_domain_port, validate_host

Headers = Mapping[str, Sequence[str]]

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
# Headers that carry one value. Sent twice, which copy counts differs between this code, a
# proxy in front and the client's intent (`Host: ok` then `Host: evil`), so the request is
# refused instead of guessed at. Accept and the rest may repeat: their values are combined.
SINGLETON_HEADERS = (
    "host", "content-type", "content-length", "mcp-session-id", "mcp-protocol-version",
    "mcp-method", "mcp-name", "authorization", "origin", "last-event-id",
)  # fmt: skip
_SINGLETONS = frozenset(SINGLETON_HEADERS)
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9a-z]+")


def parse_headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, list[str]]:
    """Return lower-cased header names mapped to every value they were sent with, in order.

    Leading and trailing whitespace is not part of a field value (RFC 9110 section 5.5);
    servers differ in whether they strip it (Daphne does, uvicorn's httptools does not), so it
    is stripped here and an ``Mcp-Name: "  echo  "`` compares equal to ``echo``.
    """
    headers: dict[str, list[str]] = {}
    for name, value in raw:
        text = value.decode("latin-1").strip(" \t")
        key = _NAMES.get(name)
        if key is None:
            key = _name(name)
        found = headers.get(key)
        if found is None:
            headers[key] = [text]
        else:
            found.append(text)
    return headers


# Clients send the same dozen header names on every request: each is decoded once (bounded).
_NAMES: dict[bytes, str] = {}


def _name(raw: bytes) -> str:
    name = raw.decode("latin-1").lower()
    if len(_NAMES) < 1024:
        _NAMES[raw] = name
    return name


def read_headers(raw: Iterable[tuple[bytes, bytes]]) -> tuple[dict[str, list[str]], str | None]:
    """``parse_headers(raw)``, and ``header_problem`` of the result.

    The common request is told in C: every name sent once and seen before to be a token, and
    no value holding NUL, CR or LF (found in all the values joined). Any other request is
    looked at header by header, as ``header_problem`` does, so the answer is the same.
    """
    headers = parse_headers(raw)
    if (
        # parse_headers makes no empty list: the sum equals the count only when each is one.
        sum(map(len, headers.values())) == len(headers)
        and _TOKEN_NAMES.issuperset(headers)
        and _FORBIDDEN_IN_VALUE.search("".join(map(_only_value, headers.values()))) is None
    ):
        return headers, None
    return headers, header_problem(headers)


# Header names checked to be RFC 9110 tokens (bounded: the same dozen arrive every time).
_TOKEN_NAMES: set[str] = set()
_FORBIDDEN_IN_VALUE = re.compile("[\x00\r\n]")
_only_value = itemgetter(0)


def header_problem(headers: Headers) -> str | None:
    """Return why the request's headers are unusable (a repeated singleton, a NUL), or None."""
    for name, values in headers.items():
        if len(values) > 1 and name in _SINGLETONS:
            return f"The {name} header was sent more than once"
        if not _is_token(name):
            return "A header name is not an RFC 9110 token"
        if len(_TOKEN_NAMES) < 1024:
            _TOKEN_NAMES.add(name)
        for value in values:
            # RFC 9110 section 5.5: a field value holding CR, LF or NUL is invalid and dangerous.
            if "\x00" in value or "\r" in value or "\n" in value:
                return f"The {name} header contains a NUL, CR or LF character"
    return None


@lru_cache(maxsize=1024)
def _is_token(name: str) -> bool:
    # The same dozen names arrive on every request.
    return _TOKEN.fullmatch(name) is not None


def first(headers: Headers, name: str) -> str | None:
    values = headers.get(name)
    return values[0] if values else None


def _media_types(values: Sequence[str]) -> list[str]:
    types = []
    for value in values:
        for part in value.split(","):
            media = part.split(";", 1)[0].strip().lower()
            if media:
                types.append(media)
    return types


# Clients send the same Accept and Content-Type values on every request: each distinct one is
# parsed once (bounded).
@lru_cache(maxsize=256)
def _accepted(values: tuple[str, ...]) -> frozenset[str]:
    return frozenset(_media_types(values))


def accepts(headers: Headers, media_type: str, *, explicit: bool = False) -> bool:
    """Whether the Accept header admits ``media_type`` (wildcards count).

    No Accept header admits everything, unless ``explicit``: a stream that only makes sense
    as SSE must be asked for.
    """
    values = headers.get("accept")
    if not values:
        return not explicit
    types = _accepted(tuple(values))
    major = media_type.split("/", 1)[0]
    return media_type in types or "*/*" in types or f"{major}/*" in types


def _weighted_media_types(values: Sequence[str]) -> list[tuple[str, float]]:
    """The Accept header's media ranges with their q values (1 when absent or unreadable)."""
    weighted = []
    for value in values:
        for part in value.split(","):
            media, *params = (piece.strip() for piece in part.split(";"))
            if not media:
                continue
            q = 1.0
            for param in params:
                name, _, number = param.partition("=")
                if name.strip().lower() == "q":
                    try:
                        q = float(number)
                    except ValueError:
                        q = 1.0
            weighted.append((media.lower(), q))
    return weighted


def prefers(headers: Headers, media_type: str, *, over: str) -> bool:
    """Whether the client asked for ``media_type`` ahead of ``over``, both named exactly.

    A higher q value wins; between equal ones the client's own order decides (the first
    listed), which is how clients that list ``text/event-stream`` first ask for a stream.
    """
    return _prefers(tuple(headers.get("accept") or ()), media_type, over)


@lru_cache(maxsize=256)
def _prefers(values: tuple[str, ...], media_type: str, over: str) -> bool:
    ranked = _weighted_media_types(values)
    positions = {media: index for index, (media, _q) in reversed(list(enumerate(ranked)))}
    weights = dict(reversed(ranked))
    if media_type not in positions or over not in positions:
        return False
    if weights[media_type] != weights[over]:
        return weights[media_type] > weights[over]
    return positions[media_type] < positions[over]


def is_json_content(headers: Headers) -> bool:
    values = headers.get("content-type")
    return values is not None and len(values) > 0 and _is_json_type(values[0])


@lru_cache(maxsize=256)
def _is_json_type(value: str) -> bool:
    return _media_types([value]) == ["application/json"]


def host_allowed(host_header: str | None, allowed_hosts: Sequence[str]) -> bool:
    """Check the Host header against Django-style allowed host patterns, ignoring the port."""
    if not host_header:
        return False
    return _host_allowed(host_header, tuple(allowed_hosts))


@lru_cache(maxsize=1024)
def _host_allowed(host_header: str, allowed_hosts: tuple[str, ...]) -> bool:
    # Bounded: a client inventing Host values only evicts others, each re-checked when seen.
    domain, _port = split_domain_port(host_header)
    if not domain:
        return False
    if domain in LOOPBACK_HOSTS or f"[{domain}]" in LOOPBACK_HOSTS:
        return "*" in allowed_hosts or any(h in LOOPBACK_HOSTS for h in allowed_hosts)
    return validate_host(domain, allowed_hosts)


def origin_allowed(origin: str | None, public_origin: str, extra_origins: Sequence[str]) -> bool:
    """An absent Origin is a non-browser client; a present one must be loopback or listed."""
    if origin is None:
        return True
    origin = origin.strip().lower().rstrip("/")
    if origin == public_origin.lower() or origin in (o.lower().rstrip("/") for o in extra_origins):
        return True
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or parts.path or parts.query:
        return False
    return (parts.hostname or "") in LOOPBACK_HOSTS
