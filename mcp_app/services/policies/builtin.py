"""The built-in policy kinds: mask secrets and personal data, deny arguments, cap result size.

- ``mask``: replaces API keys and tokens of common shapes, emails, card numbers (Luhn-checked)
  and phone numbers in every string of a result, and in the arguments the call log keeps (the
  call itself gets them as sent). Which patterns, and extra ones, are configurable.
- ``deny``: refuses a call whose arguments (a resource read's URI) match a pattern.
- ``max_result_size``: refuses to pass on a result larger than a number of bytes (JSON).
- ``confirm_destructive``: asks the user to confirm (elicitation) before a tool marked
  destructive (``destructiveHint``) runs; ``services.policies.confirm`` asks.

Each leaves a result it has already rewritten as it is (a masked value matches no pattern
again), so applying one twice, on a worker and then in the web process, changes nothing more.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from mcp_app.protocol.policies import RESOURCES_READ, TOOLS_CALL, PolicyCall
from mcp_app.services.policies.base import Decision, PolicyConfigError, PolicyKind, config_keys

# How deep a payload is walked: deeper values pass unchanged (a payload is bounded anyway).
MAX_DEPTH = 64
# Patterns an operator writes are bounded in length; Python's re has no time limit.
MAX_PATTERN_CHARS = 500


def _luhn(digits: str) -> bool:
    total = 0
    for i, char in enumerate(reversed(digits)):
        value = int(char)
        if i % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _card(match: re.Match[str]) -> bool:
    digits = re.sub(r"\D", "", match.group(0))
    return 13 <= len(digits) <= 19 and _luhn(digits)


# Built-in patterns by name, each with an optional check of a match (a card's Luhn digit).
BUILTIN_PATTERNS: dict[str, tuple[str, Callable[[re.Match[str]], bool] | None]] = {
    "private_key": (
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
        None,
    ),
    "jwt": (r"\beyJ[\w-]{5,}\.eyJ[\w-]{5,}\.[\w-]{5,}", None),
    "bearer": (r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{16,}=*", None),
    # OpenAI / Anthropic (sk-, sk-ant-), Stripe (sk_live_, rk_test_), GitHub, Slack, AWS, Google.
    "api_key": (
        r"\b(?:sk-[A-Za-z0-9_-]{16,}|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"
        r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|xox[abprs]-[A-Za-z0-9-]{10,}"
        r"|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35})",
        None,
    ),
    "email": (r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b", None),
    "card": (r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])", _card),
    # International (+...), with an area code in parentheses, or North American 3-3-4.
    "phone": (
        r"(?<![\w+])(?:\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]?\d{2,4}){1,3}"
        r"|\(\d{2,4}\)[ .-]?\d{3,4}[ .-]?\d{3,4}|\d{3}[.-]\d{3}[.-]\d{4})(?!\w)",
        None,
    ),
}
DEFAULT_REPLACEMENT = "[masked:{name}]"
# What the default replacement leaves in a masked value ("[masked:email]"): a replay
# (services/replay.py) does not run logged arguments holding it as if they were real.
MASKED_MARKER = re.compile(r"\[masked:[^\]\s]{1,100}\]")


def mask_markers(config: Mapping[str, Any]) -> frozenset[str]:
    """The texts a mask policy configured by ``config`` writes in place of what it masks in
    the logged arguments (its replacement, once per pattern name); none when it leaves the
    arguments alone or its config does not parse."""
    try:
        prepared = MaskPolicy().prepare(config)
    except PolicyConfigError:
        return frozenset()
    if not prepared.arguments:
        return frozenset()
    markers = {prepared.replacement.replace("{name}", p.name) for p in prepared.patterns}
    return frozenset(marker for marker in markers if marker.strip())


@dataclass(frozen=True, slots=True)
class _Pattern:
    name: str
    regex: re.Pattern[str]
    check: Callable[[re.Match[str]], bool] | None = None


def _compile(text: Any, key: str) -> re.Pattern[str]:
    if not isinstance(text, str) or not text or len(text) > MAX_PATTERN_CHARS:
        raise PolicyConfigError(
            f"A pattern must be a non-empty string of at most {MAX_PATTERN_CHARS} characters.",
            key,
        )
    try:
        return re.compile(text)
    except re.error as exc:
        raise PolicyConfigError(f"Invalid regular expression {text!r}: {exc}.", key) from None


def _string_list(config: Mapping[str, Any], key: str) -> list[Any]:
    value = config.get(key, [])
    if not isinstance(value, list):
        raise PolicyConfigError(f"{key} must be a list.", key)
    return value


def _walk(value: Any, change: Callable[[str], str], depth: int = 0) -> Any:
    """``value`` with ``change`` applied to every string in it (keys stay as they are)."""
    if isinstance(value, str):
        return change(value)
    if depth >= MAX_DEPTH:
        return value
    if isinstance(value, Mapping):
        return {key: _walk(item, change, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(item, change, depth + 1) for item in value]
    return value


@dataclass(frozen=True, slots=True)
class _Mask:
    patterns: tuple[_Pattern, ...]
    replacement: str
    arguments: bool


class MaskPolicy(PolicyKind):
    """Masks secrets and personal data in results, in what a tool call tells the client while
    it runs (progress messages, log notifications) and in the arguments the call log keeps.

    Config: ``patterns`` (built-in names; default all of them), ``extra`` (name -> regular
    expression), ``replacement`` (``{name}`` is the pattern's name; default
    ``[masked:{name}]``), ``arguments`` (mask the logged arguments too; default true).
    """

    kind = "mask"
    label = "Mask secrets and personal data"

    def prepare(self, config: Mapping[str, Any]) -> _Mask:
        config_keys(config, {"patterns", "extra", "replacement", "arguments"})
        names = _string_list(config, "patterns") if "patterns" in config else list(BUILTIN_PATTERNS)
        patterns = []
        for name in names:
            if name not in BUILTIN_PATTERNS:
                raise PolicyConfigError(
                    f"Unknown pattern {name!r}; built-in: {', '.join(BUILTIN_PATTERNS)}.",
                    "patterns",
                )
            text, check = BUILTIN_PATTERNS[name]
            patterns.append(_Pattern(name, re.compile(text), check))
        extra = config.get("extra", {})
        if not isinstance(extra, Mapping):
            raise PolicyConfigError("extra must map names to regular expressions.", "extra")
        for name, text in extra.items():
            patterns.append(_Pattern(str(name), _compile(text, "extra")))
        if not patterns:
            raise PolicyConfigError("Name at least one pattern.", "patterns")
        replacement = config.get("replacement", DEFAULT_REPLACEMENT)
        if not isinstance(replacement, str) or len(replacement) > 100:
            raise PolicyConfigError(
                "replacement must be text of at most 100 characters.", "replacement"
            )
        arguments = config.get("arguments", True)
        if not isinstance(arguments, bool):
            raise PolicyConfigError("arguments must be true or false.", "arguments")
        return _Mask(tuple(patterns), replacement, arguments)

    def after(
        self, prepared: _Mask, call: PolicyCall, result: Mapping[str, Any]
    ) -> Decision | None:
        return self._masked(prepared, result)

    def notification(
        self, prepared: _Mask, call: PolicyCall, content: Mapping[str, Any]
    ) -> Decision | None:
        return self._masked(prepared, content)

    def logged_arguments(self, prepared: _Mask, call: PolicyCall, arguments: Any) -> Any:
        if not prepared.arguments or not arguments:
            return None
        decision = self._masked(prepared, arguments)
        return decision.replacement if decision is not None else None

    @staticmethod
    def _masked(prepared: _Mask, value: Any) -> Decision | None:
        counts: dict[str, int] = {}

        def change(text: str) -> str:
            for pattern in prepared.patterns:
                text = pattern.regex.sub(functools.partial(sub, pattern), text)
            return text

        def sub(pattern: _Pattern, match: re.Match[str]) -> str:
            if pattern.check is not None and not pattern.check(match):
                return match.group(0)
            counts[pattern.name] = counts.get(pattern.name, 0) + 1
            return prepared.replacement.replace("{name}", pattern.name)

        masked = _walk(value, change)
        if not counts:
            return None
        detail = ", ".join(f"{count} {name}" for name, count in sorted(counts.items()))
        return Decision("masked", detail, replacement=masked)


@dataclass(frozen=True, slots=True)
class _Deny:
    patterns: tuple[re.Pattern[str], ...]
    fields: frozenset[str]
    reason: str


class DenyPolicy(PolicyKind):
    """Refuses a call whose arguments match a pattern (a resource read: its URI).

    Config: ``patterns`` (regular expressions, searched in every string argument),
    ``fields`` (only these top-level arguments; default all), ``reason`` (what the caller is
    told; default names the argument).
    """

    kind = "deny"
    label = "Refuse arguments matching deny patterns"

    def prepare(self, config: Mapping[str, Any]) -> _Deny:
        config_keys(config, {"patterns", "fields", "reason"})
        patterns = tuple(_compile(text, "patterns") for text in _string_list(config, "patterns"))
        if not patterns:
            raise PolicyConfigError("Name at least one pattern.", "patterns")
        fields = _string_list(config, "fields")
        if not all(isinstance(name, str) for name in fields):
            raise PolicyConfigError("fields must be argument names.", "fields")
        reason = config.get("reason", "")
        if not isinstance(reason, str) or len(reason) > 500:
            raise PolicyConfigError("reason must be text of at most 500 characters.", "reason")
        return _Deny(patterns, frozenset(fields), reason)

    def before(
        self, prepared: _Deny, call: PolicyCall, arguments: Mapping[str, Any]
    ) -> Decision | None:
        for name, value in arguments.items():
            if prepared.fields and name not in prepared.fields:
                continue
            if _matches(value, prepared.patterns):
                what = "the URI" if call.operation == RESOURCES_READ else f"argument {name!r}"
                reason = prepared.reason or f"{what} matches a deny pattern"
                return Decision("refused", f"{what} matched", refusal=reason)
        return None


def _matches(value: Any, patterns: tuple[re.Pattern[str], ...], depth: int = 0) -> bool:
    """Whether a string in ``value`` matches one of ``patterns``."""
    if isinstance(value, str):
        return any(pattern.search(value) for pattern in patterns)
    if depth >= MAX_DEPTH:
        return False
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return any(_matches(item, patterns, depth + 1) for item in value)
    return False


class MaxResultSizePolicy(PolicyKind):
    """Refuses to pass on a result larger than ``max_bytes`` (its JSON, UTF-8)."""

    kind = "max_result_size"
    label = "Cap the result size"

    def prepare(self, config: Mapping[str, Any]) -> int:
        config_keys(config, {"max_bytes"})
        limit = config.get("max_bytes")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise PolicyConfigError("max_bytes must be a whole number of at least 1.", "max_bytes")
        return limit

    def after(self, prepared: int, call: PolicyCall, result: Mapping[str, Any]) -> Decision | None:
        size = len(orjson.dumps(result))
        if size <= prepared:
            return None
        return Decision(
            "refused",
            f"{size} bytes",
            refusal=f"the result ({size} bytes) exceeds the {prepared}-byte limit",
        )


@dataclass(frozen=True, slots=True)
class _Confirm:
    message: str
    unmarked: bool


class ConfirmDestructivePolicy(PolicyKind):
    """Asks the user to confirm before a tool marked destructive runs.

    A tool is destructive when its annotations say ``destructiveHint: true``; with
    ``unmarked: true``, also when they say nothing of it and the tool is not read-only (the
    spec's default for ``destructiveHint``, 2025-06-18 server/tools, "ToolAnnotations").
    Config: ``message`` (``{tool}`` is the tool's name), ``unmarked``.
    """

    kind = "confirm_destructive"
    label = "Ask the user before a destructive tool runs"
    operations = frozenset({TOOLS_CALL})

    def prepare(self, config: Mapping[str, Any]) -> _Confirm:
        config_keys(config, {"message", "unmarked"})
        message = config.get("message", "Run {tool}? It may change or delete data.")
        if not isinstance(message, str) or not message.strip() or len(message) > 500:
            raise PolicyConfigError("message must be text of 1 to 500 characters.", "message")
        unmarked = config.get("unmarked", False)
        if not isinstance(unmarked, bool):
            raise PolicyConfigError("unmarked must be true or false.", "unmarked")
        return _Confirm(message, unmarked)

    def confirmation(
        self, prepared: _Confirm, call: PolicyCall, arguments: Mapping[str, Any]
    ) -> str | None:
        hints = call.annotations
        destructive = hints.get("destructiveHint")
        if destructive is None and prepared.unmarked:
            destructive = not hints.get("readOnlyHint", False)
        return prepared.message.replace("{tool}", call.target) if destructive is True else None
