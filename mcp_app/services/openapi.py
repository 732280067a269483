"""OpenAPI 3.0 and 3.1 import: a document's operations turned into draft HTTP tools.

``openapi_parse_text`` reads a document's JSON or YAML text (PyYAML's safe loader: plain data,
no Python objects). ``openapi_fetch`` fetches one from a URL through the SSRF guard, capped at
MAX_DOCUMENT_BYTES. ``openapi_read`` lists its operations, each already converted into what an
HTTP tool needs: an input schema (path, query and header parameters plus the JSON request
body, ``$ref`` resolved within the document) and the URL, query, header and body mappings of
``executors/http/``. ``openapi_tool_drafts`` names the chosen operations and fixes their base
URL; reading and naming are pure (no I/O, no rows). ``openapi_tools_create`` is the one
writer: it creates the drafts, disabled, through ``services.catalog_writes.tool_create``.

Nothing here fetches a remote ``$ref``: only references inside the document (``#/...``)
resolve.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import yaml
from asgiref.sync import async_to_sync
from django.db import transaction
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from mcp_app.executors.http.config import FORBIDDEN_HEADERS
from mcp_app.executors.netguard import (
    ADVICE,
    BlockedAddressError,
    FetchedResponse,
    GuardedClient,
    ResponseTooLargeError,
    TooManyRedirectsError,
    global_policy,
    safe_url,
)
from mcp_app.models import Endpoint, Tool
from mcp_app.protocol.results import ToolError
from mcp_app.services import history
from mcp_app.services.catalog_writes import Actor, tool_create

# The HTTP methods an OpenAPI path item may hold (3.1 section 4.8.9); TRACE has no HTTP tool.
OPERATION_METHODS = ("get", "put", "post", "delete", "options", "head", "patch")
# An uploaded or pasted document is parsed whole in memory, and the admin's import step posts
# it back as a form field: stay under DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB by default).
MAX_DOCUMENT_BYTES = 2_000_000
# How many ``$ref`` hops one value may take before the document counts as too deeply nested.
MAX_REF_DEPTH = 32
# Values a YAML document may hold once its aliases are expanded: an alias is a reference, so
# a few lines can stand for billions of values ("billion laughs").
MAX_YAML_VALUES = 500_000
FETCH_TIMEOUT_SECONDS = 15.0
NAME_MAX = 128
TITLE_MAX = 200
# OpenAPI 3.1 section 4.8.12.1: header parameters of these names are ignored (the request's
# own headers and the credential set them).
_IGNORED_HEADER_PARAMS = frozenset({"accept", "content-type", "authorization"})
_NAME_INVALID = re.compile(r"[^A-Za-z0-9_.\-]+")
_SERVER_VARIABLE = re.compile(r"\{([^{}]+)\}")
_SCHEMAS_PREFIX = "#/components/schemas/"


class OpenApiError(Exception):
    """The document cannot be imported; ``message`` says why, for the operator."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation of the document, converted into an HTTP tool's parts (base URL aside)."""

    key: str  # "GET /pets/{petId}": unique within a document
    method: str
    path: str
    operation_id: str
    summary: str
    description: str
    input_schema: Mapping[str, Any]
    path_template: str
    query: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    body: str = "none"
    body_template: Any = None

    @property
    def suggested_name(self) -> str:
        """The tool name the operation asks for, before de-duplication."""
        source = self.operation_id or f"{self.method.lower()}{self.path}"
        name = _NAME_INVALID.sub("_", source).strip("_")
        return name[:NAME_MAX] or self.method.lower()


@dataclass(frozen=True, slots=True)
class OpenApiDocument:
    """What the import page lists: the document's title, servers and operations."""

    title: str
    openapi_version: str
    servers: tuple[str, ...]
    operations: tuple[Operation, ...]

    def operation(self, key: str) -> Operation | None:
        return next((op for op in self.operations if op.key == key), None)


@dataclass(frozen=True, slots=True)
class ToolDraft:
    """The field values of one tool to create."""

    name: str
    title: str
    description: str
    input_schema: Mapping[str, Any]
    config: Mapping[str, Any]
    read_only_hint: bool | None
    idempotent_hint: bool | None


# -- reading --------------------------------------------------------------------------------


def openapi_parse_text(text: str | bytes) -> dict[str, Any]:
    """Parse the document's JSON or YAML text into an object.

    Raises:
        OpenApiError: too large, neither JSON nor YAML, or not an object.
    """
    size = len(text) if isinstance(text, bytes) else len(text.encode())
    if size > MAX_DOCUMENT_BYTES:
        raise OpenApiError(f"The document is larger than {MAX_DOCUMENT_BYTES:,} bytes.")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise OpenApiError("The document is not UTF-8 text.") from None
    if not text.strip():
        raise OpenApiError("The document is empty.")
    value = _parse_json(text) if text.lstrip().startswith("{") else _parse_yaml(text)
    if not isinstance(value, dict):
        raise OpenApiError("The document must be an object with an openapi field.")
    return value


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise OpenApiError(
            f"Invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}."
        ) from None
    except ValueError as exc:
        raise OpenApiError(f"Invalid JSON: {exc}.") from None


def _parse_yaml(text: str) -> Any:
    try:
        value = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise OpenApiError(f"Invalid YAML{where}: {exc.problem}.") from None
    except yaml.YAMLError as exc:
        raise OpenApiError(f"Invalid YAML: {exc}.") from None
    return _json_data(value, [MAX_YAML_VALUES])


def _json_data(value: Any, budget: list[int]) -> Any:
    """``value`` as JSON data: YAML dates as ISO text, keys as text, aliases expanded (capped).

    Raises:
        OpenApiError: more than MAX_YAML_VALUES values, or a value JSON cannot hold.
    """
    budget[0] -= 1
    if budget[0] < 0:
        raise OpenApiError(f"The YAML document expands to more than {MAX_YAML_VALUES:,} values.")
    if isinstance(value, dict):
        return {str(key): _json_data(item, budget) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_data(item, budget) for item in value]
    if isinstance(value, datetime.date):  # datetime too: YAML reads 2024-01-01 as a date
        return value.isoformat()
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        raise OpenApiError("The document holds .nan or .inf, which JSON cannot represent.")
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise OpenApiError(f"The document holds a {type(value).__name__}, which JSON cannot hold.")


def openapi_fetch(url: str) -> bytes:
    """Fetch a document from ``url`` through the SSRF guard, at most MAX_DOCUMENT_BYTES.

    The guard's rules are the HTTP tools' (MCP_HTTP_ALLOWED_NETWORKS opens private networks).

    Raises:
        OpenApiError: not an http(s) URL, a refused address, too large, or not a 200 answer.
    """
    if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
        raise OpenApiError("Enter an http:// or https:// URL.")
    try:
        response = async_to_sync(_fetch)(url)
    except BlockedAddressError as exc:
        raise OpenApiError(f"The document cannot be fetched: {_fetch_refusal(str(exc))}") from None
    except TooManyRedirectsError as exc:
        raise OpenApiError(f"The document cannot be fetched: {exc}") from None
    except ResponseTooLargeError:
        raise OpenApiError(f"The document is larger than {MAX_DOCUMENT_BYTES:,} bytes.") from None
    except ToolError as exc:
        raise OpenApiError(exc.message) from None
    except httpx.HTTPError as exc:
        reason = type(exc).__name__
        raise OpenApiError(
            f"The document cannot be fetched from {safe_url(url)}: {reason}."
        ) from None
    if response.status != 200:
        raise OpenApiError(f"{safe_url(url)} answered HTTP {response.status}, not the document.")
    return response.content


def _fetch_refusal(message: str) -> str:
    """The guard's refusal, saying what opens the address for this fetch.

    The guard's own advice ("an operator can allow-list the host or network") would send the
    operator to the page's "Allowed private networks", which only the imported tools' calls
    honour: the fetch honours the site-wide setting alone.
    """
    if not message.endswith(ADVICE):
        return message  # not a refused address (a name that does not resolve)
    reason = message.removesuffix(ADVICE).rstrip()
    return (
        f"{reason} Fetching the document honours only the MCP_HTTP_ALLOWED_NETWORKS setting "
        '(README.md, "Configuration"), not "Allowed private networks" here, which the imported '
        "tools' calls use. Upload the file or paste the document instead."
    )


async def _fetch(url: str) -> FetchedResponse:
    guarded = GuardedClient(
        global_policy(), max_response_bytes=MAX_DOCUMENT_BYTES, timeout=FETCH_TIMEOUT_SECONDS
    )
    async with guarded as client:
        return await client.request(
            "GET", url, headers={"Accept": "application/yaml, application/json;q=0.9, */*;q=0.5"}
        )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def openapi_read(document: Mapping[str, Any]) -> OpenApiDocument:
    """Check that ``document`` is OpenAPI 3.x and convert each of its operations.

    Raises:
        OpenApiError: not OpenAPI 3.x, no operations, or an operation that cannot be converted
            (an unresolvable or circular ``$ref``, a malformed parameter); the message names
            the operation.
    """
    version = document.get("openapi")
    if not isinstance(version, str) or not re.fullmatch(r"3\.\d+(\.\d+)?(-[\w.]+)?", version):
        if "swagger" in document:
            raise OpenApiError(
                "This is a Swagger 2.0 document; only OpenAPI 3.x can be imported (convert it "
                "first, e.g. with swagger2openapi)."
            )
        raise OpenApiError('Not an OpenAPI 3.x document: "openapi" must be a version like 3.1.0.')
    paths = document.get("paths")
    if paths is not None and not isinstance(paths, Mapping):
        raise OpenApiError('"paths" must be an object.')
    resolver = _Resolver(document)
    operations = []
    for path, item in (paths or {}).items():
        try:
            item = resolver.inline(item, "#/paths")
        except OpenApiError as exc:
            raise OpenApiError(f"{path}: {exc.message}") from None
        if not isinstance(item, Mapping):
            raise OpenApiError(f"{path}: a path item must be an object.")
        for method in OPERATION_METHODS:
            if isinstance(item.get(method), Mapping):
                key = f"{method.upper()} {path}"
                try:
                    operations.append(_operation(resolver, key, method, path, item))
                except OpenApiError as exc:
                    raise OpenApiError(f"{key}: {exc.message}") from None
    if not operations:
        raise OpenApiError("The document has no operations to import.")
    info = document.get("info")
    title = info.get("title") if isinstance(info, Mapping) else None
    return OpenApiDocument(
        title=title if isinstance(title, str) else "",
        openapi_version=version,
        servers=tuple(_server_urls(document.get("servers"))),
        operations=tuple(operations),
    )


def _server_urls(servers: Any) -> list[str]:
    """Server URLs with their variables replaced by the defaults (3.1 section 4.8.5)."""
    urls = []
    for server in servers if isinstance(servers, list) else ():
        if not isinstance(server, Mapping) or not isinstance(server.get("url"), str):
            continue
        raw_variables = server.get("variables")
        variables: Mapping[str, Any] = raw_variables if isinstance(raw_variables, Mapping) else {}

        def default(match: re.Match[str], variables: Mapping[str, Any] = variables) -> str:
            spec = variables.get(match.group(1))
            value = spec.get("default") if isinstance(spec, Mapping) else None
            return str(value) if value is not None else match.group(0)

        urls.append(_SERVER_VARIABLE.sub(default, server["url"]))
    return urls


class _Resolver:
    """Resolves local ``$ref``s: schema components become ``$defs``, anything else is inlined.

    Component schemas may be recursive (a tree of nodes), so they are kept by reference in
    ``$defs`` rather than expanded. Other references (parameters, request bodies) are inlined,
    at most ``MAX_REF_DEPTH`` deep, and a reference to itself is an error.
    """

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document = document

    def target(self, ref: Any) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise OpenApiError(f"$ref {ref!r} points outside the document, which is not supported.")
        node: Any = self.document
        for raw in ref[1:].split("/")[1:] if ref != "#" else []:
            part = _unescape(raw)
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise OpenApiError(f"$ref {ref!r} points to nothing in the document.")
        return node

    def inline(self, node: Any, where: str, stack: tuple[str, ...] = ()) -> Any:
        """Follow ``node``'s own ``$ref`` chain (not its children's)."""
        while isinstance(node, Mapping) and "$ref" in node:
            ref = node["$ref"]
            if ref in stack:
                raise OpenApiError(f"$ref {ref!r} refers to itself.")
            if len(stack) >= MAX_REF_DEPTH:
                raise OpenApiError(f"$refs are nested more than {MAX_REF_DEPTH} deep at {where}.")
            stack = (*stack, ref)
            node = self.target(ref)
        return node

    def schema(self, node: Any, defs: dict[str, Any], depth: int = 0) -> Any:
        """Return ``node`` as JSON Schema 2020-12, adding the components it uses to ``defs``."""
        if depth > MAX_REF_DEPTH * 4:
            raise OpenApiError("A schema is nested too deeply.")
        if isinstance(node, list):
            return [self.schema(item, defs, depth + 1) for item in node]
        if not isinstance(node, Mapping):
            return node
        ref = node.get("$ref")
        segment = ref.removeprefix(_SCHEMAS_PREFIX) if isinstance(ref, str) else ""
        if isinstance(ref, str) and ref.startswith(_SCHEMAS_PREFIX) and "/" not in segment:
            name = _unescape(segment)
            if name not in defs:
                defs[name] = {}  # placeholder first: a recursive schema refers back to itself
                defs[name] = self.schema(self.target(ref), defs, depth + 1)
            return {"$ref": f"#/$defs/{segment}"}
        if ref is not None:
            return self.schema(self.inline(node, "a schema"), defs, depth + 1)
        converted = {key: self.schema(value, defs, depth + 1) for key, value in node.items()}
        return _schema_2020(converted)


def _unescape(segment: str) -> str:
    """Decode one JSON Pointer segment (RFC 6901 section 4)."""
    return segment.replace("~1", "/").replace("~0", "~")


def _schema_2020(schema: dict[str, Any]) -> dict[str, Any]:
    """Rewrite the OpenAPI 3.0 keywords that are invalid or mean otherwise in 2020-12."""
    if schema.pop("nullable", False) is True:
        kind = schema.get("type")
        if isinstance(kind, str):
            schema["type"] = [kind, "null"]
    for bound, exclusive in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        # 3.0 (draft 4): a boolean that modifies minimum/maximum; 2020-12: the bound itself.
        # pop() runs for False too: "exclusiveMinimum": false is just dropped.
        if isinstance(schema.get(exclusive), bool) and schema.pop(exclusive) and bound in schema:
            schema[exclusive] = schema.pop(bound)
    return schema


@dataclass(slots=True)
class _Builder:
    """Collects one operation's input properties and mappings."""

    properties: dict[str, Any] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    query: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    path_names: dict[str, str] = field(default_factory=dict)

    def add(self, wanted: str, location: str, schema: Any, required: bool) -> str:
        """Add an input property; a name already taken gets the location as prefix."""
        # Braces would end an HTTP-tool placeholder early.
        wanted = wanted.replace("{", "_").replace("}", "_")
        name = wanted
        if name in self.properties:
            name = f"{location}_{wanted}"
        counter = 2
        while name in self.properties:
            name, counter = f"{location}_{wanted}_{counter}", counter + 1
        self.properties[name] = schema
        if required:
            self.required.append(name)
        return name


def _operation(
    resolver: _Resolver, key: str, method: str, path: str, item: Mapping[str, Any]
) -> Operation:
    operation = item[method]
    defs: dict[str, Any] = {}
    builder = _Builder()
    for location, name, parameter_schema, required in _parameters(resolver, item, operation, defs):
        argument = builder.add(name, location, parameter_schema, required)
        placeholder = "{" + argument + "}"
        if location == "path":
            builder.path_names[name] = argument
        elif location == "query":
            builder.query[name] = placeholder
        else:
            builder.headers[name] = placeholder
    missing = [name for name in re.findall(r"\{([^{}]+)\}", path) if name not in builder.path_names]
    for name in missing:  # a template variable the document forgot to declare
        builder.path_names[name] = builder.add(name, "path", {"type": "string"}, True)
    path_template = re.sub(
        r"\{([^{}]+)\}", lambda m: "{" + builder.path_names[m.group(1)] + "}", path
    )
    body, body_template = _request_body(resolver, operation, builder, defs)
    schema: dict[str, Any] = {"type": "object", "properties": builder.properties}
    if builder.required:
        schema["required"] = builder.required
    if used := _used_defs(builder.properties, defs):
        schema["$defs"] = {name: defs[name] for name in defs if name in used}
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path)
        raise OpenApiError(
            f"the input schema built from it is not valid JSON Schema 2020-12 at /{where}: "
            f"{exc.message}"
        ) from None
    summary = _text(operation.get("summary"))
    details = _text(operation.get("description"))
    description = "\n\n".join(part for part in (summary, details) if part)
    return Operation(
        key=key,
        method=method.upper(),
        path=path,
        operation_id=_text(operation.get("operationId")),
        summary=summary,
        description=description or f"{method.upper()} {path}",
        input_schema=schema,
        path_template=path_template,
        query=builder.query,
        headers=builder.headers,
        body=body,
        body_template=body_template,
    )


def _used_defs(properties: Any, defs: Mapping[str, Any]) -> set[str]:
    """The ``$defs`` names reachable from ``properties`` (a flattened body leaves its own)."""
    used: set[str] = set()
    pending = [properties]
    while pending:
        node = pending.pop()
        if isinstance(node, Mapping):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                name = _unescape(ref.removeprefix("#/$defs/"))
                if name not in used and name in defs:
                    used.add(name)
                    pending.append(defs[name])
            pending.extend(value for key, value in node.items() if key != "$ref")
        elif isinstance(node, list):
            pending.extend(node)
    return used


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _parameters(
    resolver: _Resolver, item: Mapping[str, Any], operation: Mapping[str, Any], defs: dict[str, Any]
) -> list[tuple[str, str, Any, bool]]:
    """The (location, name, schema, required) of each usable parameter, path ones first.

    Operation parameters override path-item ones of the same name and location (3.1 section
    4.8.10.1). Cookie parameters are skipped: an HTTP tool sends no cookies.
    """
    merged: dict[tuple[str, str], Mapping[str, Any]] = {}
    for source in (item.get("parameters"), operation.get("parameters")):
        if source is None:
            continue
        if not isinstance(source, list):
            raise OpenApiError('"parameters" must be a list.')
        for raw in source:
            parameter = resolver.inline(raw, "parameters")
            if (
                not isinstance(parameter, Mapping)
                or not isinstance(parameter.get("name"), str)
                or parameter.get("in") not in ("path", "query", "header", "cookie")
            ):
                raise OpenApiError("a parameter needs a name and an in of path, query or header.")
            merged[(parameter["in"], parameter["name"])] = parameter
    found = []
    for (location, name), parameter in merged.items():
        if location == "cookie":
            continue
        if location == "header" and (
            name.lower() in _IGNORED_HEADER_PARAMS or name.lower() in FORBIDDEN_HEADERS
        ):
            continue
        schema = _parameter_schema(resolver, parameter, defs)
        if isinstance(parameter.get("description"), str) and isinstance(schema, dict):
            schema.setdefault("description", parameter["description"])
        required = location == "path" or parameter.get("required") is True
        found.append((location, name, schema, required))
    order = {"path": 0, "query": 1, "header": 2}
    return sorted(found, key=lambda entry: order[entry[0]])


def _parameter_schema(
    resolver: _Resolver, parameter: Mapping[str, Any], defs: dict[str, Any]
) -> Any:
    schema = parameter.get("schema")
    content = parameter.get("content")
    if schema is None and isinstance(content, Mapping) and content:
        media = next(iter(content.values()))
        schema = media.get("schema") if isinstance(media, Mapping) else None
    if schema is None:
        return {"type": "string"}
    converted = resolver.schema(schema, defs)
    return dict(converted) if isinstance(converted, Mapping) else converted


def _request_body(
    resolver: _Resolver, operation: Mapping[str, Any], builder: _Builder, defs: dict[str, Any]
) -> tuple[str, Any]:
    """Add the JSON request body to the inputs; return the body mode and template.

    An object body whose properties clash with no parameter is flattened into the arguments
    (so the model fills in fields, not one nested object): with no parameters at all the
    arguments are the body ("arguments"), otherwise a JSON template picks the body's fields.
    Any other body is one argument ``body``.
    """
    request_body = resolver.inline(operation.get("requestBody"), "requestBody")
    if not isinstance(request_body, Mapping):
        return "none", None
    content = request_body.get("content")
    if not isinstance(content, Mapping):
        return "none", None
    media_type, media = next(
        (
            (media_type, value)
            for media_type, value in content.items()
            if media_type.split(";")[0].strip() == "application/json"
            or media_type.split(";")[0].strip().endswith("+json")
        ),
        ("", None),
    )
    if not isinstance(media, Mapping):
        # Form and binary bodies have no faithful mapping to JSON arguments; the operator
        # edits such a draft by hand.
        return "none", None
    if media_type != "application/json":
        # The HTTP executor labels JSON bodies application/json; keep the declared type.
        builder.headers["Content-Type"] = media_type
    required = request_body.get("required") is True
    schema = resolver.schema(media.get("schema", {}), defs)
    target = _local_schema(schema, defs)
    properties = target.get("properties") if isinstance(target, Mapping) else None
    flat = (
        isinstance(properties, Mapping)
        and properties
        and target.get("type", "object") == "object"
        and not set(properties) & set(builder.properties)
        and not any("{" in name or "}" in name for name in properties)
    )
    if flat and isinstance(properties, Mapping) and isinstance(target, Mapping):
        had_parameters = bool(builder.properties)
        body_required = target.get("required") if required else []
        for name, spec in properties.items():
            builder.add(name, "body", spec, name in (body_required or []))
        if not had_parameters:
            return "arguments", None
        return "json", {name: "{" + name + "}" for name in properties}
    argument = builder.add("body", "body", schema, required)
    return "json", "{" + argument + "}"


def _local_schema(schema: Any, defs: Mapping[str, Any]) -> Any:
    """The schema itself, or the component it refers to (one hop, for flattening only)."""
    if isinstance(schema, Mapping) and set(schema) == {"$ref"}:
        return defs.get(_unescape(str(schema["$ref"]).removeprefix("#/$defs/")))
    return schema


# -- drafts and creation --------------------------------------------------------------------


def _check_base_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise OpenApiError(
            f"The server URL {url!r} is not an http(s) URL with a host; enter a base URL such "
            "as https://api.example.com/v1."
        )
    if "{" in url or "}" in url or "@" in parts.netloc:
        raise OpenApiError(
            f"The server URL {url!r} has a variable without a default, or a user name."
        )
    return url.rstrip("/")


def openapi_base_url(document: OpenApiDocument, override: str = "") -> str:
    """Return the base URL the tools call: ``override``, else the document's first server.

    Raises:
        OpenApiError: no server URL, or one that is not http(s) (a relative URL included).
    """
    url = override.strip() or (document.servers[0] if document.servers else "")
    if not url:
        raise OpenApiError("The document names no server: enter the base URL of the API.")
    return _check_base_url(url)


def unique_name(wanted: str, taken: Collection[str]) -> str:
    """Return ``wanted``, or ``wanted_2``, ``wanted_3``... the first not in ``taken``."""
    if wanted not in taken:
        return wanted
    counter = 2
    while True:
        suffix = f"_{counter}"
        candidate = wanted[: NAME_MAX - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        counter += 1


def openapi_tool_drafts(
    document: OpenApiDocument,
    *,
    keys: Sequence[str],
    base_url: str,
    taken_names: Collection[str] = (),
    credential: str | None = None,
    allow_hosts: Sequence[str] = (),
    allow_networks: Sequence[str] = (),
) -> list[ToolDraft]:
    """Return one tool draft per operation in ``keys``, named uniquely.

    Names come from the operationId (or method and path), sanitised to the tool-name rules
    and made unique against ``taken_names`` and each other.

    Raises:
        OpenApiError: a key names no operation, or the base URL is not http(s).
    """
    base = _check_base_url(base_url)
    taken = set(taken_names)
    drafts = []
    for key in keys:
        operation = document.operation(key)
        if operation is None:
            raise OpenApiError(f"The document has no operation {key}.")
        name = unique_name(operation.suggested_name, taken)
        taken.add(name)
        config: dict[str, Any] = {"method": operation.method, "url": base + operation.path_template}
        if operation.query:
            config["query"] = dict(operation.query)
        if operation.headers:
            config["headers"] = dict(operation.headers)
        if operation.body != "none":
            config["body"] = operation.body
        if operation.body_template is not None:
            config["body_template"] = operation.body_template
        if credential:
            config["credential"] = credential
        if allow_hosts:
            config["allow_hosts"] = list(allow_hosts)
        if allow_networks:
            config["allow_networks"] = list(allow_networks)
        drafts.append(
            ToolDraft(
                name=name,
                title=operation.summary[:TITLE_MAX],
                description=operation.description,
                input_schema=operation.input_schema,
                config=config,
                # RFC 9110 section 9.2: safe and idempotent methods.
                read_only_hint=True if operation.method in ("GET", "HEAD", "OPTIONS") else None,
                idempotent_hint=True if operation.method in ("PUT", "DELETE") else None,
            )
        )
    return drafts


def tool_names_on_endpoints(*, endpoints: Iterable[Endpoint]) -> set[str]:
    """Return the names of every tool published on ``endpoints`` (one query)."""
    ids = [endpoint.pk for endpoint in endpoints]
    if not ids:
        return set()
    return set(Tool.objects.filter(endpoints__in=ids).values_list("name", flat=True))


@transaction.atomic
def openapi_tools_create(
    *,
    document: OpenApiDocument,
    keys: Sequence[str],
    endpoints: Sequence[Endpoint],
    base_url: str = "",
    credential: str | None = None,
    allow_hosts: Sequence[str] = (),
    allow_networks: Sequence[str] = (),
    enabled: bool = False,
    actor: Actor = None,
) -> list[Tool]:
    """Create an HTTP tool per chosen operation, published on ``endpoints``.

    Drafts stay disabled until an operator has reviewed them, unless ``enabled`` (the
    operator has reviewed the document); all or none are created, by ``actor`` (the history
    names them "openapi import"), in one transaction, so clients hear of them once.

    Raises:
        OpenApiError: an operation key is unknown, or the base URL is not http(s).
        ValidationError: a draft fails the tool's own validation (nothing is created).
    """
    drafts = openapi_tool_drafts(
        document,
        keys=keys,
        base_url=openapi_base_url(document, base_url),
        taken_names=tool_names_on_endpoints(endpoints=endpoints),
        credential=credential,
        allow_hosts=allow_hosts,
        allow_networks=allow_networks,
    )
    return [
        tool_create(
            name=draft.name,
            kind=Tool.Kind.HTTP,
            config=draft.config,
            endpoints=endpoints,
            title=draft.title,
            description=draft.description,
            input_schema=dict(draft.input_schema),
            read_only_hint=draft.read_only_hint,
            idempotent_hint=draft.idempotent_hint,
            enabled=enabled,
            actor=actor,
            source=history.OPENAPI,
        )
        for draft in drafts
    ]
