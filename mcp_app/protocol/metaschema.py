"""Checking a schema against its dialect's metaschema, cheaply for the default dialect.

``jsonschema``'s ``check_schema`` is the judge, and every refusal's message is its own. For
2020-12, the default dialect (2025-11-25 basic/index, "JSON Schema"), it is slow, though:
about 0.5 ms a schema, most of a new tool's validation and most of a 10,000-tool catalog
import's time (docs/performance.md, "Catalog import at size"). The 2020-12 metaschema is
eight documents: the root, which applies the seven vocabularies' metaschemas by ``allOf`` and
``$ref``, each of them recursing into subschemas through ``$dynamicRef: "#meta"``; resolving
those references at every level of every schema is where the time goes.

The same rules fit in one document. Checked against the root metaschema, every
``$dynamicRef: "#meta"`` resolves to that root: the outermost resource of the dynamic scope
with a ``$dynamicAnchor`` of ``meta``, and every scope starts there. Each vocabulary's
metaschema applies only ``type`` (the root's) and ``properties``, under names no other uses,
so applying them all is applying their ``properties`` side by side. ``_flattened`` derives
that document, once, from the metaschemas jsonschema itself checks against
(``jsonschema_specifications``): the properties side by side, the ``$defs`` they use gathered,
each ``$dynamicRef`` a ``$ref`` to the document's root. ``jsonschema`` validates against it,
about five times faster. It derives nothing (and every check is ``check_schema``'s) if the
metaschemas hold anything it does not model: a keyword outside the lists below, a reference
it cannot place, a vocabulary applying more than ``type`` and ``properties``.

As with ``schemas.fast_accepts``, the fast check only ever accepts: a schema it refuses goes
to ``check_schema``, which raises the error, so a difference could cost speed, never a
message. tests/protocol/test_metaschema.py holds the two to the same verdict, both ways,
over every keyword of the metaschemas with wrong values at every place a subschema sits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urldefrag, urljoin

from jsonschema import Draft202012Validator
from jsonschema.protocols import Validator
from jsonschema_specifications import REGISTRY

# Keywords of a metaschema whose value is a schema, a list of schemas, a map of schemas.
_SCHEMA: Final = frozenset(
    {
        "items", "contains", "additionalProperties", "propertyNames", "not", "if", "then",
        "else", "unevaluatedItems", "unevaluatedProperties", "contentSchema",
    }
)  # fmt: skip
_SCHEMA_LIST: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SCHEMA_MAP: Final = frozenset({"properties", "patternProperties", "dependentSchemas"})
# Keywords whose value is data, never a schema: copied as they are.
_DATA: Final = frozenset(
    {
        "type", "enum", "const", "format", "multipleOf", "minimum", "maximum",
        "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern",
        "minItems", "maxItems", "uniqueItems", "minContains", "maxContains", "minProperties",
        "maxProperties", "required", "dependentRequired", "title", "description", "default",
        "deprecated", "readOnly", "writeOnly", "examples", "$comment",
    }
)  # fmt: skip
# What the root and each vocabulary's metaschema may hold at their top.
_ROOT_KEYS: Final = frozenset(
    {"$schema", "$id", "$vocabulary", "$dynamicAnchor", "title", "allOf", "type", "$comment",
     "properties"}
)  # fmt: skip
_VOCABULARY_KEYS: Final = frozenset(
    {"$schema", "$id", "$vocabulary", "$dynamicAnchor", "title", "type", "$comment",
     "properties", "$defs"}
)  # fmt: skip


class _Unknown(Exception):
    """The metaschemas hold something the derivation does not model."""


def _flattened(root: Mapping[str, Any]) -> dict[str, Any]:
    """The rules of ``root`` (a metaschema whose ``allOf`` names vocabulary metaschemas) as
    one document without ``$dynamicRef``."""
    anchor = root.get("$dynamicAnchor")
    if not _ROOT_KEYS.issuperset(root) or not isinstance(anchor, str):
        raise _Unknown("the root")
    base = root["$id"]
    definitions: dict[str, Any] = {}

    def reference(uri: str, ref: str) -> str:
        # A $ref to a definition of one of the metaschemas: gathered under a name of its own.
        target, fragment = urldefrag(urljoin(uri, ref))
        document = REGISTRY.contents(target)
        parts = fragment.split("/")
        if (
            len(parts) != 3
            or parts[:2] != ["", "$defs"]
            or not parts[2].isalnum()  # nothing escaped, in the pointer or the URI
            or not isinstance(document, dict)
        ):
            raise _Unknown(ref)
        name = f"{target.rsplit('/', 1)[-1]}.{parts[2]}"
        if name not in definitions:
            definitions[name] = None  # being derived: a reference back to it is placed
            definitions[name] = schema(target, document["$defs"][parts[2]])
        return f"#/$defs/{name}"

    def schema(uri: str, node: Any) -> Any:
        if isinstance(node, bool):
            return node
        if not isinstance(node, dict):
            raise _Unknown(repr(node))
        if set(node) == {"$ref"}:
            # A reference alone: the definition in its place (one lookup fewer a check),
            # unless it is the one being derived (a reference back stays a reference).
            pointer = reference(uri, node["$ref"])
            return definitions[pointer.rsplit("/", 1)[1]] or {"$ref": pointer}
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$dynamicRef":
                if value != f"#{anchor}":
                    raise _Unknown(value)
                out["$ref"] = "#"  # the outermost "meta" anchor: the root, here this document
            elif key == "$ref":
                out[key] = reference(uri, value)
            elif key in _SCHEMA:
                out[key] = schema(uri, value)
            elif key in _SCHEMA_LIST and isinstance(value, list):
                out[key] = [schema(uri, item) for item in value]
            elif key in _SCHEMA_MAP and isinstance(value, dict):
                out[key] = {name: schema(uri, item) for name, item in value.items()}
            elif key in _DATA:
                out[key] = value
            else:
                raise _Unknown(key)
        return out

    properties: dict[str, Any] = {}

    def add(uri: str, document: Mapping[str, Any]) -> None:
        for name, subschema in document.get("properties", {}).items():
            if name in properties:
                raise _Unknown(name)
            properties[name] = schema(uri, subschema)

    for part in root.get("allOf", []):
        if not isinstance(part, dict) or set(part) != {"$ref"}:
            raise _Unknown("an allOf entry")
        uri = urljoin(base, part["$ref"])
        vocabulary = REGISTRY.contents(uri)
        if (
            not isinstance(vocabulary, dict)
            or not _VOCABULARY_KEYS.issuperset(vocabulary)
            or vocabulary.get("$id") != uri
            or vocabulary.get("$dynamicAnchor") != anchor
            or vocabulary.get("type") != root.get("type")
        ):
            raise _Unknown(uri)
        add(uri, vocabulary)
    add(base, root)
    return {"type": root["type"], "properties": properties, "$defs": definitions}


def _fast_validator() -> Validator | None:
    try:
        document = _flattened(Draft202012Validator.META_SCHEMA)
    except (_Unknown, LookupError):  # LookupError: a reference to no known document
        return None
    # The format checker check_schema uses: the metaschema's dialect's.
    return Draft202012Validator(document, format_checker=Draft202012Validator.FORMAT_CHECKER)


# Built once at import; None when the metaschemas are not of the shape modelled above.
FAST_2020_12: Final = _fast_validator()


def check_schema(cls: type[Validator], schema: Any) -> None:
    """``cls.check_schema(schema)``: raise ``SchemaError`` if ``schema`` breaks the
    metaschema of ``cls``'s dialect. A 2020-12 schema the one-document check accepts is
    accepted without it; any other goes to ``check_schema``, whose error is raised."""
    if cls is Draft202012Validator and FAST_2020_12 is not None and FAST_2020_12.is_valid(schema):
        return
    cls.check_schema(schema)
