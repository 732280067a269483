"""The one-document 2020-12 metaschema check agrees with jsonschema's, and is used.

``protocol/metaschema.check_schema`` accepts a 2020-12 schema when the metaschema flattened
into one document (``FAST_2020_12``) does, without ``check_schema``. Its duty is soundness:
whatever it accepts, jsonschema's own check accepts. Its verdict is held to jsonschema's both
ways, over every keyword the metaschemas define with right and wrong values, at the root and
at every place a subschema sits, and over generated schemas (hypothesis).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator, Draft202012Validator
from jsonschema.exceptions import SchemaError

from mcp_app.protocol import metaschema
from mcp_app.protocol.metaschema import FAST_2020_12, check_schema

# jsonschema's own check, as check_schema runs it (its first error is the one raised).
JUDGE = Draft202012Validator(
    Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER
)
assert FAST_2020_12 is not None
FAST = FAST_2020_12
# Every keyword the 2020-12 metaschemas give rules for, and a few they do not.
KEYWORDS = sorted(FAST.schema["properties"]) + ["name", "x-mcp-header", "$recursiveAnchor"]
VALUES: list[Any] = [
    None, True, False, 0, -1, 1.5, 2, 2**70, "", "x", "string", "integer", "(", "^a$", "#",
    "#/$defs/a", "#foo", "http://a b", "https://example.com/s", "urn:x", [], ["a"], ["a", "a"],
    [5], [{}], [True], ["string", "null"], ["object", "strange"], {}, {"a": 5}, {"a": {}},
    {"a": ["b"]}, {"a": "x"}, {"(": {}}, {"type": 5}, {"type": "string"}, {"a": True},
]  # fmt: skip
# The places a subschema sits, each as a function putting a schema there.
Place = Callable[[Any], Any]
PLACES: dict[str, Place] = {
    "root": lambda s: s,
    "properties": lambda s: {"type": "object", "properties": {"p": s}},
    "items": lambda s: {"items": s},
    "prefixItems": lambda s: {"prefixItems": [{}, s]},
    "$defs": lambda s: {"$defs": {"d": s}},
    "definitions": lambda s: {"definitions": {"d": s}},
    "dependencies": lambda s: {"dependencies": {"d": s}},
    "dependentSchemas": lambda s: {"dependentSchemas": {"d": s}},
    "allOf": lambda s: {"allOf": [s]},
    "anyOf": lambda s: {"anyOf": [{}, s]},
    "oneOf": lambda s: {"oneOf": [s]},
    "not": lambda s: {"not": s},
    "if/then/else": lambda s: {"if": {}, "then": s, "else": {}},
    "contains": lambda s: {"contains": s},
    "additionalProperties": lambda s: {"additionalProperties": s},
    "patternProperties": lambda s: {"patternProperties": {"^a": s}},
    "propertyNames": lambda s: {"propertyNames": s},
    "unevaluatedItems": lambda s: {"unevaluatedItems": s},
    "unevaluatedProperties": lambda s: {"unevaluatedProperties": s},
    "contentSchema": lambda s: {"contentSchema": s},
    "two deep": lambda s: {"properties": {"p": {"items": {"anyOf": [s]}}}},
}


def verdicts(schema: Any) -> tuple[bool, bool]:
    return FAST.is_valid(schema), JUDGE.is_valid(schema)


def refusal(check: Callable[[Any], None], schema: Any) -> tuple[str, list[Any]] | None:
    try:
        check(schema)
    except SchemaError as exc:
        return exc.message, list(exc.absolute_path)
    return None


def test_the_flattened_metaschema_is_derived_and_has_no_dynamic_reference() -> None:
    # Without it every check is jsonschema's alone: correct, but the import's cost is back.
    text = repr(FAST.schema)
    assert "'$dynamicRef': '#meta'" in repr(Draft202012Validator.META_SCHEMA)
    assert "'$dynamicRef': '#meta'" not in text and "'$ref': '#'" in text
    assert {"type", "properties", "required", "definitions", "$ref"} <= set(KEYWORDS)


def test_every_keyword_with_any_value_at_the_root_has_jsonschemas_verdict() -> None:
    refused = 0
    for keyword in KEYWORDS:
        for value in VALUES:
            for schema in ({keyword: value}, {"type": "object", keyword: value}):
                fast, judge = verdicts(schema)
                assert fast == judge, schema
                refused += not judge
    assert refused > len(KEYWORDS)  # the values do break rules, many of them


@functools.cache
def samples() -> dict[str, tuple[list[Any], list[Any]]]:
    """A value each keyword refuses (when one of VALUES is) and one it takes."""
    return {
        keyword: (
            [v for v in VALUES if not JUDGE.is_valid({keyword: v})][:1],
            [v for v in VALUES if JUDGE.is_valid({keyword: v})][:1],
        )
        for keyword in KEYWORDS
    }


@pytest.mark.parametrize("place", sorted(PLACES))
def test_a_keyword_at_every_place_a_subschema_sits_has_jsonschemas_verdict(place: str) -> None:
    put = PLACES[place]
    for keyword, (wrong, right) in samples().items():
        for value in wrong + right:
            schema = put({keyword: value})
            fast, judge = verdicts(schema)
            assert fast == judge, schema
            if value in wrong:
                assert not judge, schema  # reached: jsonschema checks that place too
    for value in (5, "x", None, [], [{}]):  # not a schema at all
        assert verdicts(put(value))[0] == verdicts(put(value))[1]


def test_a_refusal_is_jsonschemas_with_its_message_and_place() -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": -1}},
        "required": ["name"],
    }
    assert not FAST.is_valid(schema)
    ours = refusal(lambda s: check_schema(Draft202012Validator, s), schema)
    assert ours == refusal(Draft202012Validator.check_schema, schema)
    assert ours == ("-1 is less than the minimum of 0", ["properties", "name", "maxLength"])


def test_another_dialect_is_checked_by_jsonschema_alone() -> None:
    # Draft 7's metaschema has no flattened twin: its check is check_schema's.
    schema = {"type": "object", "properties": {"a": {"minLength": "x"}}}
    assert refusal(lambda s: check_schema(Draft7Validator, s), schema) == refusal(
        Draft7Validator.check_schema, schema
    )
    assert refusal(lambda s: check_schema(Draft7Validator, s), {"type": "object"}) is None


def test_metaschemas_of_another_shape_derive_nothing() -> None:
    # The derivation models a root applying vocabularies that apply type and properties; a
    # keyword or reference it does not know, and it derives nothing (jsonschema checks all).
    root = Draft202012Validator.META_SCHEMA
    for change in (
        lambda r: r.update(unevaluatedProperties=False),  # a root rule beyond properties
        lambda r: r["allOf"].append({"$ref": "meta/nonesuch"}),  # a vocabulary not known
        lambda r: r["allOf"].append({"$ref": "meta/core", "title": "x"}),
        lambda r: r["properties"].update(x={"$recursiveRef": "#"}),  # an unknown keyword
        lambda r: r["properties"].update(x={"$dynamicRef": "#other"}),  # another anchor
        lambda r: r["properties"].update(x={"$ref": "meta/core#/properties/$id"}),
        lambda r: r["properties"].update(x={"$ref": "meta/core#/$defs/nonesuch"}),
        lambda r: r["properties"].update(type={}),  # a name two vocabularies would rule
    ):
        changed = copy.deepcopy(dict(root))
        change(changed)
        with pytest.raises((metaschema._Unknown, LookupError)):
            metaschema._flattened(changed)
    assert metaschema._flattened(copy.deepcopy(dict(root)))["$defs"]


SCALARS = st.one_of(st.sampled_from(VALUES[:21]), st.integers(-3, 3), st.text(max_size=3))
SCHEMAS = st.recursive(
    st.one_of(st.booleans(), st.just({}), SCALARS),
    lambda inner: st.one_of(
        st.dictionaries(st.sampled_from(KEYWORDS), inner, max_size=4),
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "^a", "("]), inner, max_size=3),
    ),
    max_leaves=16,
)


@given(SCHEMAS)
@settings(
    max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
def test_generated_schemas_have_jsonschemas_verdict(schema: Any) -> None:
    fast, judge = verdicts(schema)
    assert fast == judge
    if not judge:
        assert refusal(lambda s: check_schema(Draft202012Validator, s), schema) == refusal(
            Draft202012Validator.check_schema, schema
        )
