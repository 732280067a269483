"""The fast argument check never accepts what jsonschema refuses (hypothesis), and is used.

``protocol/schemas.fast_accepts`` lets a call skip jsonschema; its one duty is soundness:
whenever it says yes, jsonschema says the value is valid. Within the subset it models it
should also say yes whenever jsonschema does, or it saves nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator, Draft202012Validator

from mcp_app.protocol.errors import InternalError
from mcp_app.protocol.schemas import (
    SchemaCache,
    compile_schema,
    describe_error,
    fast_accepts,
    first_error,
)

SETTINGS = settings(
    max_examples=600, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, 1, 1.0, -1, 2.5, True, False, "", "a", "ab", "abc", "x" * 5]),
    st.text(max_size=6),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), inner, max_size=4),
    ),
    max_leaves=12,
)
TYPES = ["object", "array", "string", "integer", "number", "boolean", "null"]
TYPE_NAMES = st.sampled_from(TYPES)
TYPE_LISTS = st.lists(TYPE_NAMES, min_size=1, max_size=3, unique=True)
NUMBERS = st.one_of(st.integers(-5, 5), st.floats(-5, 5, allow_nan=False))
LENGTHS = st.integers(0, 4)


def _keywords(sub: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Schemas of the modelled subset (annotations included), nested through ``sub``."""
    return st.fixed_dictionaries(
        {},
        optional={
            "type": st.one_of(
                TYPE_NAMES, st.lists(TYPE_NAMES, min_size=1, max_size=3, unique=True)
            ),
            "properties": st.dictionaries(st.sampled_from(["a", "b", "c"]), sub, max_size=3),
            "required": st.lists(st.sampled_from(["a", "b", "d"]), max_size=2, unique=True),
            "additionalProperties": st.booleans(),
            "enum": st.lists(st.sampled_from(["a", "ab", "x", ""]), min_size=1, max_size=3),
            "items": sub,
            "minimum": NUMBERS,
            "maximum": NUMBERS,
            "exclusiveMinimum": NUMBERS,
            "exclusiveMaximum": NUMBERS,
            "minLength": LENGTHS,
            "maxLength": LENGTHS,
            "minItems": LENGTHS,
            "maxItems": LENGTHS,
            "description": st.text(max_size=5),
            "format": st.sampled_from(["email", "date-time", "uri"]),
            "default": JSON_SCALARS,
        },
    )


SUBSET_SCHEMAS = st.recursive(_keywords(st.just({})), lambda inner: _keywords(inner), max_leaves=6)
# Beyond the subset as well: keywords it does not model, odd values for the ones it does.
ANY_SCHEMAS = st.one_of(
    SUBSET_SCHEMAS,
    st.booleans(),
    st.fixed_dictionaries(
        {
            "type": st.just("object"),
            "properties": st.dictionaries(
                st.sampled_from(["a", "b"]),
                st.one_of(
                    SUBSET_SCHEMAS,
                    st.fixed_dictionaries({"pattern": st.sampled_from(["^a", "b$", "."])}),
                    st.fixed_dictionaries({"const": JSON_SCALARS}),
                    st.fixed_dictionaries({"enum": st.lists(JSON_SCALARS, min_size=1)}),
                    st.fixed_dictionaries({"anyOf": st.lists(SUBSET_SCHEMAS, min_size=1)}),
                ),
            ),
        },
        optional={"additionalProperties": st.one_of(st.booleans(), SUBSET_SCHEMAS)},
    ),
)


@SETTINGS
@given(schema=ANY_SCHEMAS, instance=JSON_VALUES)
def test_fast_accept_implies_jsonschema_accepts(schema: Any, instance: Any) -> None:
    accepts = fast_accepts(schema)
    if accepts is not None and accepts(instance):
        assert Draft202012Validator(schema).is_valid(instance)


@SETTINGS
@given(schema=SUBSET_SCHEMAS, instance=JSON_VALUES)
def test_subset_schemas_are_decided_exactly(schema: dict[str, Any], instance: Any) -> None:
    accepts = fast_accepts(schema)
    assert accepts is not None
    assert accepts(instance) == Draft202012Validator(schema).is_valid(instance)


@SETTINGS
@given(schema=SUBSET_SCHEMAS, instance=JSON_VALUES)
def test_first_error_agrees_with_jsonschema(schema: dict[str, Any], instance: Any) -> None:
    assert (first_error(schema, instance) is None) == Draft202012Validator(schema).is_valid(
        instance
    )


def test_a_typical_tool_schema_takes_the_fast_path() -> None:
    schema = {
        "type": "object",
        "properties": {
            "message": {"type": "string", "description": "What to echo", "minLength": 1},
            "times": {"type": "integer", "minimum": 1, "default": 1},
            "tags": {"type": "array", "items": {"type": "string"}},
            "mode": {"type": "string", "enum": ["loud", "quiet"]},
        },
        "required": ["message"],
        "additionalProperties": False,
    }
    accepts = fast_accepts(schema)
    assert accepts is not None
    assert accepts({"message": "hi", "times": 2.0, "tags": ["a"], "mode": "loud"})
    assert not accepts({"message": "hi", "extra": 1})
    assert not accepts({"times": 1})
    assert not accepts({"message": "hi", "times": True})


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {}}},
        {"type": "object", "patternProperties": {"^a": {"type": "string"}}},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "array", "prefixItems": [{"type": "string"}]},
        {"enum": [1, True]},
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"},
        {"type": "strnig"},
    ],
)
def test_what_the_subset_does_not_model_goes_to_jsonschema(schema: dict[str, Any]) -> None:
    assert fast_accepts(schema) is None


def test_draft_07_schema_keeps_its_own_validator() -> None:
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}]}
    assert isinstance(compile_schema(schema), Draft7Validator)
    error = first_error(schema, [1])
    assert error is not None and describe_error(error).startswith("at '0':")


def test_an_invalid_schema_is_a_server_fault_even_when_the_value_would_pass() -> None:
    with pytest.raises(InternalError):
        first_error({"type": "object", "minProperties": -1}, {})
    with pytest.raises(InternalError):
        first_error({"minLength": -1}, "abc")


def test_the_same_schema_object_is_compiled_once_in_its_cache() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    cache = SchemaCache()
    assert compile_schema(schema, cache) is compile_schema(schema, cache)
    assert compile_schema(schema, cache) is compile_schema(dict(schema), cache)
    # Without a cache nothing is kept: the protocol layer holds no state of its own.
    assert compile_schema(schema) is not compile_schema(schema)


TRICKY_VALUES = [
    None, True, False, 0, 1, -1, 1.0, 1.5, -0.0, 2**64, "", "a", "abc", "1",
    [], [1], ["a", "b"], [None], {}, {"a": 1}, {"a": "x", "b": None},
]  # fmt: skip
SINGLE_KEYWORD_SCHEMAS = [
    *({"type": name} for name in TYPES),
    {"type": ["integer", "null"]},
    {"type": ["string", "boolean"]},
    {"minimum": 1}, {"maximum": 1}, {"exclusiveMinimum": 1}, {"exclusiveMaximum": 1.0},
    {"minLength": 1}, {"maxLength": 1}, {"minItems": 1}, {"maxItems": 1},
    {"enum": ["a", "abc"]},
    {"items": {"type": "integer"}},
    {"required": ["a"]},
    {"properties": {"a": {"type": "integer"}}},
    {"properties": {"a": {}}, "additionalProperties": False},
]  # fmt: skip


@pytest.mark.parametrize("schema", SINGLE_KEYWORD_SCHEMAS, ids=str)
def test_each_keyword_decides_exactly_on_tricky_values(schema: dict[str, Any]) -> None:
    accepts = fast_accepts(schema)
    assert accepts is not None
    for value in TRICKY_VALUES:
        assert accepts(value) == Draft202012Validator(schema).is_valid(value), value
