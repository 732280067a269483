"""The catalog's YAML entry writer (services/catalog_yaml.py ``entry_text``) writes every
entry as PyYAML does (``dump([entry])``), to the byte: generated entries of strings that
YAML quotes, folds, escapes or writes as blocks, at every nesting the catalog has."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_app.services.catalog_yaml import dump, entry_text

# Characters that decide how YAML writes a string: indicators, quotes, spaces, breaks,
# tabs, controls, non-ASCII, and words the resolver reads as other types.
TRICKY = st.sampled_from(
    list("aZ09-?:#,[]{}&*!|>'\"%@`.~_= \t\n\r\x00\x85\u2028\u2029é✓\ufeff\u00a0\ufffe") + [
        "\U0001f600", "\ud7ff", "\ue000", "\x7f", "\x9f",
        "true", "no", "null", "~", "1.5", "0x1f", "2001-12-14", "<<", "---", "...", ": ",
        " #", "word ",
    ]
)  # fmt: skip
# Printable ASCII only: the strings the writer writes itself rather than asking PyYAML.
ASCII = st.sampled_from(
    list("aZ09-?:#,[]{}&*!|>'\"%@`.~_= ") + ["true", "null", "1.5", "---", "...", ": ", " #"]
)
STRINGS = st.one_of(
    st.lists(ASCII, max_size=8).map("".join),
    st.lists(TRICKY, max_size=12).map("".join),
    # Long enough to reach the width at any column: folded at a space.
    st.lists(
        st.sampled_from(["lorem", "ipsum", " ", "  ", ": x", "'q'", "é", "\n"]), max_size=60
    ).map("".join),
    st.text(max_size=20),
)
SCALARS = st.one_of(STRINGS, st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False))
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(STRINGS, inner, max_size=3),
    max_leaves=12,
)


SETTINGS = settings(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


@settings(SETTINGS, max_examples=1500)
@given(st.dictionaries(STRINGS, VALUES, min_size=1, max_size=5))
def test_an_entry_is_written_as_pyyaml_writes_it(entry: dict[str, Any]) -> None:
    assert entry_text(entry) == dump([entry])


@settings(SETTINGS, max_examples=300)
@given(STRINGS, st.integers(min_value=1, max_value=90), st.integers(min_value=0, max_value=5))
def test_a_string_is_written_as_pyyaml_writes_it_at_any_column_and_depth(
    value: str, key_length: int, depth: int
) -> None:
    entry: dict[str, Any] = {"k" * key_length: value, "list": [value, [value]]}
    for _ in range(depth):
        entry = {"name": "x", "nested": entry, "items": [entry]}

    assert entry_text(entry) == dump([entry])


# Strings at each rule of plain and single-quoted writing.
EDGES = [
    "",
    " ",
    "x",
    " x",
    "x ",
    "a #b",
    "a#b",
    "x #",
    "#x",
    "- x",
    "-x",
    "-",
    "? x",
    "?x",
    "?",
    ": x",
    ":x",
    ":",
    "x:",
    "x: y",
    "x:y",
    "---",
    "---x",
    "...x",
    "..",
    "'x",
    "x'y",
    '"x',
    'x"',
    "@x",
    "`x",
    "%x",
    "&x",
    "*x",
    "!x",
    "|x",
    ">x",
    ",x",
    "x,y",
    "[x",
    "x]",
    "{x",
    "x}",
    "~",
    "null",
    "Null",
    "true",
    "True",
    "yes",
    "no",
    "on",
    "off",
    "y",
    "n",
    "1",
    "-1",
    "+1",
    "1.0",
    "1e3",
    "1_000",
    "0o7",
    "0x1f",
    "0b1",
    "1:20",
    ".inf",
    ".nan",
    "2001-12-14",
    "<<",
    "=",
    "x=y",
    "tool_00001",
    "https://x.example/{u}?a=b#c",
    "Hello {{ name }}!",
    "Zürich",
    "— dash",
    "é: x",
    "\u00a0x",
    "x\u00a0",
    "\ufeffx",
    "x\u2028y",
    "x\x85y",
    "\U0001f600",
    "é" * 70,  # as a key, 140 bytes: past a simple key's 128
    "é" * 130,
]


@pytest.mark.parametrize("value", EDGES)
def test_each_rule_of_plain_and_quoted_writing_is_pyyamls(value: str) -> None:
    # As a value (under a key, in lists, in a nested mapping), then as a key.
    as_value = {"k": value, "in": [value, [value], {"k": value}], "v": value}
    as_key = {"k": 1, value: 2, "in": [{value: 3}]}
    for entry in (as_value, as_key):
        assert entry_text(entry) == dump([entry])


def test_a_string_reaching_the_width_is_folded_as_pyyaml_folds_it() -> None:
    # Plain ("ab"), quoted for a quote or an indicator, with runs of spaces, and spaces at
    # a quoted string's ends: at every column, under a key and in a list, at two depths.
    for key_length in range(1, 40):
        for words in range(1, 60):
            for word in ("ab", "a'b", "a: b", "ab  c", "abcdefghijklmnopqrstu", "é—ü", "ü'é"):
                for value in (" ".join([word] * words), " " + " ".join([word] * words) + " "):
                    entry = {"k" * key_length: value, "items": [value, [value]]}
                    for nested in (entry, {"n": entry, "m": [entry]}):
                        assert entry_text(nested) == dump([nested]), (key_length, value)


def test_values_only_pyyaml_writes_are_left_to_it() -> None:
    # Not a mapping, keys not strings, a tuple: the whole entry is PyYAML's.
    for entry in ({}, [], "x", {1: "x"}, {"k" * 130: 1}, {"t": (1, 2)}, {"\t": 1}):
        assert entry_text(entry) == dump([entry])
