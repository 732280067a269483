"""The catalog's YAML reader (services/catalog_io.py ``catalog_yaml_load``): on libyaml's events
it gives the values, and the refusals with their line numbers, of the pure-Python counting
loader it replaces (``libyaml=False``), for generated documents and hand-written ones
using what YAML allows beyond JSON (anchors, tags, merge keys, block scalars, odd keys)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pytest_django.fixtures import Settings

from mcp_app.services import catalog_io
from mcp_app.services.catalog_io import MAX_DEPTH, CatalogFormatError, catalog_yaml_load
from mcp_app.services.catalog_yaml import dump

pytestmark = pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml")


def read(text: str, libyaml: bool) -> tuple[str, str]:
    """What a reader makes of ``text``: its value's repr (NaN is not equal to itself), or
    its refusal's type and message."""
    try:
        return "value", repr(catalog_yaml_load(text, libyaml=libyaml))
    except (CatalogFormatError, yaml.YAMLError) as exc:
        return type(exc).__name__, str(exc)


TEXT = """\
format: mcphost-catalog/1
dates: [2020-01-01, 2001-12-14t21:59:43.10-05:00, 2002-12-14]
ints: [0, -7, 0x1f, 0o17, 017, 1_000, 1:20, +12, 123456789012345678901234567890]
floats: [1.5, -2e3, 6.8523015e+5, .inf, -.Inf, .nan, 1_0.5, 190:20:30.15]
bools: [true, False, yes, No, on, OFF, y]
nulls: [null, ~, Null, '']
empty:
strings: ['12', "true", 'null', "2020-01-01", plain words, "tab\\tand\\u00e9", '', "\\0"]
templates:
  literal: |
    Hello {{ name }}
      indented
  folded: >-
    one
    two

    three
  kept: |+
    end

non_ascii: {clé: "☃ é 中文 \\U0001F600", ключ: значение}
flow: {a: [1, {b: c}], "quoted key": 'it''s'}
? long key
: value
1: integer key
3.5: float key
null: null key
true: bool key
anchors:
  schema: &schema {type: object, properties: {name: {type: string}}}
  again: *schema
  scalar: &word hello
  word: *word
  list: &list [1, [2, 3]]
  lists: [*list, *list]
duplicate: first
duplicate: second
explicit: [!!str 12, !!int '12', !!float '1', ! 12, !!null '', !!bool 'yes']
"""

FALLBACK_TEXTS = [
    # Each leaves the document to libyaml's loader part-way; the values stay PyYAML's.
    "base: &base {a: 1, b: 2}\nmerged:\n  <<: *base\n  b: 3\n",
    "a: !!set {x, y}\n",
    "a: !!binary aGVsbG8=\n",
    "a: !!timestamp 2020-01-01\n",
    "a: !!omap [{x: 1}, {y: 2}]\n",
    "= : equals key\n",
    "a: !custom 1\n",
    "? [a, b]\n: complex key\n",
    "- &l [1]\n- {? *l : alias of a list as a key}\n",
    "x: *undefined\n",
    "a: &twice 1\nb: &twice 2\n",
    "--- 1\n--- 2\n",
    "a: [unclosed\n",
    "a: b: c\n",
    "a:\n\t- tab\n",
    "a: \x00\n",
    # Equal keys of other types in other mappings stay each its own.
    "- {1: a, name: x}\n- {true: b, name: y}\n- {1.0: c}\n",
]


def test_the_libyaml_reader_gives_the_pure_python_readers_values() -> None:
    new = catalog_yaml_load(TEXT)

    assert read(TEXT, libyaml=True) == read(TEXT, libyaml=False)
    # What the catalog relies on: dates stay strings, and an alias is its anchor's value.
    assert new["dates"] == ["2020-01-01", "2001-12-14t21:59:43.10-05:00", "2002-12-14"]
    assert new["ints"][-1] == 123456789012345678901234567890
    assert new["templates"]["literal"] == "Hello {{ name }}\n  indented\n"
    assert new["non_ascii"]["clé"] == "☃ é 中文 \U0001f600"
    assert new["duplicate"] == "second"
    assert new["anchors"]["again"] is new["anchors"]["schema"]
    # A key repeated in many mappings is held once (a catalog repeats a few dozen keys).
    one, two = catalog_yaml_load("- {type: 1}\n- {type: 2}\n")
    assert next(iter(one)) is next(iter(two))
    # Built from the events, not handed to libyaml's loader.
    assert catalog_io._read_events(TEXT) is not catalog_io._LOADED


@pytest.mark.parametrize("text", FALLBACK_TEXTS)
def test_the_libyaml_reader_reads_the_rest_of_yaml_as_the_pure_python_reader(text: str) -> None:
    new, old = read(text, libyaml=True), read(text, libyaml=False)

    if old[0] == "value":
        assert new == old
    else:
        # libyaml words some of its own refusals differently (an undefined alias unnamed):
        # the same kind of error, and the document refused.
        assert new[0] == old[0]


SCALARS = st.one_of(
    st.text(),
    st.sampled_from(["2020-01-01", "1:20", "0x1f", "yes", "~", "<<", "=", ".nan", "1_000"]),
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(SCALARS, inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=VALUES, flow=st.booleans())
def test_generated_documents_read_the_same_by_both_readers(value: Any, flow: bool) -> None:
    for text in (dump({"v": value}), yaml.safe_dump(value, default_flow_style=flow)):
        assert read(text, libyaml=True) == read(text, libyaml=False)


def bomb(levels: int) -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for number in range(1, levels):
        previous, name = f"l{number - 1}" if number > 1 else "a", f"l{number}"
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "limit", "message"),
    [
        (bomb(9), 250_000, "Line 6: the document holds more than 250000 values"),
        ("a: 1\nb: [2, 3]\nc: 4\n", 6, "Line 2: the document holds more than 6 values"),
        ("a: &x [1, 2]\nb: *x\nc: *x\n", 8, "Line 2: the document holds more than 8 values"),
        ("a: &loop [1, *loop]\n", 100, "Line 1: an alias is used inside its own anchor."),
        ("a: &m {b: {c: *m}}\n", 100, "Line 1: an alias is used inside its own anchor."),
        (
            "a: 1\nb: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n",
            1000,
            f"Line 2: values nest deeper than {MAX_DEPTH} levels.",
        ),
        (
            "a:\n" + "".join(f"{' ' * n}- b{n}:\n" for n in range(0, 2 * MAX_DEPTH, 2)),
            10_000,
            f"Line 51: values nest deeper than {MAX_DEPTH} levels.",
        ),
    ],
)
def test_both_readers_refuse_a_bound_at_the_same_line_with_the_same_message(
    settings: Settings, text: str, limit: int, message: str
) -> None:
    settings.MCP_CATALOG_MAX_VALUES = limit

    for libyaml in (True, False):
        with pytest.raises(CatalogFormatError) as raised:
            catalog_yaml_load(text, libyaml=libyaml)
        assert str(raised.value).startswith(message)


def test_a_document_at_the_values_bound_is_read(settings: Settings) -> None:
    # 7 values: the mapping, three keys, 1, the list (1) and its two items (2).
    settings.MCP_CATALOG_MAX_VALUES = 8
    text = "a: 1\nb: &x [2, 3]\n"

    assert catalog_yaml_load(text) == {"a": 1, "b": [2, 3]}
    settings.MCP_CATALOG_MAX_VALUES = 7
    assert catalog_yaml_load(text) == {"a": 1, "b": [2, 3]}
    settings.MCP_CATALOG_MAX_VALUES = 6
    with pytest.raises(CatalogFormatError, match="more than 6 values"):
        catalog_yaml_load(text)


def test_past_a_bound_nothing_after_it_is_read(settings: Settings) -> None:
    # The refusal comes at the value past the bound, before the broken YAML after it.
    settings.MCP_CATALOG_MAX_VALUES = 5
    text = "a: [1, 2, 3, 4, 5]\nb: [unclosed\n"

    for libyaml in (True, False):
        with pytest.raises(CatalogFormatError, match="Line 1: the document holds more than 5"):
            catalog_yaml_load(text, libyaml=libyaml)
