"""An http tool's request: rendered from its config and the arguments, sent with retries.

Placeholders become the arguments (percent-encoded in the URL), the credential's query and
headers are added, and ``send_with_retries`` sends it through the SSRF guard
(``netguard.GuardedClient``), retrying idempotent methods on connection errors and 502/503/504.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import orjson

from mcp_app.conf import get_conf
from mcp_app.executors.base import HttpAuth
from mcp_app.executors.http.config import (
    EXACT_PLACEHOLDER,
    IDEMPOTENT_METHODS,
    PLACEHOLDER,
    HttpConfig,
    merged_policy,
)
from mcp_app.executors.netguard import (
    BlockedAddressError,
    FetchedResponse,
    GuardedClient,
    ResponseTooLargeError,
    TooManyRedirectsError,
    safe_url,
)
from mcp_app.protocol.results import ToolError

logger = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({502, 503, 504})
# Backoff before retry n (0-based): 0.1 s, 0.2 s, 0.4 s ... at most 1 s.
BACKOFF_BASE_SECONDS = 0.1
BACKOFF_MAX_SECONDS = 1.0
_RETRYABLE_ERRORS = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.ReadError,
    httpx.WriteError,
    httpx.RemoteProtocolError,
)
_MISSING: Any = object()


def _format(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def interpolate(text: str, arguments: Mapping[str, Any], encode: bool, where: str) -> str:
    """Replace ``{name}`` by the argument (percent-encoded if ``encode``).

    Raises:
        ToolError: the call did not provide an argument the template names.
    """

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        name = match.group(1)
        if name not in arguments:
            raise ToolError(f"The {where} needs the argument {name!r}, which the call lacks.")
        value = _format(arguments[name])
        return quote(value, safe="") if encode else value

    return PLACEHOLDER.sub(replace, text)


def _pairs(
    mapping: Mapping[str, str], arguments: Mapping[str, Any], where: str
) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for name, template in mapping.items():
        exact = EXACT_PLACEHOLDER.fullmatch(template)
        if exact and exact.group(1) not in arguments:
            continue  # an optional argument that was not given
        if exact and isinstance(arguments[exact.group(1)], list):
            pairs.extend((name, _format(item)) for item in arguments[exact.group(1)])
            continue
        pairs.append((name, interpolate(template, arguments, encode=False, where=where)))
    return pairs


def build_url(config: HttpConfig, arguments: Mapping[str, Any], auth: HttpAuth) -> str:
    """Render the URL template and append the query mapping and the credential's query."""
    url = interpolate(config.url, arguments, encode=True, where="URL")
    pairs = _pairs(config.query, arguments, "query") + list(auth.query.items())
    if not pairs:
        return url
    base, _, fragment = url.partition("#")
    separator = "&" if "?" in base else "?"
    query = urlencode(pairs, quote_via=quote)
    return f"{base}{separator}{query}" + (f"#{fragment}" if fragment else "")


def build_headers_and_body(
    config: HttpConfig, arguments: Mapping[str, Any], auth: HttpAuth
) -> tuple[dict[str, str], bytes | None]:
    """Render the header mapping and the body; the credential's headers win.

    Raises:
        ToolError: an argument is missing, or a header value would contain a line break.
    """
    headers: dict[str, str] = {"User-Agent": "mcphost-http-tool"}
    for name, value in _pairs(config.headers, arguments, "header"):
        if "\r" in value or "\n" in value:
            raise ToolError(f"The header {name} would contain a line break.")
        headers[name] = value
    headers.update(auth.headers)
    body = config.body
    content: bytes | None = None
    content_type = ""
    if body == "arguments":
        content, content_type = orjson.dumps(dict(arguments)), "application/json"
    elif body == "json":
        rendered = render_json_template(config.body_template, arguments)
        content, content_type = orjson.dumps(rendered), "application/json"
    elif body == "form":
        pairs = _pairs(config.body_template, arguments, "form body")
        content = urlencode(pairs).encode("ascii")
        content_type = "application/x-www-form-urlencoded"
    if content_type and not any(name.lower() == "content-type" for name in headers):
        headers["Content-Type"] = content_type
    return headers, content


def render_json_template(node: Any, arguments: Mapping[str, Any]) -> Any:
    """Render a JSON body template (see the module docstring)."""
    rendered = _render_node(node, arguments)
    return None if rendered is _MISSING else rendered


def _render_node(node: Any, arguments: Mapping[str, Any]) -> Any:
    if isinstance(node, str):
        exact = EXACT_PLACEHOLDER.fullmatch(node)
        if exact:
            return arguments.get(exact.group(1), _MISSING)
        return interpolate(node, arguments, encode=False, where="body")
    if isinstance(node, Mapping):
        members = {key: _render_node(value, arguments) for key, value in node.items()}
        return {key: value for key, value in members.items() if value is not _MISSING}
    if isinstance(node, list):
        items = [_render_node(value, arguments) for value in node]
        return [None if item is _MISSING else item for item in items]
    return node


async def send_with_retries(
    config: HttpConfig,
    url: str,
    headers: Mapping[str, str],
    content: bytes | None,
    tool_name: str,
) -> FetchedResponse:
    """Send the rendered request through the SSRF guard, retrying as ``config`` allows.

    Raises:
        ToolError: the host is refused, unreachable or too slow, the response too large, or
            the redirects too many.
    """
    conf = get_conf()
    method = config.method
    timeout = config.timeout or float(conf.MCP_HTTP_TIMEOUT_SECONDS)
    policy = merged_policy(config)
    attempts = 1 + (config.retries if method in IDEMPOTENT_METHODS else 0)
    async with GuardedClient(
        policy,
        max_response_bytes=conf.MCP_HTTP_MAX_RESPONSE_BYTES,
        max_redirects=conf.MCP_HTTP_MAX_REDIRECTS,
        timeout=timeout,
    ) as client:
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                async with asyncio.timeout(timeout):
                    response = await client.request(method, url, headers=headers, content=content)
            except _RETRYABLE_ERRORS as exc:
                if last:
                    raise ToolError(
                        f"Could not reach {safe_url(url)} ({type(exc).__name__})."
                    ) from None
            except TimeoutError:
                raise ToolError(f"{safe_url(url)} did not answer within {timeout:g} s.") from None
            except httpx.TimeoutException as exc:
                raise ToolError(
                    f"{safe_url(url)} did not answer within {timeout:g} s ({type(exc).__name__})."
                ) from None
            except (BlockedAddressError, ResponseTooLargeError, TooManyRedirectsError) as exc:
                raise ToolError(str(exc)) from None
            except httpx.HTTPError as exc:
                raise ToolError(
                    f"The request to {safe_url(url)} failed ({type(exc).__name__})."
                ) from None
            else:
                if response.status not in RETRY_STATUSES or last:
                    break
            logger.debug(
                "HTTP tool %s: attempt %d of %d to %s failed; retrying",
                tool_name, attempt + 1, attempts, safe_url(url),
            )  # fmt: skip
            await asyncio.sleep(min(BACKOFF_BASE_SECONDS * 2**attempt, BACKOFF_MAX_SECONDS))
    logger.debug("HTTP tool %s: %s %s -> %d", tool_name, method, safe_url(url), response.status)
    return response
