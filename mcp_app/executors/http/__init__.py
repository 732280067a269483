"""Kind "http": one call to a REST endpoint, its response mapped to a tool result.

Config (every key but ``url`` optional)::

    {
      "method": "GET",                          GET HEAD POST PUT PATCH DELETE OPTIONS
      "url": "https://api.example.com/users/{user}/repos",
      "query": {"q": "{query}", "per_page": "20"},
      "headers": {"X-Tag": "{tag}"},
      "body": "none",                           none | arguments | json | form
      "body_template": null,                    json: a JSON document; form: {"field": "{arg}"}
      "timeout": 10,                            seconds per attempt (MCP_HTTP_TIMEOUT_SECONDS)
      "retries": 2,                             idempotent methods only, 0-5
      "expected_status": ["2xx"],               codes (201) or classes ("2xx")
      "select": "data.items[0]",                a dotted path into a JSON response
      "credential": "github",                   name of a Credential row
      "allow_hosts": ["api.internal"],          SSRF allow-list: hosts ...
      "allow_networks": ["10.20.0.0/16"]        ... and networks (CIDR)
    }

Placeholders ``{name}`` insert the argument ``name`` (``{{`` and ``}}`` are literal braces).
In the URL the value is percent-encoded (``/`` too), so an argument cannot change the path
structure; the scheme and host take no placeholders. A query, header or form value that is
exactly ``"{name}"`` is left out when the argument is absent, and repeats for a list. In a
``json`` body template a string that is exactly ``"{name}"`` becomes the argument's JSON value
(an absent one drops the object member, or is null in a list); other strings interpolate.

The response: an unexpected status is an error result with the status and a short excerpt; a
JSON body becomes ``structuredContent`` (after ``select``) plus its pretty-printed text; image/*
an image block; text a text block; anything else an embedded binary resource. Bodies are capped
at MCP_HTTP_MAX_RESPONSE_BYTES. Requests go through ``netguard`` (SSRF guard).

The config is checked and parsed once into an ``HttpConfig`` (kept in the catalog snapshot;
``config``, with the admin form's fields). Before a call, ``HttpExecutor.resolve`` asks the
services' ``Resolvers`` for the credential (an ``HttpAuth``): this package never reads rows.
The request is rendered and sent by ``request``, the response mapped by ``response``. Every
secret of that credential, in every form it was sent (raw, percent-encoded, base64 in a Basic
header), is replaced by ``[redacted]`` (``executors.redaction``) in everything the call
returns: error messages, excerpts, text, ``structuredContent`` and binary blocks.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from mcp_app.executors.base import (
    ConfigError,
    ConfigReference,
    Executor,
    HttpAuth,
    RenderedRequest,
    Resolvers,
)
from mcp_app.executors.http.config import (
    FORM_KEYS,
    HttpConfig,
    HttpConfigForm,
    config_from_form,
    form_initial,
    merged_policy,
    network_policy,
    prepare_http_config,
    undeclared_placeholders,
)
from mcp_app.executors.http.request import (
    build_headers_and_body,
    build_url,
    send_with_retries,
)
from mcp_app.executors.http.response import map_response
from mcp_app.executors.netguard import refusal
from mcp_app.executors.redaction import Redactor
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.results import ToolError, ToolResult

logger = logging.getLogger(__name__)


class HttpExecutor(Executor[HttpConfig]):
    kind = "http"
    label = "HTTP request"
    config_form = HttpConfigForm
    reaches_outside = True

    def prepare(self, config: Mapping[str, Any]) -> HttpConfig:
        return prepare_http_config(config)

    async def resolve(self, prepared: HttpConfig, resolvers: Resolvers) -> HttpConfig:
        if prepared.credential is None:
            return prepared
        # Executors read no rows: the services decrypt the credential's secret.
        auth = await resolvers.credential(prepared.credential, merged_policy(prepared))
        return replace(prepared, auth=auth)

    async def run(
        self, prepared: HttpConfig, arguments: Mapping[str, Any], ctx: ToolCallContext
    ) -> ToolResult:
        if prepared.credential and prepared.auth is None:
            raise ToolError(f"The credential {prepared.credential!r} was not resolved.")
        auth = prepared.auth or HttpAuth()
        redactor = Redactor(auth.secrets)
        try:
            result = await self._call(prepared, arguments, auth, redactor, ctx)
        except ToolError as exc:
            raise ToolError(redactor(exc.message)) from None
        return redactor.result(result)

    async def _call(
        self,
        config: HttpConfig,
        arguments: Mapping[str, Any],
        auth: HttpAuth,
        redactor: Redactor,
        ctx: ToolCallContext,
    ) -> ToolResult:
        url = build_url(config, arguments, auth)
        headers, content = build_headers_and_body(config, arguments, auth)
        response = await send_with_retries(config, url, headers, content, ctx.tool_name)
        return map_response(response, config, redactor)

    def form_initial(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return form_initial(config)

    def save_warnings(self, config: Mapping[str, Any]) -> list[str]:
        refused = refused_address(config)
        return [refused] if refused else []

    def config_from_form(
        self, data: Mapping[str, Any], input_schema: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        return config_from_form(data)

    def config_references(self, config: Mapping[str, Any]) -> Sequence[ConfigReference]:
        credential = config.get("credential")
        if not isinstance(credential, str):
            return ()
        return (ConfigReference("credential", "credential", credential),)

    def config_problems(
        self, config: Mapping[str, Any], input_schema: Mapping[str, Any] | None
    ) -> dict[str, str]:
        return undeclared_placeholders(config, input_schema)

    def form_field_of(self, key: str) -> str | None:
        return f"http_{key}" if key in FORM_KEYS else None

    def rendered_request(
        self, config: Mapping[str, Any], arguments: Mapping[str, Any]
    ) -> RenderedRequest | None:
        try:
            prepared = prepare_http_config(config)
            url = build_url(prepared, arguments, HttpAuth())
            headers, content = build_headers_and_body(prepared, arguments, HttpAuth())
        except (ConfigError, ToolError):
            return None  # the run itself reports what is wrong
        return RenderedRequest(
            method=str(config.get("method", "GET")),
            url=url,
            headers=headers,
            body=None if content is None else content.decode("utf-8", errors="replace"),
            credential=config.get("credential") or None,
        )


def refused_address(config: Mapping[str, Any]) -> str | None:
    """Why the SSRF guard will refuse the host of an HTTP tool's URL, if it will.

    Checked as a call would be (the tool's allow-list plus MCP_HTTP_ALLOWED_NETWORKS), with the
    guard's own check and message. A name that does not resolve here is not reported: it may
    resolve where the calls run.
    """
    try:
        policy = network_policy(config)
    except (ConfigError, ToolError):
        return None  # the form or the system check reports a malformed allow-list
    refused = refusal(str(config.get("url", "")), policy)
    if refused is None:
        return None
    hint = "under Allowed private hosts or networks."
    return f"Calls will be refused: {refused.removesuffix('.')} {hint}"
