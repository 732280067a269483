"""Redaction of a credential's secrets from what a tool call hands back.

A server that echoes its request (URL, headers, body) must not hand the secret to the model,
the call log or our log lines, and the call log's own redaction only knows secrets by key
name. ``Redactor`` replaces every form a secret goes out in (raw, percent-encoded, and inside
base64 payloads: a Basic header, an image or a blob) by ``[redacted]``. HTTP tools redact
their results, the upstream relay every message of the upstream, and credential token
fetches their errors.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, quote_plus

from mcp_app.protocol.results import ToolResult

REDACTED = "[redacted]"
# Message members that carry base64: ``data`` of image and audio blocks, ``blob`` always.
_BASE64_TYPES = ("image", "audio")


class Redactor:
    """Replaces every form of the credential's secrets by ``[redacted]``."""

    def __init__(self, secrets: Sequence[str]) -> None:
        # quote() with its default safe "/" is how build_url encodes a credential's query.
        forms = {form for secret in secrets if secret
                 for form in (secret, quote(secret, safe=""), quote(secret),
                              quote_plus(secret))}  # fmt: skip
        # Longest first, so a secret containing another is replaced whole.
        self._forms = sorted(forms, key=len, reverse=True)
        self._byte_forms = [form.encode() for form in self._forms]

    def __call__(self, text: str) -> str:
        for form in self._forms:
            text = text.replace(form, REDACTED)
        return text

    def data(self, data: bytes) -> bytes:
        """Redact a binary body (UTF-8 forms of the secrets)."""
        for form in self._byte_forms:
            data = data.replace(form, REDACTED.encode())
        return data

    def value(self, value: Any) -> Any:
        """Redact every string (object keys too) of a JSON value."""
        if not self._forms:
            return value
        if isinstance(value, str):
            return self(value)
        if isinstance(value, Mapping):
            return {self(str(key)): self.value(member) for key, member in value.items()}
        if isinstance(value, list):
            return [self.value(item) for item in value]
        return value

    def result(self, result: ToolResult) -> ToolResult:
        """Redact a tool result: its text, structured content, and base64 payloads."""
        if not self._forms:
            return result
        content = []
        for block in result.content:
            redacted = dict(self.value(dict(block)))
            if block.get("type") in ("image", "audio") and isinstance(block.get("data"), str):
                redacted["data"] = self._base64(block["data"])
            resource = block.get("resource")
            if isinstance(resource, Mapping) and isinstance(resource.get("blob"), str):
                redacted["resource"] = {
                    **redacted["resource"],
                    "blob": self._base64(resource["blob"]),
                }
            content.append(redacted)
        return ToolResult(
            content=content,
            structured=(
                self.value(result.structured) if result.has_structured else result.structured
            ),
            is_error=result.is_error,
            meta=self.value(result.meta) if result.meta is not None else None,
        )

    def _base64(self, text: str) -> str:
        try:
            raw = base64.b64decode(text, validate=True)
        except ValueError:
            return text
        return base64.b64encode(self.data(raw)).decode("ascii")

    def message(self, value: Any) -> Any:
        """Redact a JSON-RPC message: every string, keys too, and the secrets its base64
        payloads carry at any depth (``data`` of image and audio blocks, ``blob`` of resource
        contents)."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, list):
            return [self.message(item) for item in value]
        if not isinstance(value, dict):
            return value
        scrubbed = {self(key): self.message(member) for key, member in value.items()}
        for name in ("data", "blob"):
            payload = value.get(name)
            if isinstance(payload, str) and (name == "blob" or value.get("type") in _BASE64_TYPES):
                scrubbed[name] = self._rebase64(payload)
        return scrubbed

    def _rebase64(self, text: str) -> str:
        try:
            raw = base64.b64decode(text, validate=True)
        except ValueError:
            return self(text)
        return self(base64.b64encode(self.data(raw)).decode("ascii"))


@functools.lru_cache(maxsize=64)
def redactor_for(secrets: tuple[str, ...]) -> Redactor:
    """Return the (shared) ``Redactor`` of ``secrets``; building one per message is waste."""
    return Redactor(secrets)
