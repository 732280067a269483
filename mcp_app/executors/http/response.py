"""An http tool's response mapped to a tool result (statuses, JSON and ``select``, media).

An unexpected status is an error result with a short, redacted excerpt; a JSON body becomes
``structuredContent`` (after ``select``) and its text; image/* an image block; text a text
block; anything else an embedded binary resource.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

import orjson

from mcp_app.conf import get_conf
from mcp_app.executors.http.config import HttpConfig
from mcp_app.executors.netguard import FetchedResponse, safe_url
from mcp_app.executors.redaction import Redactor
from mcp_app.protocol.results import ToolError, ToolResult

EXCERPT_CHARS = 500


def apply_select(value: Any, steps: Sequence[str | int], path: str) -> Any:
    """Return the part of ``value`` at ``steps`` (parsed from ``path``).

    Raises:
        ToolError: the path does not exist in ``value``.
    """
    current = value
    for step in steps:
        if isinstance(step, int) and isinstance(current, list):
            found = -len(current) <= step < len(current)
        else:
            found = isinstance(step, str) and isinstance(current, dict) and step in current
        if found:
            current = current[step]
        else:
            raise ToolError(f"The response has nothing at {path!r} (select).")
    return current


def _status_expected(status: int, expected: Sequence[Any]) -> bool:
    for item in expected:
        if isinstance(item, str) and item[0] == str(status // 100):
            return True
        if item == status:
            return True
    return False


def map_response(response: FetchedResponse, config: HttpConfig, redactor: Redactor) -> ToolResult:
    """Turn a response into a tool result (see the module docstring)."""
    content_type = response.content_type
    if not _status_expected(response.status, config.expected_status):
        excerpt = _excerpt(response, redactor)
        detail = f": {excerpt}" if excerpt else ""
        return ToolResult.error(
            f"HTTP {response.status} {response.reason} from {safe_url(response.url)}{detail}"
        )
    select = config.select
    if content_type == "application/json" or content_type.endswith("+json"):
        try:
            value = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            raise ToolError(
                f"{safe_url(response.url)} sent invalid JSON (Content-Type {content_type})."
            ) from None
        if select:
            value = apply_select(value, config.select_steps, select)
        # Before the text is made: a secret holding a quote or backslash is escaped there.
        value = redactor.value(value)
        text = json.dumps(value, indent=2, ensure_ascii=False)
        limit = get_conf().MCP_HTTP_MAX_RESPONSE_BYTES
        if len(text) > limit:
            text = text[:limit] + "\n... (truncated)"
        return ToolResult(content=[{"type": "text", "text": text}], structured=value)
    if select:
        raise ToolError(
            f"select needs a JSON response; {safe_url(response.url)} sent "
            f"{content_type or 'no Content-Type'}."
        )
    if not response.content:
        return ToolResult.text(f"HTTP {response.status} {response.reason} (empty body)")
    if content_type.startswith("image/"):
        data = base64.b64encode(response.content).decode("ascii")
        return ToolResult(content=[{"type": "image", "data": data, "mimeType": content_type}])
    if _is_textual(content_type):
        return ToolResult.text(_decode(response))
    blob = base64.b64encode(response.content).decode("ascii")
    resource = {
        "uri": safe_url(response.url),
        "mimeType": content_type or "application/octet-stream",
        "blob": blob,
    }
    return ToolResult(content=[{"type": "resource", "resource": resource}])


def _is_textual(content_type: str) -> bool:
    return (
        not content_type
        or content_type.startswith("text/")
        or content_type.endswith(("+xml", "/xml", "/javascript", "/yaml", "/x-yaml"))
        or content_type == "application/x-www-form-urlencoded"
    )


def _decode(response: FetchedResponse) -> str:
    charset = "utf-8"
    for param in response.headers.get("content-type", "").split(";")[1:]:
        key, _, value = param.strip().partition("=")
        if key.lower() == "charset" and value:
            charset = value.strip('"')
    try:
        return response.content.decode(charset, errors="replace")
    except LookupError:
        return response.content.decode("utf-8", errors="replace")


def _excerpt(response: FetchedResponse, redactor: Redactor) -> str:
    if response.content_type.startswith("image/") or not response.content:
        return ""
    # Redacted before it is cut, so a secret across the cut cannot leave a readable prefix.
    text = " ".join(redactor(_decode(response)).split())
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "..."
