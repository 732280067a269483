"""An http tool's config: the checks, the parsed ``HttpConfig``, and its admin form fields.

Every key is described in ``executors.http`` (the kind's docstring). ``prepare_http_config``
checks a plain config and parses it once (the catalog snapshot keeps the result); the
placeholder rules (``placeholder_names``, ``undeclared_placeholders``) and the tool's own
allow-list live here too. No request is rendered or sent here (``request``), and no response
read (``response``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from django import forms

from mcp_app.executors.base import (
    ConfigError,
    ConfigFormError,
    CredentialChoiceField,
    HttpAuth,
    PreparedConfig,
    shown,
)
from mcp_app.executors.forms import JsonTextarea, JsonTextField
from mcp_app.executors.netguard import NetworkPolicy, global_policy

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
# RFC 9110 section 9.2.2: repeating these has the effect of sending once.
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
BODY_MODES = ("none", "arguments", "json", "form")
MAX_RETRIES = 5
MAX_TIMEOUT_SECONDS = 300.0
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
# A placeholder token: "{name}", or an escaped or stray brace.
PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
# A template that is exactly one placeholder (its argument's value, not its text).
EXACT_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_STATUS_CLASS = re.compile(r"[1-5]xx")
_SELECT_SEGMENT = re.compile(r"([^.\[\]]+)?((?:\[-?\d+\])*)")


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
    for match in PLACEHOLDER.finditer(text):
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


def _parse_status(value: Any) -> None:
    if isinstance(value, bool) or not (
        (isinstance(value, int) and 100 <= value <= 599)
        or (isinstance(value, str) and _STATUS_CLASS.fullmatch(value))
    ):
        raise ConfigError(
            f"expected_status: {value!r} is neither a status code (100-599) nor a class such "
            'as "2xx".'
        )


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
        raise ConfigError(f"method must be one of {', '.join(METHODS)}, not {shown(method)}.")
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
        raise ConfigError(f"url must start with http:// or https:// and a host, not {shown(url)}.")
    if "{" in scheme + authority or "}" in authority:
        raise ConfigError("url: the scheme and host cannot contain placeholders.")
    if "@" in authority:
        raise ConfigError("url: put user names and passwords in a credential, not the URL.")
    try:
        httpx.URL(PLACEHOLDER.sub("x", url))
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
        raise ConfigError(f"body must be one of {', '.join(BODY_MODES)}, not {shown(body)}.")
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


# Config keys with a form field "http_<key>", longest first: an error message starting with a
# key belongs to that field ("body_template ..." before "body ...").
FORM_KEYS = (
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


def form_initial(config: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``HttpConfigForm``'s initial values for a saved ``config``."""
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


def config_from_form(data: Mapping[str, Any]) -> dict[str, Any]:
    """Build the plain config from ``HttpConfigForm``'s cleaned data.

    Raises:
        ConfigFormError: the fields do not make a usable config, by field name.
    """
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
        prepare_http_config(config)
    except ConfigError as exc:
        key = next((key for key in FORM_KEYS if exc.message.startswith(key)), "url")
        raise ConfigFormError({f"http_{key}": exc.message}) from None
    return config
