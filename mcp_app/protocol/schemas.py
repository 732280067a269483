"""Checking a value against a tool's JSON Schema, cheaply on the hot path.

``jsonschema`` is the judge: every error message, and every schema outside the simple subset
below, comes from it. It walks the schema anew on every call, though, which was the largest
single cost of a ``tools/call`` (about a sixth of its CPU). Most tool schemas are simple: an
object of typed properties, some required, maybe no others allowed. For those a plain Python
predicate is compiled once (in the caller's ``SchemaCache``), and a call whose arguments it
accepts skips ``jsonschema``
entirely. The predicate only ever *accepts*: whatever it refuses, or any schema it does not
understand, goes to ``jsonschema``, so a gap in it can cost speed but never correctness.
(``fastjsonschema``, the library that compiles schemas, does not implement 2020-12, the
default dialect since 2025-11-25, so it cannot be trusted with these schemas.)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError, best_match
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing.exceptions import Unresolvable

from mcp_app.protocol.errors import InternalError

logger = logging.getLogger(__name__)

Accepts = Callable[[Any], bool]

# Distinct schemas kept compiled; an endpoint's catalog rarely holds more.
CACHE_SIZE = 4096
# Dialects whose meaning of the keywords below is the same as 2020-12's.
_SAME_MEANING = frozenset(
    {
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "http://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-07/schema",
    }
)
# Keywords that never make a value invalid (annotations; `format` asserts nothing unless a
# format checker is configured, and the validators here have none).
_ANNOTATIONS = frozenset(
    {
        "title", "description", "default", "examples", "$comment", "deprecated",
        "readOnly", "writeOnly", "format", "contentMediaType", "contentEncoding",
    }
)  # fmt: skip
_TYPES: Final[Mapping[str, Accepts]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    # 2020-12: any number with a zero fractional part is an integer (1.0 included).
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and v.is_integer())
    ),
}


class _Unsupported(Exception):
    """The schema uses something the fast predicate does not model: jsonschema decides."""


def _compile_type(spec: Any) -> Accepts:
    names = [spec] if isinstance(spec, str) else spec
    if not isinstance(names, list) or not names or not all(n in _TYPES for n in names):
        raise _Unsupported
    checks = [_TYPES[n] for n in names]
    if len(checks) == 1:
        return checks[0]

    return lambda v: any(check(v) for check in checks)


def _compile_bounds(schema: Mapping[str, Any]) -> list[Accepts]:
    checks: list[Accepts] = []
    number = _TYPES["number"]
    for keyword, holds in (
        ("minimum", lambda v, b: v >= b),
        ("maximum", lambda v, b: v <= b),
        ("exclusiveMinimum", lambda v, b: v > b),
        ("exclusiveMaximum", lambda v, b: v < b),
    ):
        if keyword in schema:
            bound = schema[keyword]
            if not number(bound):
                raise _Unsupported
            checks.append(_within_bound(number, holds, bound))
    for keyword, holds in (("minLength", int.__ge__), ("maxLength", int.__le__)):
        if keyword in schema:
            limit = schema[keyword]
            if not isinstance(limit, int) or isinstance(limit, bool):
                raise _Unsupported
            checks.append(_within_length(str, holds, limit))
    for keyword, holds in (("minItems", int.__ge__), ("maxItems", int.__le__)):
        if keyword in schema:
            limit = schema[keyword]
            if not isinstance(limit, int) or isinstance(limit, bool):
                raise _Unsupported
            checks.append(_within_length(list, holds, limit))
    return checks


def _within_bound(number: Accepts, holds: Callable[[Any, Any], bool], bound: Any) -> Accepts:
    return lambda v: not number(v) or holds(v, bound)


def _within_length(
    kind: type[str] | type[list[Any]], holds: Callable[[int, int], bool], limit: int
) -> Accepts:
    return lambda v: not isinstance(v, kind) or holds(len(v), limit)


def _compile_enum(values: Any) -> Accepts:
    # Only strings: JSON equality differs from Python's for 1, 1.0 and true.
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise _Unsupported
    allowed = frozenset(values)
    return lambda v: isinstance(v, str) and v in allowed


def _compile_object(schema: Mapping[str, Any]) -> list[Accepts]:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    additional = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list):
        raise _Unsupported
    if not all(isinstance(name, str) for name in required) or not isinstance(additional, bool):
        raise _Unsupported
    compiled = {name: _compile(sub) for name, sub in properties.items()}
    needed = tuple(required)
    closed = not additional

    def accepts(value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        for name in needed:
            if name not in value:
                return False
        for name, item in value.items():
            check = compiled.get(name)
            if check is None:
                if closed:
                    return False
            elif not check(item):
                return False
        return True

    return [accepts] if properties or needed or closed else []


def _compile(schema: Any) -> Accepts:
    if schema is True or schema == {}:
        return lambda v: True
    if not isinstance(schema, dict):
        raise _Unsupported
    known = _ANNOTATIONS | {
        "type", "properties", "required", "additionalProperties", "enum", "items",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
        "minLength", "maxLength", "minItems", "maxItems",
    }  # fmt: skip
    if not known.issuperset(schema):
        raise _Unsupported
    checks: list[Accepts] = []
    if "type" in schema:
        checks.append(_compile_type(schema["type"]))
    if "enum" in schema:
        checks.append(_compile_enum(schema["enum"]))
    checks += _compile_bounds(schema)
    checks += _compile_object(schema)
    if "items" in schema:
        each = _compile(schema["items"])

        def each_item(value: Any) -> bool:
            if isinstance(value, list):
                for item in value:
                    if not each(item):
                        return False
            return True

        checks.append(each_item)
    return _all_of(checks)


def _all_of(checks: list[Accepts]) -> Accepts:
    # Written out for the common counts: a generator per call costs more than the checks.
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda v: first(v) and second(v)

    def every(value: Any) -> bool:
        for check in checks:  # noqa: SIM110 (all() over a generator is slower here)
            if not check(value):
                return False
        return True

    return every


def fast_accepts(schema: Any) -> Accepts | None:
    """A predicate that accepts only values ``schema`` accepts, or None if it cannot tell.

    Its False means "ask jsonschema", never "invalid".
    """
    if isinstance(schema, dict) and "$schema" in schema:
        if schema["$schema"] not in _SAME_MEANING:
            return None
        schema = {k: v for k, v in schema.items() if k != "$schema"}
    try:
        return _compile(schema)
    except _Unsupported:
        return None


def _compiled(schema: Mapping[str, Any]) -> Validator:
    # No `$schema` means 2020-12 (2025-11-25+); an unknown dialect falls back to it too
    # rather than failing the call.
    cls = validator_for(schema, default=Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema)


class _Checker:
    """One schema, compiled both ways."""

    __slots__ = ("accepts", "validator")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        # Checked to be a valid schema first, whichever way its calls will go.
        self.validator = _compiled(schema)
        self.accepts = fast_accepts(schema)

    def first_error(self, instance: Any) -> ValidationError | None:
        if self.accepts is not None and self.accepts(instance):
            return None
        return best_match(self.validator.iter_errors(instance))


class SchemaCache:
    """The compiled checkers of the schemas a process serves.

    The protocol layer keeps no state of its own: whoever serves requests owns one of these
    (``services/context_factory.py`` gives every ``RequestContext`` the process's) and passes it in.
    Keyed by the schema object's identity: a catalog snapshot keeps its schemas for its whole
    life, so the same object comes back call after call and no call pays for serialising it.
    Each entry holds the schema, so its id cannot be reused while the entry exists. Equal
    schemas held by other objects (the next snapshot's) share one checker, found by content.
    """

    __slots__ = ("_by_content", "_by_identity", "_size")

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self._size = size
        self._by_identity: dict[int, tuple[Mapping[str, Any], _Checker]] = {}
        self._by_content: dict[bytes, _Checker] = {}

    def checker(self, schema: Mapping[str, Any]) -> _Checker:
        found = self._by_identity.get(id(schema))
        if found is not None and found[0] is schema:
            return found[1]
        key = _content_key(schema)
        checker = self._by_content.get(key)
        if checker is None:
            if len(self._by_content) >= self._size:
                self._by_content.clear()
            # A private copy: the caller's object may change after this.
            checker = self._by_content[key] = _Checker(json.loads(key))
        if len(self._by_identity) >= self._size:
            self._by_identity.clear()
        self._by_identity[id(schema)] = (schema, checker)
        return checker


def _content_key(schema: Mapping[str, Any]) -> bytes:
    try:
        return orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # an integer beyond 64 bits, which orjson does not write
        return json.dumps(schema, sort_keys=True).encode()


def _checker(schema: Mapping[str, Any], cache: SchemaCache | None) -> _Checker:
    return cache.checker(schema) if cache is not None else _Checker(schema)


def compile_schema(schema: Mapping[str, Any], cache: SchemaCache | None = None) -> Validator:
    """Return a jsonschema validator for ``schema`` (checked to be a valid schema), kept in
    ``cache`` (None: compiled afresh).

    Remote ``$ref`` is never fetched: the validator's registry holds no retriever.

    Raises:
        SchemaError: ``schema`` is not a valid JSON Schema.
    """
    return _checker(schema, cache).validator


def first_error(
    schema: Mapping[str, Any], instance: Any, cache: SchemaCache | None = None
) -> ValidationError | None:
    """The most relevant reason ``instance`` does not conform to ``schema``, or None.

    ``schema`` is compiled once in ``cache`` (None: afresh, for this check only).

    Raises:
        InternalError: the schema cannot be evaluated (a broken catalog row: a server fault,
            not the caller's; the catalog validates schemas when an operator saves them).
    """
    try:
        return _checker(schema, cache).first_error(instance)
    except (SchemaError, Unresolvable):
        logger.error("Tool schema cannot be evaluated")
        raise InternalError("Tool schema is invalid") from None


def describe_error(error: ValidationError) -> str:
    """Describe a validation error with the path of the offending value, if any."""
    path = ".".join(str(part) for part in error.absolute_path)
    return f"at '{path}': {error.message}" if path else error.message
