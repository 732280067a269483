"""OpenAPI schema adjustments (drf-spectacular postprocessing hooks)."""

from __future__ import annotations

from typing import Any


def any_json_value(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Write a nullable JSON field as ``{}`` (any value), not ``oneOf: [{}, null]``.

    drf-spectacular renders a nullable JSONField as ``oneOf`` of "anything" and null, which
    null matches twice, so a null value would break the schema's own rule (OpenAPI 3.1,
    JSON Schema 2020-12 ``oneOf``: exactly one).
    """
    return _rewrite(result)


def _rewrite(node: Any) -> Any:
    if isinstance(node, dict):
        one_of = node.get("oneOf")
        if (
            isinstance(one_of, list)
            and len(one_of) == 2
            and {} in one_of
            and ({"type": "null"} in one_of)
        ):
            rest = {key: value for key, value in node.items() if key != "oneOf"}
            return _rewrite(rest)
        return {key: _rewrite(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_rewrite(item) for item in node]
    return node
