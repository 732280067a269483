"""What kind of message arrived, and whether a 2026-07-28 request may be served at all.

``classify`` decides the era of each message from its body first (protocol.md §1.1): the
reserved ``_meta`` key ``io.modelcontextprotocol/protocolVersion`` is modern, ``initialize``
opens a legacy session, anything else belongs to a legacy session. A modern
``MCP-Protocol-Version`` header alone also makes a message modern, so a modern client that
forgot its envelope is told so instead of being sent to the session machinery.

``check_modern_request`` runs the validation ladder in the SDK's order (first failure wins):
envelope shape, headers, version value, method, client capabilities, log level. Header names
arrive lower-cased, each with every value received, so duplicates are visible.
"""

from __future__ import annotations

import base64
import binascii
import enum
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from mcp_app.protocol import uritemplate
from mcp_app.protocol.catalog import JSON, CatalogItem, CatalogSnapshot, ToolDef
from mcp_app.protocol.context import LOG_LEVELS
from mcp_app.protocol.errors import (
    HeaderMismatch,
    InvalidParams,
    MethodNotFound,
    MissingClientCapability,
    UnsupportedProtocolVersion,
)
from mcp_app.protocol.jsonrpc import Message, Notification, Request, Response
from mcp_app.protocol.mcp_tasks import REQUIRED_EXTENSION
from mcp_app.protocol.methods import (
    NAME_BEARING_PARAMS,
    TASK_EXTENSION_METHODS,
    known_methods,
    target_of,
)
from mcp_app.protocol.storable import plainly_storable, require_storable
from mcp_app.protocol.versions import LEGACY_VERSIONS, MODERN_VERSIONS, Era

PROTOCOL_VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY: Final = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL_KEY: Final = "io.modelcontextprotocol/logLevel"

VERSION_HEADER: Final = "mcp-protocol-version"
METHOD_HEADER: Final = "mcp-method"
NAME_HEADER: Final = "mcp-name"
PARAM_HEADER_PREFIX: Final = "mcp-param-"
X_MCP_HEADER: Final = "x-mcp-header"

Headers = Mapping[str, Sequence[str]]


class Route(enum.Enum):
    MODERN = "modern"
    INITIALIZE = "initialize"
    LEGACY = "legacy"


@dataclass(slots=True)
class ModernEnvelope:
    """The per-request fields of a 2026-07-28 request that passed the ladder."""

    version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    log_level: str | None


def _meta_of(params: Mapping[str, Any] | None) -> Any:
    return params.get("_meta") if params is not None else None


def _is_object(value: Any) -> bool:
    """``isinstance(value, Mapping)``, answered without the ABC for a dict (every decoded
    JSON object is one)."""
    return type(value) is dict or isinstance(value, Mapping)


def progress_token_of(params: Mapping[str, Any] | None) -> str | int | None:
    """Return ``params._meta.progressToken`` when it is a valid token (string or integer)."""
    meta = _meta_of(params)
    if type(meta) is not dict and not isinstance(meta, Mapping):
        return None
    token = meta.get("progressToken")
    if isinstance(token, str) or (isinstance(token, int) and not isinstance(token, bool)):
        return token
    return None


def classify(message: Message, header_version: str | None) -> Route:
    """Return which machinery serves ``message``: modern, a new legacy session, or a session."""
    if isinstance(message, Response):
        return Route.LEGACY
    meta = _meta_of(message.params)
    if _is_object(meta) and PROTOCOL_VERSION_KEY in meta:
        return Route.MODERN
    if header_version is not None and header_version not in LEGACY_VERSIONS:
        return Route.MODERN
    if message.method == "initialize" and isinstance(message, Request):
        return Route.INITIALIZE
    return Route.LEGACY


def stream_method_refusal(method: str, header_version: str | None) -> tuple[int, str] | None:
    """Why a GET or DELETE with this MCP-Protocol-Version is refused, as (HTTP status, message).

    Both exist only in the legacy era (sessions): a 2026-07-28 client gets 405, a version no
    revision names 400; no header, or a legacy one, passes (2025-11-25 basic/transports;
    2026-07-28 basic/transports, "Session-less HTTP").
    """
    if header_version is None or header_version in LEGACY_VERSIONS:
        return None
    if header_version in MODERN_VERSIONS:
        return 405, f"{method} is not part of protocol {header_version}"
    return 400, f"Unsupported MCP-Protocol-Version: {header_version}"


# -- header values ---------------------------------------------------------------------------

_B64_SENTINEL = re.compile(r"=\?base64\?(?P<payload>.*)\?=")


def decode_header_value(value: str) -> str | None:
    """Decode an ``=?base64?...?=`` header value; plain values come back unchanged.

    A malformed sentinel (bad or non-canonical base64, bad UTF-8) returns ``None`` so a
    corrupt header can never match a body value (2026-07-28 transports, "Value Encoding").
    """
    if not value.startswith("=?base64?"):
        return value  # what the sentinel's pattern would say, without running it
    match = _B64_SENTINEL.fullmatch(value)
    if match is None:
        return value
    payload = match.group("payload")
    try:
        raw = base64.b64decode(payload, validate=True)
    except binascii.Error:
        return None
    if base64.b64encode(raw).decode("ascii") != payload:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _single(headers: Headers, name: str) -> str | None:
    values = headers.get(name)
    return values[0] if values else None


# -- x-mcp-header annotations ----------------------------------------------------------------

# Applicator keywords whose values are subschemas; crossing any of them leaves the pure
# `properties` chain on which `x-mcp-header` is allowed (SDK inbound.py). `$ref` is never
# followed.
_SUBSCHEMA_ONE: Final = frozenset(
    {
        "items", "contains", "unevaluatedItems", "additionalProperties", "propertyNames",
        "unevaluatedProperties", "not", "if", "then", "else", "contentSchema",
    }
)  # fmt: skip
_SUBSCHEMA_LIST: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SUBSCHEMA_MAP: Final = frozenset({"patternProperties", "dependentSchemas", "$defs", "definitions"})
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_TYPES: Final = frozenset({"string", "integer", "boolean"})


def _schema_positions(root: JSON) -> Iterator[tuple[tuple[str, ...] | None, Mapping[str, JSON]]]:
    # An explicit stack keeps the walk safe on deeply nested schemas.
    stack: list[tuple[tuple[str, ...] | None, JSON]] = [((), root)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, Mapping):
            continue
        yield path, node
        for keyword, value in node.items():
            if keyword == "properties" and isinstance(value, Mapping):
                for name, sub in value.items():
                    stack.append(((*path, name) if path is not None else None, sub))
            elif keyword in _SUBSCHEMA_ONE:
                stack.append((None, value))
            elif keyword in _SUBSCHEMA_LIST and isinstance(value, list):
                stack.extend((None, sub) for sub in value)
            elif keyword in _SUBSCHEMA_MAP and isinstance(value, Mapping):
                stack.extend((None, sub) for sub in value.values())


def find_invalid_x_mcp_header(input_schema: JSON) -> str | None:
    """Return why an ``x-mcp-header`` annotation in ``input_schema`` is invalid, or ``None``.

    Valid means: on a property reached from the root through ``properties`` keys only, an
    RFC 9110 token, on a string/integer/boolean property, unique case-insensitively
    (2026-07-28 transports, "Custom Headers from Tool Parameters"). The catalog validates
    operator input with this; a tool failing it gets no ``Mcp-Param-*`` checks, because
    conforming clients drop such tools.
    """
    seen: dict[str, str] = {}
    for path, schema in _schema_positions(input_schema):
        if X_MCP_HEADER not in schema:
            continue
        if not path:
            return "x-mcp-header is only allowed on properties reached through `properties`"
        where = ".".join(path)
        token = schema[X_MCP_HEADER]
        if not isinstance(token, str) or not _TOKEN.fullmatch(token):
            return f"property {where!r}: x-mcp-header must be an HTTP header-name token"
        if schema.get("type") not in _HEADER_TYPES:
            return f"property {where!r}: x-mcp-header needs type string, integer or boolean"
        if token.lower() in seen:
            return f"property {where!r}: x-mcp-header {token!r} duplicates {seen[token.lower()]!r}"
        seen[token.lower()] = where
    return None


def x_mcp_headers(input_schema: JSON) -> list[tuple[tuple[str, ...], str, Mapping[str, JSON]]]:
    """Return ``(property path, header token, property schema)`` for each annotation."""
    return [
        (path, token, schema)
        for path, schema in _schema_positions(input_schema)
        if path and isinstance(token := schema.get(X_MCP_HEADER), str)
    ]


def _render(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        try:
            return str(value)
        except ValueError:  # an int beyond the interpreter's digit limit
            return None
    return None


_DECIMAL: Final = re.compile(r"-?[0-9]+(\.[0-9]+)?")


def _param_matches(prop_type: Any, value: Any, rendered: str, decoded: str) -> bool:
    # Integers compare numerically so `42` matches a body value of 42.0 (spec SHOULD).
    if (
        prop_type == "integer"
        and not isinstance(value, bool)
        and isinstance(value, int | float)
        and float(value).is_integer()
        and _DECIMAL.fullmatch(decoded)
    ):
        whole, _, fraction = decoded.partition(".")
        return set(fraction) <= {"0"} and int(whole) == int(value)
    return decoded == rendered


def _value_at(arguments: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = arguments
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


ParamHeaders = list[tuple[tuple[str, ...], str, Mapping[str, Any]]]


class ParamHeaderCache:
    """Each tool's ``Mcp-Param`` headers, by the identity of its input schema.

    Schemas in a snapshot never change, and walking one per call cost more than the rest of
    the header checks together. The protocol layer keeps no state of its own: the transport
    owns one of these and passes it in. Each entry holds its schema, so the id cannot be
    reused while the entry exists.
    """

    __slots__ = ("_kept", "_size")

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._kept: dict[int, tuple[Mapping[str, Any], ParamHeaders]] = {}

    def param_headers(self, input_schema: Mapping[str, Any]) -> ParamHeaders:
        """``checked_param_headers(input_schema)``, walked once."""
        kept = self._kept.get(id(input_schema))
        if kept is not None and kept[0] is input_schema:
            return kept[1]
        found = checked_param_headers(input_schema)
        if len(self._kept) >= self._size:
            self._kept.clear()
        self._kept[id(input_schema)] = (input_schema, found)
        return found


def checked_param_headers(input_schema: Mapping[str, Any]) -> ParamHeaders:
    """``x_mcp_headers`` of a valid schema; none for a schema with an invalid annotation."""
    if find_invalid_x_mcp_header(input_schema) is not None:
        return []
    return x_mcp_headers(input_schema)


def check_param_headers(
    input_schema: Mapping[str, Any],
    arguments: Mapping[str, Any],
    headers: Headers,
    cache: ParamHeaderCache | None = None,
) -> None:
    """Check ``Mcp-Param-*`` headers against the arguments of a ``tools/call``.

    A header must be present exactly when its argument is present and not null, appear
    once, and carry the argument's rendering (booleans ``true``/``false``). The schema's
    headers are walked once in ``cache`` (None: afresh).

    Raises:
        HeaderMismatch: on the first disagreement.
    """
    declared = (
        cache.param_headers(input_schema)
        if cache is not None
        else checked_param_headers(input_schema)
    )
    for path, token, schema in declared:
        header = f"Mcp-Param-{token}"
        values = headers.get(PARAM_HEADER_PREFIX + token.lower()) or ()
        argument = ".".join(path)
        if len(values) > 1:
            raise HeaderMismatch(f"{header} header appears more than once")
        raw = values[0] if values else None
        value = _value_at(arguments, path)
        rendered = _render(value) if value is not None else None
        if rendered is None:
            if raw is not None:
                raise HeaderMismatch(f"{header} header is present but argument {argument!r} is not")
            continue
        if raw is None:
            raise HeaderMismatch(f"{header} header is missing for argument {argument!r}")
        decoded = decode_header_value(raw)
        if decoded is None:
            raise HeaderMismatch(f"{header} header carries malformed base64")
        if not _param_matches(schema.get("type"), value, rendered, decoded):
            raise HeaderMismatch(f"{header} header does not match argument {argument!r}")


def _check_headers(
    resolved: Resolved, version: Any, headers: Headers, cache: ParamHeaderCache | None
) -> None:
    request = resolved.request
    # Each routing header's values are looked up once, for both checks.
    versions = headers.get(VERSION_HEADER) or ()
    methods = headers.get(METHOD_HEADER) or ()
    names = headers.get(NAME_HEADER) or ()
    for name, values in (
        (VERSION_HEADER, versions),
        (METHOD_HEADER, methods),
        (NAME_HEADER, names),
    ):
        if len(values) > 1:
            raise HeaderMismatch(f"{name} header appears more than once")
    # Presence is checked on its own: a null body version must not "match" a missing header.
    if not versions:
        raise HeaderMismatch("MCP-Protocol-Version header is required")
    if versions[0] != version:
        raise HeaderMismatch("MCP-Protocol-Version header does not match params._meta")
    if (methods[0] if methods else None) != request.method:
        raise HeaderMismatch("Mcp-Method header does not match the request method")
    params = request.params or {}
    name_key = NAME_BEARING_PARAMS.get(request.method)
    if (
        name_key is not None
        and params.get(name_key) is not None
        and (not names or decode_header_value(names[0]) != params[name_key])
    ):
        raise HeaderMismatch(f"Mcp-Name header does not match params.{name_key}")
    tool = resolved.tool
    if tool is not None:
        arguments = params.get("arguments")
        if arguments is None or type(arguments) is dict or isinstance(arguments, Mapping):
            check_param_headers(tool.input_schema, arguments or {}, headers, cache)


def required_client_capabilities(
    request: Request, catalog: CatalogSnapshot, resolved: Resolved | None = None
) -> Mapping[str, Any] | None:
    """Return the client capabilities ``request`` cannot be served without, if any.

    Ladder rung 5. The tasks extension's methods need the extension, and so do a call of a
    tool that is only served as a task and a listen request that asks for task status
    notifications (ext-tasks "Capability Negotiation", "Task Status Notifications": MUST
    answer ``-32021`` naming the extension). Questions a tool asks are checked when it asks.
    """
    if request.method in TASK_EXTENSION_METHODS:
        return REQUIRED_EXTENSION
    if request.method == "subscriptions/listen" and request.params is not None:
        notifications = request.params.get("notifications")
        if isinstance(notifications, Mapping) and notifications.get("taskIds"):
            return REQUIRED_EXTENSION
    if request.method == "tools/call":
        if resolved is None:
            resolved = resolve(request, catalog, Era.MODERN)
        tool = resolved.tool
        if tool is not None and tool.task_support == "required":
            return REQUIRED_EXTENSION
    return None


def _declares(declared: Any, required: Any) -> bool:
    # A requirement {"elicitation": {"url": {}}} is met when every key path exists.
    if not isinstance(required, Mapping) or not required:
        return True
    if not isinstance(declared, Mapping):
        return False
    return all(key in declared and _declares(declared[key], sub) for key, sub in required.items())


@dataclass(frozen=True, slots=True)
class Resolved:
    """One request as inbound classification resolved it, once: what every later step takes.

    The era its route gave it, the catalog item its params name (``target``: a tool or prompt
    name, a resource URI), that item's definition (``item``: a ``tools/call``'s tool, a
    ``prompts/get``'s prompt, a ``resources/read``'s resource or else the first template its
    URI matches; None: no such item, or a method that names none). The transport resolves
    each request once; the ladder (whose ``ModernEnvelope`` the transport keeps beside it:
    nothing downstream reads it from here), the scope check, the limits, dispatch, the handlers
    (``RequestContext.named_item``), tracing and the call log take this instead of finding
    the target and looking the item up again.
    """

    request: Request
    era: Era
    target: str | None
    item: CatalogItem | None = None
    # A read's URI as its template (``item``) matched it: the variables, percent-decoded.
    variables: Mapping[str, str] | None = None

    @property
    def tool(self) -> ToolDef | None:
        """The tool a ``tools/call`` names (None: another method, or no such tool)."""
        item = self.item
        return item if type(item) is ToolDef else None


def resolve(
    request: Request,
    catalog: CatalogSnapshot,
    era: Era,
    templates: uritemplate.TemplateCache | None = None,
) -> Resolved:
    """Find what ``request`` acts on in ``catalog``: its target and the item it names.

    ``templates`` keeps the parsed resource templates a read's URI is matched against (None:
    parsed afresh).
    """
    target = target_of(request.method, request.params)
    if target is None:
        return Resolved(request, era, target)
    method = request.method
    if method == "tools/call":
        return Resolved(request, era, target, catalog.tool(target))
    if method == "prompts/get":
        return Resolved(request, era, target, catalog.prompt(target))
    if method == "resources/read":
        resource = catalog.resource(target)
        if resource is not None:
            return Resolved(request, era, target, resource)
        for template in catalog.resource_templates:
            try:
                variables = uritemplate.match(template.uri_template, target, templates)
            except ValueError:
                continue  # invalid (the catalog refuses them on save): a read skips it too
            if variables is not None:
                return Resolved(request, era, target, template, variables=variables)
    return Resolved(request, era, target)


def check_modern_request(
    request: Request,
    headers: Headers,
    catalog: CatalogSnapshot,
    param_headers: ParamHeaderCache | None = None,
    resolved: Resolved | None = None,
) -> ModernEnvelope:
    """Validate a modern request before anything runs; return its envelope.

    ``param_headers`` keeps each tool's ``Mcp-Param`` headers (None: walked afresh);
    ``resolved`` is ``request`` resolved in ``catalog`` (None: resolved here).

    Raises (in ladder order, protocol.md §1.3):
        InvalidParams: ``params._meta`` lacks the envelope, or the version is not a string.
        HeaderMismatch: a routing or ``Mcp-Param-*`` header disagrees with the body.
        UnsupportedProtocolVersion: the version is not one this server serves.
        MethodNotFound: the method does not exist in 2026-07-28.
        MissingClientCapability: the request needs an undeclared client capability.
        InvalidParams: the requested log level is not an RFC 5424 level name.
        InvalidParams: the client capabilities or info hold a string that cannot be
            stored (a background call keeps them).
    """
    # A decoded body's objects are dicts: ``_is_object`` asks the ABC only of anything else.
    meta = _meta_of(request.params)
    if not _is_object(meta):
        raise InvalidParams(
            f"params._meta must be an object carrying {PROTOCOL_VERSION_KEY} and "
            f"{CLIENT_CAPABILITIES_KEY}"
        )
    if PROTOCOL_VERSION_KEY not in meta or CLIENT_CAPABILITIES_KEY not in meta:
        missing = [k for k in (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY) if k not in meta]
        raise InvalidParams(f"params._meta is missing {', '.join(missing)}")
    capabilities = meta[CLIENT_CAPABILITIES_KEY]
    if not _is_object(capabilities):
        raise InvalidParams(f"params._meta {CLIENT_CAPABILITIES_KEY} must be an object")
    client_info = meta.get(CLIENT_INFO_KEY)
    if client_info is not None and not _is_object(client_info):
        raise InvalidParams(f"params._meta {CLIENT_INFO_KEY} must be an object")
    version = meta[PROTOCOL_VERSION_KEY]
    if resolved is None:
        resolved = resolve(request, catalog, Era.MODERN)

    _check_headers(resolved, version, headers, param_headers)

    if not isinstance(version, str):
        raise InvalidParams(f"params._meta {PROTOCOL_VERSION_KEY} must be a string")
    if version not in MODERN_VERSIONS:
        raise UnsupportedProtocolVersion(version)
    if request.method not in known_methods(Era.MODERN):
        raise MethodNotFound(f"Method not found: {request.method}")
    required = required_client_capabilities(request, catalog, resolved)
    if required and not _declares(capabilities, required):
        raise MissingClientCapability(
            f"{request.method} needs client capabilities this request did not declare", required
        )
    log_level = meta.get(LOG_LEVEL_KEY)
    if log_level is not None and log_level not in LOG_LEVELS:
        raise InvalidParams(f"params._meta {LOG_LEVEL_KEY} must be one of {', '.join(LOG_LEVELS)}")
    if not plainly_storable(capabilities, client_info):
        require_storable(capabilities, f"params._meta {CLIENT_CAPABILITIES_KEY}")
        require_storable(client_info, f"params._meta {CLIENT_INFO_KEY}")
    return ModernEnvelope(
        version=version,
        client_capabilities=dict(capabilities),
        client_info=dict(client_info) if client_info is not None else None,
        log_level=log_level,
    )


def check_modern_notification(notification: Notification, headers: Headers) -> None:
    """Accept a modern notification unless it names a version this server does not serve.

    The core defines no client-to-server notifications over HTTP; they are acknowledged and
    dropped (protocol.md §2.3), so only the version is checked.

    Raises:
        UnsupportedProtocolVersion: the header or ``_meta`` version is not served.
    """
    header_version = _single(headers, VERSION_HEADER)
    if header_version is not None and header_version not in MODERN_VERSIONS:
        raise UnsupportedProtocolVersion(header_version)
    meta = _meta_of(notification.params)
    if isinstance(meta, Mapping) and PROTOCOL_VERSION_KEY in meta:
        version = meta[PROTOCOL_VERSION_KEY]
        if version not in MODERN_VERSIONS:
            raise UnsupportedProtocolVersion(version)
