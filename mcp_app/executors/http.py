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

The config is checked and parsed once into an ``HttpConfig`` (kept in the catalog snapshot).
Before a call, ``HttpExecutor.resolve`` asks the services' ``Resolvers`` for the credential
(an ``HttpAuth``): this module never reads rows. Every secret of that credential, in every
form it was sent (raw, percent-encoded, base64 in a Basic header), is replaced by ``[redacted]`` in
everything the call returns: error messages, excerpts, text, ``structuredContent`` and binary
blocks. An upstream that echoes its request (URL, headers, body) must not hand the secret to
the model or the call log, and the call log's own redaction only knows secrets by key name.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
import logging
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote, quote_plus, urlencode, urlsplit

import httpx
import orjson
from django import forms

from mcp_app.conf import get_conf
from mcp_app.executors.base import (
    ConfigError,
    ConfigFormError,
    ConfigReference,
    CredentialChoiceField,
    Executor,
    HttpAuth,
    PreparedConfig,
    RenderedRequest,
    Resolvers,
)
from mcp_app.executors.forms import JsonTextarea, JsonTextField
from mcp_app.executors.netguard import (
    BlockedAddressError,
    FetchedResponse,
    GuardedClient,
    NetworkPolicy,
    ResponseTooLargeError,
    TooManyRedirectsError,
    normalise_host,
    safe_url,
)
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.results import ToolError, ToolResult

logger = logging.getLogger(__name__)

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
# RFC 9110 section 9.2.2: repeating these has the effect of sending once.
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
BODY_MODES = ("none", "arguments", "json", "form")
RETRY_STATUSES = frozenset({502, 503, 504})
MAX_RETRIES = 5
MAX_TIMEOUT_SECONDS = 300.0
# Backoff before retry n (0-based): 0.1 s, 0.2 s, 0.4 s ... at most 1 s.
BACKOFF_BASE_SECONDS = 0.1
BACKOFF_MAX_SECONDS = 1.0
EXCERPT_CHARS = 500
REDACTED = "[redacted]"
CONFIG_KEYS = frozenset(
    {
        "method", "url", "query", "headers", "body", "body_template", "timeout", "retries",
        "expected_status", "select", "credential", "allow_hosts", "allow_networks",
    }
)  # fmt: skip
# Set by the client from the URL and body, or hop-by-hop: an operator mapping may not set them.
FORBIDDEN_HEADERS = frozenset(
    {
        "host", "content-length", "transfer-encoding", "connection", "keep-alive", "te",
        "trailer", "upgrade", "proxy-connection", "proxy-authorization",
    }
)  # fmt: skip
_RETRYABLE_ERRORS = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.ReadError,
    httpx.WriteError,
    httpx.RemoteProtocolError,
)
_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_EXACT = re.compile(r"\{([^{}]+)\}")
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_STATUS_CLASS = re.compile(r"[1-5]xx")
_SELECT_SEGMENT = re.compile(r"([^.\[\]]+)?((?:\[-?\d+\])*)")
_MISSING: Any = object()


def placeholder_names(config: Mapping[str, Any]) -> set[str]:
    """Return the argument names the config's URL, query, headers and body template use.

    Raises:
        ConfigError: a template has an unmatched brace or an empty ``{}``.
    """
    names: set[str] = set()
    url = config.get("url")
    if isinstance(url, str):
        names.update(_placeholders(url, "url"))
    for key in ("query", "headers"):
        mapping = config.get(key)
        if isinstance(mapping, Mapping):
            for name, value in mapping.items():
                if isinstance(value, str):
                    names.update(_placeholders(value, f"{key} {name!r}"))
    template = config.get("body_template")
    if config.get("body") in ("json", "form") and template is not None:
        names.update(_json_placeholders(template))
    return names


def undeclared_placeholders(
    config: Mapping[str, Any], input_schema: Mapping[str, Any] | None
) -> dict[str, str]:
    """Return, per config key, an error naming its placeholders unknown to ``input_schema``.

    A request template must only use arguments the tool declares, or a client could never
    fill it in; the admin form and the catalog import both apply this one rule.

    Raises:
        ConfigError: a template has an unmatched brace or an empty ``{}``.
    """
    declared = set((input_schema or {}).get("properties", {}))
    unknown: dict[str, str] = {}
    for key in ("url", "query", "headers", "body_template"):
        part = {key: config[key], "body": config.get("body")} if key in config else {}
        if names := sorted(placeholder_names(part) - declared):
            listed = ", ".join("{" + name + "}" for name in names)
            unknown[key] = f"{listed} names no property of the input schema."
    return unknown


def _placeholders(text: str, where: str) -> list[str]:
    names = []
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if token in ("{{", "}}"):
            continue
        if token in ("{", "}") or not match.group(1):
            raise ConfigError(
                f"{where}: unmatched or empty brace in {text!r}; write {{{{ or }}}} for a "
                "literal brace."
            )
        names.append(match.group(1))
    return names


def _json_placeholders(node: Any) -> list[str]:
    if isinstance(node, str):
        return _placeholders(node, "body_template")
    if isinstance(node, Mapping):
        return [name for value in node.values() for name in _json_placeholders(value)]
    if isinstance(node, list):
        return [name for value in node for name in _json_placeholders(value)]
    return []


def parse_select(path: str) -> list[str | int]:
    """Parse a dotted path (``data.items[0].name``, ``[0]``, ``items[-1]``) into steps.

    Raises:
        ConfigError: not of that form.
    """
    steps: list[str | int] = []
    if not path.strip():
        raise ConfigError("select: enter a path such as data.items[0], or leave it empty.")
    for segment in path.split("."):
        match = _SELECT_SEGMENT.fullmatch(segment)
        if not segment or match is None or (match.group(1) is None and not match.group(2)):
            raise ConfigError(
                f"select: {path!r} is not a dotted path such as data.items[0].name (keys "
                "separated by dots, list indexes in brackets)."
            )
        if match.group(1) is not None:
            steps.append(match.group(1))
        steps.extend(int(index) for index in re.findall(r"-?\d+", match.group(2)))
    return steps


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


def _parse_status(value: Any) -> None:
    if isinstance(value, bool) or not (
        (isinstance(value, int) and 100 <= value <= 599)
        or (isinstance(value, str) and _STATUS_CLASS.fullmatch(value))
    ):
        raise ConfigError(
            f"expected_status: {value!r} is neither a status code (100-599) nor a class such "
            'as "2xx".'
        )


def _status_expected(status: int, expected: Sequence[Any]) -> bool:
    for item in expected:
        if isinstance(item, str) and item[0] == str(status // 100):
            return True
        if item == status:
            return True
    return False


@dataclass(frozen=True, slots=True)
class HttpConfig(PreparedConfig):
    """An http tool's config, checked and parsed (see the module docstring for each key)."""

    url: str
    method: str = "GET"
    query: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    body: str = "none"
    body_template: Any = None
    # None: MCP_HTTP_TIMEOUT_SECONDS, read at call time.
    timeout: float | None = None
    retries: int = 0
    expected_status: tuple[int | str, ...] = ("2xx",)
    select: str | None = None
    select_steps: tuple[str | int, ...] = ()
    credential: str | None = None
    # The tool's own allow-list; MCP_HTTP_ALLOWED_NETWORKS is merged in at call time.
    policy: NetworkPolicy = field(default_factory=NetworkPolicy)
    # Set by ``HttpExecutor.resolve`` for a call; never part of the snapshot's copy.
    auth: HttpAuth | None = None


def prepare_http_config(config: Mapping[str, Any]) -> HttpConfig:
    """Check an http tool's plain config and parse it.

    Raises:
        ConfigError: the config cannot run; the message starts with the key at fault.
    """
    if unknown := sorted(set(config) - CONFIG_KEYS):
        raise ConfigError(f"Unknown config keys: {', '.join(unknown)}.")
    method = config.get("method", "GET")
    if method not in METHODS:
        raise ConfigError(f"method must be one of {', '.join(METHODS)}, not {method!r}.")
    url = _validate_url(config.get("url"))
    query = _validate_mapping("query", config.get("query", {}))
    headers = _validate_mapping("headers", config.get("headers", {}))
    body = _validate_body(config)
    timeout = config.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout <= MAX_TIMEOUT_SECONDS
    ):
        raise ConfigError(f"timeout must be seconds above 0, at most {MAX_TIMEOUT_SECONDS:g}.")
    retries = config.get("retries", 0)
    if isinstance(retries, bool) or not isinstance(retries, int):
        raise ConfigError(f"retries must be a whole number from 0 to {MAX_RETRIES}.")
    if not 0 <= retries <= MAX_RETRIES:
        raise ConfigError(f"retries must be a whole number from 0 to {MAX_RETRIES}.")
    expected = config.get("expected_status", ["2xx"])
    if not isinstance(expected, list) or not expected:
        raise ConfigError('expected_status must be a non-empty list, e.g. ["2xx", 304].')
    for item in expected:
        _parse_status(item)
    select = config.get("select")
    steps: list[str | int] = []
    if select is not None:
        if not isinstance(select, str):
            raise ConfigError("select must be a dotted path such as data.items[0].")
        steps = parse_select(select)
    credential = config.get("credential")
    if credential is not None and (not isinstance(credential, str) or not credential):
        raise ConfigError("credential must be the name of a credential.")
    return HttpConfig(
        url=url,
        method=method,
        query=query,
        headers=headers,
        body=body,
        body_template=config.get("body_template"),
        timeout=None if timeout is None else float(timeout),
        retries=retries,
        expected_status=tuple(expected),
        select=select,
        select_steps=tuple(steps),
        credential=credential,
        policy=_policy(config),
    )


def _validate_url(url: Any) -> str:
    if not isinstance(url, str) or not url.strip():
        raise ConfigError('HTTP tools need a "url", e.g. https://api.example.com/items/{id}.')
    _placeholders(url, "url")
    scheme, sep, rest = url.partition("://")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if scheme.lower() not in ("http", "https") or not sep or not authority:
        raise ConfigError(f"url must start with http:// or https:// and a host, not {url!r}.")
    if "{" in scheme + authority or "}" in authority:
        raise ConfigError("url: the scheme and host cannot contain placeholders.")
    if "@" in authority:
        raise ConfigError("url: put user names and passwords in a credential, not the URL.")
    try:
        httpx.URL(_TOKEN.sub("x", url))
    except httpx.InvalidURL as exc:
        raise ConfigError(f"url is not a valid URL: {exc}") from None
    return url


def _validate_mapping(key: str, mapping: Any) -> dict[str, str]:
    if not isinstance(mapping, Mapping) or not all(
        isinstance(name, str) and isinstance(value, str) for name, value in mapping.items()
    ):
        raise ConfigError(f'{key} must be an object of strings, e.g. {{"q": "{{query}}"}}.')
    for name, value in mapping.items():
        _placeholders(value, f"{key} {name!r}")
        if key != "headers":
            continue
        if not _HEADER_NAME.fullmatch(name):
            raise ConfigError(f"headers: {name!r} is not a valid header name.")
        if name.lower() in FORBIDDEN_HEADERS:
            raise ConfigError(f"headers: {name} is set by the HTTP client and cannot be set.")
        if "\r" in value or "\n" in value:
            raise ConfigError(f"headers: the value of {name} contains a line break.")
    return dict(mapping)


def _validate_body(config: Mapping[str, Any]) -> str:
    body = config.get("body", "none")
    if body not in BODY_MODES:
        raise ConfigError(f"body must be one of {', '.join(BODY_MODES)}, not {body!r}.")
    template = config.get("body_template")
    if body in ("none", "arguments"):
        if template is not None:
            raise ConfigError('body_template is used only with body "json" or "form".')
        return str(body)
    if body == "json" and template is None:
        raise ConfigError('body "json" needs a body_template (a JSON document).')
    if body == "form" and (
        not isinstance(template, Mapping)
        or not all(isinstance(value, str) for value in template.values())
    ):
        raise ConfigError(
            'body "form" needs a body_template object of strings, e.g. {"name": "{name}"}.'
        )
    _json_placeholders(template)
    return str(body)


def _policy(config: Mapping[str, Any]) -> NetworkPolicy:
    hosts = config.get("allow_hosts", [])
    networks = config.get("allow_networks", [])
    if not isinstance(hosts, list) or not all(isinstance(host, str) for host in hosts):
        raise ConfigError("allow_hosts must be a list of host names.")
    if not isinstance(networks, list) or not all(isinstance(net, str) for net in networks):
        raise ConfigError("allow_networks must be a list of networks such as 10.0.0.0/8.")
    try:
        return NetworkPolicy.build(hosts, networks)
    except ValueError as exc:
        raise ConfigError(f"allow_networks: {exc}.") from None


class HttpConfigForm(forms.Form):
    http_method = forms.ChoiceField(
        choices=[(method, method) for method in METHODS],
        initial="GET",
        required=False,
        label="HTTP method",
        help_text="GET, HEAD, PUT, DELETE and OPTIONS are retried; the others never are.",
    )
    http_url = forms.CharField(
        required=False,
        max_length=2000,
        label="URL template",
        widget=forms.TextInput(attrs={"class": "vLargeTextField"}),
        help_text=(
            "E.g. https://api.example.com/users/{user}/repos: {name} inserts the argument "
            "(percent-encoded); the scheme and host are fixed."
        ),
    )
    http_query = JsonTextField(
        required=False,
        empty_json={},
        label="Query parameters",
        widget=JsonTextarea(attrs={"rows": 3}),
        help_text='E.g. {"q": "{query}", "limit": "20"}; a parameter of an absent argument '
        "is left out.",
    )
    http_headers = JsonTextField(
        required=False,
        empty_json={},
        label="Headers",
        widget=JsonTextarea(attrs={"rows": 3}),
        help_text='E.g. {"Accept": "application/json"}. Put secrets in a credential instead.',
    )
    http_body = forms.ChoiceField(
        choices=[(mode, mode) for mode in BODY_MODES],
        initial="none",
        required=False,
        label="Body",
        help_text='"arguments": the arguments as JSON; "json": the body template; "form": the '
        "body template's fields, form-encoded.",
    )
    http_body_template = JsonTextField(
        required=False,
        empty_json=None,
        label="Body template",
        widget=JsonTextarea(attrs={"rows": 5}),
        help_text='json: a document where "{name}" is the argument\'s JSON value and other '
        'strings interpolate; form: {"field": "{name}"}.',
    )
    http_timeout = forms.FloatField(
        required=False,
        min_value=0.001,
        label="Timeout (s)",
        help_text="Per attempt; empty: MCP_HTTP_TIMEOUT_SECONDS.",
    )
    http_retries = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_RETRIES,
        label="Retries",
        help_text="On connection errors and 502/503/504, idempotent methods only.",
    )
    http_expected_status = forms.CharField(
        required=False,
        initial="2xx",
        label="Expected statuses",
        help_text="Comma separated codes or classes, e.g. 2xx, 304. Others are error results.",
    )
    http_select = forms.CharField(
        required=False,
        label="Select",
        help_text="Optional dotted path into the JSON response, e.g. data.items[0].",
    )
    http_credential = CredentialChoiceField(
        required=False,
        label="Credential",
        help_text="How the request authenticates; secrets live in Credentials.",
    )
    http_allow_hosts = forms.CharField(
        required=False,
        label="Allowed private hosts",
        help_text="Host names this tool may reach although they resolve to private or "
        "loopback addresses, comma separated.",
    )
    http_allow_networks = forms.CharField(
        required=False,
        label="Allowed private networks",
        help_text="Networks (CIDR) this tool may reach although not public, comma separated, "
        "e.g. 10.20.0.0/16.",
    )


class HttpExecutor(Executor[HttpConfig]):
    kind = "http"
    label = "HTTP request"
    config_form = HttpConfigForm

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
        conf = get_conf()
        method = config.method
        url = build_url(config, arguments, auth)
        headers, content = build_headers_and_body(config, arguments, auth)
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
                        response = await client.request(
                            method, url, headers=headers, content=content
                        )
                except _RETRYABLE_ERRORS as exc:
                    if last:
                        raise ToolError(
                            f"Could not reach {safe_url(url)} ({type(exc).__name__})."
                        ) from None
                except TimeoutError:
                    raise ToolError(
                        f"{safe_url(url)} did not answer within {timeout:g} s."
                    ) from None
                except httpx.TimeoutException as exc:
                    raise ToolError(
                        f"{safe_url(url)} did not answer within {timeout:g} s "
                        f"({type(exc).__name__})."
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
                    ctx.tool_name, attempt + 1, attempts, safe_url(url),
                )  # fmt: skip
                await asyncio.sleep(min(BACKOFF_BASE_SECONDS * 2**attempt, BACKOFF_MAX_SECONDS))
        logger.debug(
            "HTTP tool %s: %s %s -> %d", ctx.tool_name, method, safe_url(url), response.status
        )
        return map_response(response, config, redactor)

    def form_initial(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "http_method": config.get("method", "GET"),
            "http_url": config.get("url", ""),
            "http_query": config.get("query", {}),
            "http_headers": config.get("headers", {}),
            "http_body": config.get("body", "none"),
            "http_body_template": config.get("body_template"),
            "http_timeout": config.get("timeout"),
            "http_retries": config.get("retries"),
            "http_expected_status": ", ".join(
                str(item) for item in config.get("expected_status", ["2xx"])
            ),
            "http_select": config.get("select", ""),
            "http_credential": config.get("credential"),
            "http_allow_hosts": ", ".join(config.get("allow_hosts", [])),
            "http_allow_networks": ", ".join(config.get("allow_networks", [])),
        }

    def save_warnings(self, config: Mapping[str, Any]) -> list[str]:
        refused = refused_address(config)
        return [refused] if refused else []

    def config_from_form(
        self, data: Mapping[str, Any], input_schema: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        if not data.get("http_url"):
            raise ConfigFormError({"http_url": "Enter the URL template of the request."})
        config: dict[str, Any] = {"method": data.get("http_method") or "GET"}
        config["url"] = data["http_url"]
        optional = {
            "query": data.get("http_query") or None,
            "headers": data.get("http_headers") or None,
            "body": data.get("http_body") if data.get("http_body") not in ("", "none") else None,
            "body_template": data.get("http_body_template"),
            "timeout": data.get("http_timeout"),
            "retries": data.get("http_retries"),
            "expected_status": _status_list(data.get("http_expected_status", "")),
            "select": data.get("http_select") or None,
            "credential": data.get("http_credential") or None,
            "allow_hosts": _split_list(data.get("http_allow_hosts", "")),
            "allow_networks": _split_list(data.get("http_allow_networks", "")),
        }
        config.update((key, value) for key, value in optional.items() if value not in (None, []))
        try:
            self.prepare(config)
        except ConfigError as exc:
            key = next((key for key in _FORM_KEYS if exc.message.startswith(key)), "url")
            raise ConfigFormError({f"http_{key}": exc.message}) from None
        return config

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
        return f"http_{key}" if key in _FORM_KEYS else None

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

    Checked as a call would be (the tool's allow-list plus MCP_HTTP_ALLOWED_NETWORKS). A name
    that does not resolve here is not reported: it may resolve where the calls run.
    """
    host = normalise_host(urlsplit(str(config.get("url", ""))).hostname or "")
    if not host:
        return None
    try:
        policy = network_policy(config)
    except (ConfigError, ToolError):
        return None  # the form or the system check reports a malformed allow-list
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            return None
        addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))
    for address in addresses:
        if not policy.allows(host, address):
            shown = host if str(address) == host else f"{host} ({address})"
            return (
                f"Calls will be refused: {shown} is not a public address (loopback, private, "
                "link-local or a metadata service). Add it under Allowed private hosts or "
                "networks if the tool must reach it."
            )
    return None


# Config keys with a form field "http_<key>", longest first: an error message starting with a
# key belongs to that field ("body_template ..." before "body ...").
_FORM_KEYS = (
    "expected_status", "allow_networks", "body_template", "allow_hosts", "credential",
    "timeout", "retries", "headers", "method", "select", "query", "body", "url",
)  # fmt: skip


def _split_list(value: str) -> list[str]:
    return [item for item in value.replace(",", " ").split() if item]


def _status_list(value: str) -> list[int | str] | None:
    items = _split_list(value)
    if items == ["2xx"] or not items:
        return None  # the default
    return [int(item) if item.isdigit() else item for item in items]


def network_policy(config: Mapping[str, Any]) -> NetworkPolicy:
    """Return a plain config's allow-list merged with MCP_HTTP_ALLOWED_NETWORKS.

    Raises:
        ConfigError: the tool's allow-list is malformed.
        ToolError: the setting is malformed.
    """
    return _policy(config).merged(global_policy())


def merged_policy(config: HttpConfig) -> NetworkPolicy:
    """Return the tool's allow-list merged with MCP_HTTP_ALLOWED_NETWORKS.

    Raises:
        ToolError: the setting is malformed.
    """
    return config.policy.merged(global_policy())


def global_policy() -> NetworkPolicy:
    """Return the MCP_HTTP_ALLOWED_NETWORKS allow-list.

    Raises:
        ToolError: the setting holds something that is not a network (the check reports it).
    """
    value = get_conf().MCP_HTTP_ALLOWED_NETWORKS
    networks = value.split(",") if isinstance(value, str) else list(value)
    try:
        return NetworkPolicy.build(networks=[network.strip() for network in networks])
    except ValueError:
        raise ToolError("MCP_HTTP_ALLOWED_NETWORKS is misconfigured.") from None


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

    return _TOKEN.sub(replace, text)


def _pairs(
    mapping: Mapping[str, str], arguments: Mapping[str, Any], where: str
) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for name, template in mapping.items():
        exact = _EXACT.fullmatch(template)
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
        exact = _EXACT.fullmatch(node)
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
