"""The call log's capture policy: what a tool's calls keep of their arguments and results.

Nothing, metadata only (the payload's shape), or the payload itself with secrets redacted and
a byte cap; and the safe-text rules every stored string passes (PostgreSQL refuses NUL and
lone surrogates). Pure functions: the writer thread applies them, never the request path.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from mcp_app.models import Tool

Capture = Tool.Capture

REDACTED = "[redacted]"
# Key names that always hold secrets, matched as substrings of the lower-cased name with "-"
# read as "_": "secrets and tokens never appear" holds even when an operator forgot to list one.
SECRET_NAME_PARTS = (
    "password", "passwd", "secret", "token", "api_key", "apikey", "authorization", "cookie",
    "private_key", "credential",
)  # fmt: skip
# Schemes of an Authorization value ("Bearer X"): the credentials after one are a secret of
# their own, which a payload may carry bare.
AUTH_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "dpop", "apikey", "mac"})
# Secret values shorter than this are redacted under their key but not scrubbed elsewhere.
MIN_SCRUB_CHARS = 4
# Depth past which captured JSON is cut: redaction walks it recursively.
MAX_DEPTH = 32
# Metadata capture describes at most this many keys per object and this many levels.
METADATA_KEYS = 50
METADATA_DEPTH = 3
# Capture policy of messages that are not tool calls (lists, reads, prompts, lifecycle).
DEFAULT_POLICY_MODE = Capture.METADATA


@dataclass(frozen=True, slots=True)
class CapturePolicy:
    """What one tool's calls keep of their arguments and results."""

    mode: str = DEFAULT_POLICY_MODE
    max_bytes: int = 4096
    # Lower-cased field names redacted at any depth, besides the secret-looking ones.
    redact: frozenset[str] = frozenset()


def parse_redact_names(text: str) -> frozenset[str]:
    """Split the admin's "redacted fields" text (lines or commas) into lower-cased names."""
    return frozenset(
        name.strip().lower()
        for line in text.splitlines()
        for name in line.split(",")
        if name.strip()
    )


def secret_fields_of_schema(schema: Any) -> frozenset[str]:
    """Return the names of input properties marked secret (``writeOnly`` or format password)."""
    found: set[str] = set()

    def walk(node: Any, depth: int) -> None:
        if not isinstance(node, Mapping) or depth > MAX_DEPTH:
            return
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            for name, spec in properties.items():
                if isinstance(spec, Mapping):
                    if spec.get("writeOnly") is True or spec.get("format") == "password":
                        found.add(str(name).lower())
                    walk(spec, depth + 1)
        for key in ("items", "additionalProperties"):
            walk(node.get(key), depth + 1)
        for defs in ("$defs", "definitions"):
            if isinstance(node.get(defs), Mapping):
                for spec in node[defs].values():
                    walk(spec, depth + 1)

    walk(schema, 0)
    return frozenset(found)


def is_secret_name(name: str, redact: frozenset[str] = frozenset()) -> bool:
    lowered = name.lower()
    if lowered in redact:
        return True
    normalized = lowered.replace("-", "_")
    return any(part in normalized for part in SECRET_NAME_PARTS)


def redact(
    value: Any, names: frozenset[str] = frozenset(), found: set[str] | None = None, depth: int = 0
) -> Any:
    """Return ``value`` with the values of secret or listed keys replaced, at any depth.

    The string values replaced are added to ``found``, so ``scrub`` can remove them from
    elsewhere too (a tool echoing its API key in a text block).
    """
    if depth > MAX_DEPTH:
        return "[too deep]"
    if isinstance(value, Mapping):
        cleaned = {}
        for key, item in value.items():
            if is_secret_name(str(key), names):
                cleaned[str(key)] = REDACTED
                if found is not None:
                    _collect_strings(item, found, depth + 1)
            else:
                cleaned[str(key)] = redact(item, names, found, depth + 1)
        return cleaned
    if isinstance(value, list | tuple):
        return [redact(item, names, found, depth + 1) for item in value]
    return value


def _collect_strings(value: Any, found: set[str], depth: int) -> None:
    if depth > MAX_DEPTH:
        return
    if isinstance(value, str):
        # Short values ("1", "yes") would blank out unrelated text; they leak little alone.
        if len(value) >= MIN_SCRUB_CHARS:
            found.add(value)
            scheme, _, credentials = value.strip().partition(" ")
            credentials = credentials.strip()
            if scheme.lower() in AUTH_SCHEMES and len(credentials) >= MIN_SCRUB_CHARS:
                found.add(credentials)
    elif isinstance(value, Mapping):
        for item in value.values():
            _collect_strings(item, found, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            _collect_strings(item, found, depth + 1)


def scrub(value: Any, secrets: Iterable[str], depth: int = 0) -> Any:
    """Replace every occurrence of each of ``secrets`` inside the strings of ``value``."""
    ordered = sorted(secrets, key=len, reverse=True)  # a secret containing another goes whole
    if not ordered or depth > MAX_DEPTH:
        return value
    if isinstance(value, str):
        for secret in ordered:
            value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, Mapping):
        return {key: scrub(item, ordered, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(item, ordered, depth + 1) for item in value]
    return value


# What describe() says of each plain JSON leaf type, looked up before any isinstance ladder.
_LEAVES: dict[type, str] = {
    str: "<string>", bool: "<boolean>", int: "<number>", float: "<number>", type(None): "<null>"
}  # fmt: skip


def describe(value: Any, depth: int = 0) -> Any:
    """Metadata capture: the payload's shape (keys and value types), never its values."""
    kind = type(value)
    leaf = _LEAVES.get(kind)
    if leaf is not None:
        return leaf
    if kind is dict or isinstance(value, Mapping):
        if depth >= METADATA_DEPTH:
            return f"<object of {len(value)} keys>"
        described = {
            str(key): describe(item, depth + 1)
            for key, item in itertools.islice(value.items(), METADATA_KEYS)
        }
        if len(value) > METADATA_KEYS:
            described["…"] = f"<{len(value) - METADATA_KEYS} more keys>"
        return described
    if isinstance(value, list | tuple):
        return f"<array of {len(value)}>"
    if isinstance(value, bool):
        return "<boolean>"
    if isinstance(value, int | float):
        return "<number>"
    if isinstance(value, str):
        return "<string>"
    return "<null>" if value is None else f"<{type(value).__name__}>"


@dataclass(frozen=True, slots=True)
class Captured:
    """One payload after the policy: what is stored, its original size, and whether it was cut."""

    value: Any = None
    size: int | None = None
    truncated: bool = False


def capture_call(
    arguments: Any,
    result: Any,
    policy: CapturePolicy,
    secret_fields: frozenset[str],
    secrets: Iterable[str] = (),
) -> tuple[Captured, Captured]:
    """Apply ``policy`` to a call's arguments and result.

    Secret-looking keys, the policy's listed fields and the tool's secret input fields are
    redacted, and their values (and ``secrets``, the caller's own credentials) scrubbed from
    every other string of both payloads, before anything is measured against the cap: a cut
    never exposes a prefix of a secret. The credentials of an Authorization value ("Bearer
    X") are scrubbed bare too.
    """
    if policy.mode == Capture.NONE:
        return Captured(), Captured()
    if policy.mode == Capture.METADATA:
        # Types and key names hold no values, so nothing needs redacting: no walk of the
        # payload in Python (a tools/list result is the whole catalog).
        return _describe(arguments), _describe(result)
    names = policy.redact | secret_fields
    found = set(secrets)
    cleaned_arguments = redact(arguments, names, found)
    cleaned_result = redact(result, names, found)
    if found:
        cleaned_arguments = scrub(cleaned_arguments, found)
        cleaned_result = scrub(cleaned_result, found)
    return _fit(cleaned_arguments, policy), _fit(cleaned_result, policy)


def tool_capture(tool: Tool | None) -> tuple[CapturePolicy, frozenset[str]]:
    """``tool``'s capture policy and its secret input fields (None, a deleted tool: the
    default policy, metadata only)."""
    if tool is None:
        return CapturePolicy(), frozenset()
    policy = CapturePolicy(
        tool.capture_mode, tool.capture_max_bytes, parse_redact_names(tool.capture_redact)
    )
    return policy, secret_fields_of_schema(tool.input_schema)


def as_captured(tool: Tool | None, arguments: Any, result: Any) -> tuple[Any, Any]:
    """A call's whole arguments and result as the call log keeps them under ``tool``'s policy.

    A background call's row keeps both whole (its worker needs them); what staff see of it
    passes the same policy as its call-log row, so no view shows more than /audit/ does.
    """
    policy, secret_fields = tool_capture(tool)
    kept_arguments, kept_result = capture_call(arguments, result, policy, secret_fields)
    return kept_arguments.value, kept_result.value


def _describe(value: Any) -> Captured:
    if value is None:
        return Captured()
    return Captured(describe(value), len(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)))


def _fit(value: Any, policy: CapturePolicy) -> Captured:
    if value is None:
        return Captured()
    encoded = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    if len(encoded) <= policy.max_bytes:
        return Captured(value, len(encoded))
    head = encoded[: policy.max_bytes].decode("utf-8", errors="ignore")
    marker = {
        "truncated": True,
        "bytes": len(encoded),
        "kept_bytes": policy.max_bytes,
        "head": head,
    }
    return Captured(marker, len(encoded), truncated=True)


# -- safe text: what PostgreSQL's text and jsonb accept -------------------------------------

# PostgreSQL text and jsonb reject U+0000, and UTF-8 cannot encode a lone surrogate: both are
# replaced by U+FFFD in every stored string, so no character a client sends keeps its call out
# of the log.
REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def safe_text(text: str) -> str:
    """Return ``text`` with U+0000 and lone surrogates replaced by U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", REPLACEMENT)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(REPLACEMENT, text)
    return text


def safe_json(value: Any, depth: int = 0) -> Any:
    """Return ``value`` with ``safe_text`` applied to every string and key, at any depth."""
    if isinstance(value, str):
        return safe_text(value)
    if depth > MAX_DEPTH:
        return "[too deep]"
    if isinstance(value, Mapping):
        return {safe_text(str(key)): safe_json(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [safe_json(item, depth + 1) for item in value]
    return value


def json_text(value: Any) -> str | None:
    """Serialise a captured payload for a jsonb column, made safe only when it needs to be."""
    if value is None:
        return None
    try:
        encoded = orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:  # a lone surrogate
        encoded = b""
    # The escape of U+0000 is the only way it appears in orjson's output; an escaped
    # backslash followed by "u0000" also matches, and only costs a needless walk.
    if not encoded or b"\\u0000" in encoded:
        encoded = orjson.dumps(safe_json(value), default=str, option=orjson.OPT_NON_STR_KEYS)
    return encoded.decode()
