"""Defaults and validators that migrations reference: this module never moves.

Migrations freeze the import path of every default and validator they mention (``deconstruct()``),
so they live here and nowhere else. The validators check one value at a time; rules that span rows
(tool names unique per endpoint) live in ``mcp_app.services.catalog_writes``.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

import uritemplate
from django.core.exceptions import ValidationError
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

from mcp_app.conf import get_conf
from mcp_app.protocol.apps import ui_meta_problems
from mcp_app.protocol.inbound import find_invalid_x_mcp_header
from mcp_app.protocol.metaschema import check_schema

# 2025-11-25 server/tools "Tool names": 1-128 characters of A-Z a-z 0-9 _ - . (case-sensitive).
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
_URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
_ICON_KEYS = frozenset({"src", "mimeType", "sizes", "theme"})
# An icon uploaded to this site (mcp_app.services.icons): stored as its path, served from
# ``PUBLIC_BASE_URL`` (the site may move; the path never does).
UPLOADED_ICON_PATH = re.compile(r"/icons/[0-9a-f]{64}\.(png|jpg|webp|gif)")


def default_input_schema() -> dict[str, Any]:
    """Return the schema of a tool that takes no arguments."""
    return {"type": "object", "properties": {}}


def empty_list() -> list[Any]:
    return []


def empty_dict() -> dict[str, Any]:
    return {}


def validate_mcp_name(value: str) -> None:
    """Accept 1-128 characters of ``A-Z a-z 0-9 _ - .`` (tool and prompt names)."""
    if not NAME_PATTERN.fullmatch(value):
        raise ValidationError(
            "Use 1 to 128 characters: letters, digits, underscore, hyphen and dot only.",
            code="invalid_name",
        )


def validate_absolute_uri(value: str) -> None:
    """Accept an absolute URI: a scheme followed by ``:`` and something (RFC 3986 section 4.3)."""
    scheme, sep, rest = value.partition(":")
    if not sep or not rest or not _URI_SCHEME.fullmatch(scheme) or any(c.isspace() for c in value):
        raise ValidationError(
            "Enter an absolute URI with a scheme, e.g. file:///docs/readme.md or demo://readme.",
            code="invalid_uri",
        )


def validate_uri_template(value: str) -> None:
    """Accept an RFC 6570 URI template with at least one variable."""
    try:
        template = uritemplate.URITemplate(value)
    except Exception as exc:  # uritemplate raises assorted errors on malformed input
        raise ValidationError(f"Not a valid RFC 6570 URI template: {exc}", code="invalid") from exc
    if not template.variable_names:
        raise ValidationError(
            "A URI template needs at least one {variable}; use a resource for a fixed URI.",
            code="no_variables",
        )
    validate_absolute_uri(value)


def validate_json_object(value: Any) -> None:
    if not isinstance(value, dict):
        raise ValidationError("Enter a JSON object ({...}).", code="not_object")


def validate_ui_meta(value: Any) -> None:
    """Accept a resource's MCP Apps ``_meta.ui`` object (protocol/apps.py): known keys only."""
    problems = ui_meta_problems(value)
    if problems:
        raise ValidationError(problems, code="invalid_ui_meta")


def validate_icons(value: Any) -> None:
    """Accept a list of MCP ``Icon`` objects (2025-11-25 basic/index, "Icons")."""
    if not isinstance(value, list):
        raise ValidationError("Icons must be a JSON list of objects.", code="invalid_icons")
    for index, icon in enumerate(value, start=1):
        where = f"Icon {index}"
        if not isinstance(icon, dict):
            raise ValidationError(f"{where} must be an object.", code="invalid_icons")
        if unknown := sorted(set(icon) - _ICON_KEYS):
            raise ValidationError(
                f"{where} has unknown keys: {', '.join(unknown)} (allowed: src, mimeType, sizes, "
                "theme).",
                code="invalid_icons",
            )
        src = icon.get("src")
        if not isinstance(src, str) or not (
            src.startswith(("https://", "http://", "data:")) or UPLOADED_ICON_PATH.fullmatch(src)
        ):
            raise ValidationError(
                f"{where}: src must be an https: (or http:) URL, a data: URI or an uploaded "
                "icon's /icons/ path.",
                code="invalid_icons",
            )
        # A data: URI is stored and sent in every list as it is: held to the upload limit
        # (base64 takes 4 characters per 3 bytes, plus the media type).
        limit = get_conf().MCP_MAX_ICON_BYTES
        if src.startswith("data:") and len(src) > limit * 4 // 3 + 100:
            raise ValidationError(
                f"{where}: a data: URI icon may hold at most {limit} bytes; upload the image "
                "instead.",
                code="invalid_icons",
            )
        if "mimeType" in icon and not isinstance(icon["mimeType"], str):
            raise ValidationError(f"{where}: mimeType must be a string.", code="invalid_icons")
        sizes = icon.get("sizes", [])
        if not isinstance(sizes, list) or not all(isinstance(s, str) for s in sizes):
            raise ValidationError(
                f'{where}: sizes must be a list of strings such as "48x48" or "any".',
                code="invalid_icons",
            )
        if icon.get("theme", "light") not in ("light", "dark"):
            raise ValidationError(
                f'{where}: theme must be "light" or "dark".', code="invalid_icons"
            )


def validate_origin_lines(value: str) -> None:
    """Accept one origin per line (``scheme://host[:port]``; a trailing slash is tolerated)."""
    for number, raw in enumerate(value.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        parts = urlsplit(line)
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.path not in ("", "/")
            or parts.query
            or parts.fragment
            or parts.username
            or parts.password
        ):
            raise ValidationError(
                f"Line {number}: {line!r} is not an origin; write scheme://host[:port], e.g. "
                "https://app.example.com.",
                code="invalid_origin",
            )
        try:
            parts.port  # noqa: B018  (raises ValueError on a malformed port)
        except ValueError as exc:
            raise ValidationError(
                f"Line {number}: {line!r} has an invalid port.", code="invalid_origin"
            ) from exc


def validate_input_schema(value: Any) -> None:
    """Accept a JSON Schema whose root is an object schema, with valid x-mcp-header marks."""
    _check_schema(value, "Input schema")
    find_x_mcp_header_problem(value)


def validate_output_schema(value: Any) -> None:
    """Accept ``None`` or a JSON Schema whose root is an object schema.

    Legacy revisions (2025-06-18, 2025-11-25) require an object-rooted ``outputSchema``, and
    legacy clients are served from the same row, so the root stays an object for every era.
    """
    if value is None:
        return
    _check_schema(value, "Output schema")


# The schemas found valid inside ``schema_checks_remembered`` (as canonical JSON), or None.
_valid_schemas: ContextVar[set[str] | None] = ContextVar("mcp_valid_schemas", default=None)


@contextlib.contextmanager
def schema_checks_remembered() -> Iterator[None]:
    """Check each distinct schema against its dialect once inside the block.

    That check is the largest part of what validating a tool costs (about 0.07 ms a schema
    by protocol/metaschema.py's route, 0.5 ms by jsonschema's own), and a catalog import
    often checks the same schema for many tools, and a changed tool twice (while planning,
    and in the write path no interface may skip). The check depends on the schema alone, so
    a schema found valid stays valid; one found invalid is checked again, for its message,
    each time.
    """
    if _valid_schemas.get() is not None:
        yield
        return
    token = _valid_schemas.set(set())
    try:
        yield
    finally:
        _valid_schemas.reset(token)


def _schema_key(value: dict[str, Any]) -> str | None:
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):  # not JSON: checked (and refused) every time
        return None


def _check_schema(value: Any, label: str) -> None:
    if not isinstance(value, dict):
        raise ValidationError(f"{label} must be a JSON object.", code="not_object")
    # Without $schema, 2020-12 is the default dialect (2025-11-25 basic/index, "JSON Schema").
    validator = validator_for(value, default=Draft202012Validator)
    valid = _valid_schemas.get()
    key = _schema_key(value) if valid is not None else None
    try:
        if key is None or valid is None or key not in valid:
            # jsonschema's check_schema, or the quicker check that accepts only what it does
            # (protocol/metaschema.py); a refusal's message is check_schema's.
            check_schema(validator, value)
            if key is not None and valid is not None:
                valid.add(key)
    except SchemaError as exc:
        dialect = _dialect_name(validator)
        where = "/".join(str(p) for p in exc.absolute_path)
        at = f" at /{where}" if where else ""
        raise ValidationError(
            f"{label} is not a valid JSON Schema {dialect}{at}: {exc.message}",
            code="invalid_schema",
        ) from exc
    if value.get("type") != "object":
        raise ValidationError(
            f'{label} must have "type": "object" at its root (MCP tools take and return JSON '
            "objects).",
            code="root_not_object",
        )


def _dialect_name(validator: Any) -> str:
    name = validator.__name__.removeprefix("Draft").removesuffix("Validator")
    return {"202012": "2020-12", "201909": "2019-09"}.get(name, f"draft {name}")


def find_x_mcp_header_problem(schema: Any) -> None:
    """Reject x-mcp-header marks that modern clients would refuse (2026-07-28 basic/transports).

    The rule itself lives in the protocol core, which also relies on it when checking
    ``Mcp-Param-*`` headers; this turns its finding into a form error.
    """
    problem = find_invalid_x_mcp_header(schema)
    if problem is not None:
        raise ValidationError(f"Input schema: {problem}.", code="invalid_x_mcp_header")
