"""The catalog's implementation of the protocol port ResourceReader.

``CatalogResourceReader`` produces ``resources/read`` contents from the snapshot keys built by
``services.catalog``: text needs no query; files are read from storage; a resource template
resolves through its template or Python function; a resource (or a templated URI) of an
upstream MCP server is read there (``services/upstreams.py``).
"""

from __future__ import annotations

import asyncio
import base64
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import uritemplate
from django.core.files.storage import default_storage

from mcp_app.executors.python import resource_functions
from mcp_app.executors.template import render_template
from mcp_app.protocol.catalog import ResourceDef, ResourceTemplateDef
from mcp_app.services.catalog import ResourceKey, ResourceTemplateKey
from mcp_app.services.upstreams import upstream_read_resource

# MIME types served as text (when the bytes decode as UTF-8) although not text/*.
_TEXTUAL_TYPES = frozenset(
    {
        "application/json", "application/xml", "application/javascript", "application/yaml",
        "application/x-yaml", "application/toml", "application/sql", "image/svg+xml",
    }
)  # fmt: skip
_DEFAULT_TEMPLATE_MIME = "text/plain"


class CatalogResourceReader:
    """Reads resources and resolves resource templates of the catalog; those of an upstream
    in the session of ``caller`` (the request's ``RequestContext.caller``)."""

    def __init__(
        self, caller: str = "", request_headers: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        self.caller = caller
        # The client's request headers, of which an upstream gets those it forwards.
        self.request_headers = request_headers or {}

    async def read_resource(self, resource: ResourceDef) -> Sequence[Mapping[str, Any]]:
        key: ResourceKey = resource.key
        if key.upstream is not None:
            return await upstream_read_resource(
                key.upstream,
                key.remote_uri,
                resource.uri,
                caller=self.caller,
                request_headers=self.request_headers,
            )
        if key.file_name is None:
            return [_text_contents(resource.uri, resource.mime_type, key.text or "")]
        data = await asyncio.to_thread(_read_file, key.file_name)
        return [_bytes_contents(resource.uri, resource.mime_type, data)]

    async def read_template(
        self, template: ResourceTemplateDef, uri: str, variables: Mapping[str, str]
    ) -> Sequence[Mapping[str, Any]] | None:
        """Resolve ``uri`` with the template's resolver; None when it has nothing there."""
        key: ResourceTemplateKey = template.key
        mime_type = template.mime_type
        if key.upstream is not None:
            remote_uri = uri
            if key.remote_uri_template != template.uri_template:
                remote_uri = uritemplate.expand(key.remote_uri_template, dict(variables))
            return await upstream_read_resource(
                key.upstream,
                remote_uri,
                uri,
                caller=self.caller,
                request_headers=self.request_headers,
            )
        if key.kind == "template":
            source = str(key.config.get("template", ""))
            text = await asyncio.to_thread(render_template, source, dict(variables))
            return [_text_contents(uri, mime_type or _DEFAULT_TEMPLATE_MIME, text)]
        function = resource_functions()[str(key.config.get("function"))].function
        if inspect.iscoroutinefunction(function):
            value = await function(uri, dict(variables))
        else:
            value = await asyncio.to_thread(function, uri, dict(variables))
        if value is None:
            return None
        if isinstance(value, str):
            return [_text_contents(uri, mime_type or _DEFAULT_TEMPLATE_MIME, value)]
        if isinstance(value, bytes):
            return [_bytes_contents(uri, mime_type, value)]
        return list(value)


def _read_file(name: str) -> bytes:
    with default_storage.open(name, "rb") as handle:
        return handle.read()


def _text_contents(uri: str, mime_type: str, text: str) -> dict[str, Any]:
    contents: dict[str, Any] = {"uri": uri, "text": text}
    if mime_type:
        contents["mimeType"] = mime_type
    return contents


def _bytes_contents(uri: str, mime_type: str, data: bytes) -> dict[str, Any]:
    """Serve textual types as ``text`` when they decode as UTF-8, anything else as a blob."""
    if (
        mime_type.startswith("text/")
        or mime_type in _TEXTUAL_TYPES
        or mime_type.endswith(("+json", "+xml"))
    ):
        try:
            return _text_contents(uri, mime_type, data.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    contents: dict[str, Any] = {"uri": uri, "blob": base64.b64encode(data).decode("ascii")}
    if mime_type:
        contents["mimeType"] = mime_type
    return contents
