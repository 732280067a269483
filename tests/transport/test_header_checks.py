"""``http.read_headers`` decides as ``header_problem`` does, whatever the headers (issue #29).

The consumer reads a request's headers and their problem in one pass, with a fast path for
the common request; this holds that the fast path never lets a header through that the
header-by-header check refuses, nor refuses one it lets through, with the set of names known
to be tokens cold or warm.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_app.transport import http

NAMES = st.sampled_from(
    [b"host", b"accept", b"content-type", b"mcp-session-id", b"authorization", b"x-custom",
     b"X-Mixed", b"bad name", b"bad:name", b"", b"\xe9t\xe9"]
)  # fmt: skip
VALUES = st.one_of(
    st.sampled_from([b"", b"plain", b" padded\t", b"a\x00b", b"a\rb", b"a\nb", b"\x00", b"\xff"]),
    st.binary(max_size=8),
)
RAW = st.lists(st.tuples(NAMES, VALUES), max_size=6)


def _reference(raw: list[tuple[bytes, bytes]]) -> tuple[dict[str, list[str]], str | None]:
    headers = http.parse_headers(raw)
    return headers, http.header_problem(headers)


@settings(max_examples=400, deadline=None, database=None)
@given(RAW)
def test_read_headers_finds_the_problem_header_problem_finds(
    raw: list[tuple[bytes, bytes]],
) -> None:
    expected = _reference(raw)
    # Twice: the second time the names seen are known tokens and the fast path may answer.
    assert http.read_headers(raw) == expected
    assert http.read_headers(raw) == expected


def test_a_forbidden_character_is_found_once_the_names_are_known() -> None:
    clean = [(b"host", b"127.0.0.1"), (b"accept", b"application/json")]
    assert http.read_headers(clean)[1] is None  # the names are now known tokens

    for bad in (b"a\x00", b"a\r", b"a\n"):
        problem = http.read_headers([(b"host", b"127.0.0.1"), (b"accept", bad)])[1]
        assert problem == "The accept header contains a NUL, CR or LF character"
    repeated = [(b"host", b"127.0.0.1"), (b"host", b"evil.example")]
    assert http.read_headers(repeated)[1] == "The host header was sent more than once"
    assert http.read_headers([(b"bad name", b"x")])[1] == "A header name is not an RFC 9110 token"
