"""The catalog's YAML writer (services/catalog_yaml.py ``Writer``) writes every entry as
PyYAML does (``entry_text``: ``dump([entry])``) and every document (``document_text``:
``dump(document)``), to the byte: generated entries and documents of strings that YAML
quotes, folds, escapes or writes as blocks, at every nesting the catalog has; the import
benchmark's generated catalog, also in the key order a draft's document comes back from
PostgreSQL in; and hand-written documents of the values a draft may hold."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import catalog_bulk
from mcp_app.services.catalog_yaml import Writer, document_text, dump, entry_text

# Characters that decide how YAML writes a string: indicators, quotes, spaces, breaks,
# tabs, controls, non-ASCII, and words the resolver reads as other types.
TRICKY = st.sampled_from(
    list("aZ09-?:#,[]{}&*!|>'\"%@`.~_= \t\n\r\x00\x85\u2028\u2029é✓\ufeff\u00a0\ufffe") + [
        "\U0001f600", "\ud7ff", "\ue000", "\x7f", "\x9f",
        "true", "no", "null", "~", "1.5", "0x1f", "2001-12-14", "<<", "---", "...", ": ",
        " #", "word ",
        "\n\n",  # a block that keeps its trailing breaks ("|+") when it ends the string
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


# A document: top-level keys (a draft's are strings; an int or a long key is PyYAML's) to
# sections (lists of entries, as the writer writes them one at a time) or other values.
ENTRIES = st.lists(st.dictionaries(STRINGS, VALUES, min_size=1, max_size=4) | VALUES, max_size=4)
DOCUMENTS = st.dictionaries(
    STRINGS | st.integers() | st.just("k" * 130), ENTRIES | VALUES, min_size=1, max_size=5
)


@settings(SETTINGS, max_examples=1000)
@given(DOCUMENTS)
def test_a_document_is_written_as_pyyaml_writes_it(document: dict[Any, Any]) -> None:
    assert document_text(document) == dump(document)


def test_a_block_that_keeps_its_breaks_ends_the_document_not_its_entry() -> None:
    # libyaml ends a document with "..." when the last block scalar in it is "|+", however
    # much follows; dumped alone, the entry holding it would end with it, and "..." between
    # two entries ends the document there (no reader takes the rest).
    kept, clipped = {"template": "Hello\n\n"}, {"template": "Bye\n"}
    for document in (
        {"tools": [kept, {"name": "next"}], "end": {"tools": 2}},  # "..." after "end"
        {"tools": [kept, clipped]},  # a later block closes it: no "..."
        {"tools": [kept, {"n": 1.5, "k": [1]}, {"\u00e9": "x"}]},  # floats and PyYAML's entries
        {"tools": [{"\u00e9": "a\n\n"}, clipped, {"\u00e9": "b\n\n"}]},  # PyYAML's entries
        {"tools": [kept, {"\u00e9": "b\n"}, {"\u00e9": 1}]},  # PyYAML's block closes it
        {"tools": [clipped, {"\u00e9": "a"}], "x": "a\n\n", "y": 1},
        {"tools": ["a\n\n", "b"], 1: "c\n\n", "d": [1.0]},
    ):
        text = document_text(document)
        assert text == dump(document), document
        assert "\n...\n" not in text[:-4]

    # The writer's own pieces: "..." never inside one.
    writer = Writer()
    pieces = [writer.item("format", 2), *writer.section("tools", [kept, {"name": "next"}])]
    assert not any("..." in piece for piece in pieces)
    assert "".join(pieces) + writer.end() == dump({"format": 2, "tools": [kept, {"name": "next"}]})


@pytest.mark.parametrize("brk", ["\u2028", "\u2029", "\x85", "\r"])
def test_a_block_ending_in_another_line_break_is_written_as_pyyaml_writes_it(brk: str) -> None:
    # A block scalar may end in any of YAML 1.1's line breaks; libyaml writes what follows
    # (the next key, or the open end's "...") straight after it, not after a "\n".
    # Hypothesis found {0: ["\n\u2028"], "": []}: "..." was left between two items.
    for document in (
        {0: ["\n" + brk], "": []},
        {"tools": [{"template": "\n" + brk}, {"name": "next"}], "end": {"tools": 2}},
        {"tools": [{"template": "a" + brk + brk}, {"template": "Bye\n"}]},
        {"tools": ["x" + brk + "\n\n", "y"], "z": 1},
        {"k": "a" + brk, "tools": [{"t": "\n\n" + brk}]},
    ):
        assert document_text(document) == dump(document), document


def _jsonb_order(value: Any) -> Any:
    """``value`` with its mappings' keys in the order PostgreSQL's jsonb gives them back
    (shorter first, then by their bytes): a draft's document as read from its row."""
    if isinstance(value, dict):
        keys = sorted(value, key=lambda key: (len(key.encode()), key.encode()))
        return {key: _jsonb_order(value[key]) for key in keys}
    if isinstance(value, list):
        return [_jsonb_order(item) for item in value]
    return value


def test_the_benchmarks_catalog_is_written_as_pyyaml_writes_it() -> None:
    document = catalog_bulk.document(tools=1000, endpoints=10)
    ended = {**document, "format": "mcphost-catalog/2", "end": {"endpoints": 10, "tools": 1000}}

    for value in (document, ended, _jsonb_order(document)):
        assert document_text(value) == dump(value)


# Values a draft's document may hold (what an operator uploaded, checked), written by the
# writer or, where it does not, by PyYAML: each written as PyYAML writes it.
AWKWARD_TOOL: dict[str, Any] = {
    "name": "awkward",
    "description": "Grüße, 世界 — " + " ".join(["a long description that folds"] * 8),
    "kind": "template",
    "config": {"template": "Hello {{ name }}\n\n  indented\n\tand tabbed\n\n", "output": "text"},
    "input_schema": {
        "type": "object",
        "properties": {
            "prénom": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 64},
            "ratio": {"type": "number", "minimum": 0.5, "maximum": 1e300, "default": -0.0},
            "nested": {
                "type": "object",
                "properties": {"deep": {"type": "array", "items": {"enum": [None, True, 1, "1"]}}},
                "description": "Line one.\nLine two.",
            },
            "on": {"const": "null"},
        },
        "required": ["prénom"],
    },
    "annotations": {"title": " leading space", "readOnlyHint": False},
    "endpoints": [],
    "allowed_groups": [],
    "enabled": True,
}


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"\u00e9t\u00e9": "a non-ASCII key: the entry is PyYAML's"},
        {"limits": {"ratio": math.inf, "none": math.nan, "big": 10**30}},
        {"crlf": "line\r\nline", "controls": "\x00\x07\ufeff", "astral": "\U0001f600"},
        {"set": {1, 2}, "bytes": b"\x00"},  # not JSON: only PyYAML's loader makes them
    ],
)
def test_a_drafts_document_is_written_as_pyyaml_writes_it(extra: dict[str, Any]) -> None:
    tool = {**AWKWARD_TOOL, **extra}
    document = {
        "format": "mcphost-catalog/1",
        "endpoints": [{"slug": "e", "instructions": "Be brief.\n", "rate_limits": []}],
        "tools": [tool, {**tool, "name": "second", "config": {"template": "x"}}, tool],
        "prompts": [],
    }

    for value in (document, _jsonb_order({**document, **{"tools": [tool]}})):
        assert document_text(value) == dump(value)
