"""The catalog's implementation of the protocol port ResourceReader.

``CatalogResourceReader`` produces ``resources/read`` contents from the snapshot bindings built by
``services.snapshots``: text needs no query; files are read from storage; a URI a resource
template matched is resolved by the resolver of the template's kind
(``executors/resource_kinds``), to which the reader is the ``ReadContext``; a resource (or a
templated URI) of an upstream MCP server is read there (``services/upstream_relay.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from django.core.files.storage import default_storage

from mcp_app.executors.resource_kinds import get_resolver
from mcp_app.executors.resource_kinds.base import TemplateSource, bytes_contents, text_contents
from mcp_app.protocol.catalog import ResourceDef, ResourceTemplateDef
from mcp_app.services.snapshots import ResourceBinding, ResourceTemplateBinding
from mcp_app.services.upstream_relay import upstream_read_resource


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
        key: ResourceBinding = resource.binding
        if key.upstream is not None:
            return await self.read_upstream(key.upstream, key.remote_uri, resource.uri)
        if key.file_name is None:
            contents = text_contents(resource.uri, resource.mime_type, key.text or "")
        else:
            data = await asyncio.to_thread(_read_file, key.file_name)
            contents = bytes_contents(resource.uri, resource.mime_type, data)
        if key.ui_meta:
            # An MCP Apps view: its content-security metadata goes with its contents.
            contents["_meta"] = {"ui": dict(key.ui_meta)}
        return [contents]

    async def read_template(
        self, template: ResourceTemplateDef, uri: str, variables: Mapping[str, str]
    ) -> Sequence[Mapping[str, Any]] | None:
        """Resolve ``uri`` with the resolver of the template's kind; None when it has nothing
        there.

        Raises:
            LookupError: the template's kind is no longer configured.
        """
        key: ResourceTemplateBinding = template.binding
        source = TemplateSource(
            kind=key.kind,
            uri_template=template.uri_template,
            mime_type=template.mime_type,
            config=key.config,
            upstream=key.upstream,
            remote_uri_template=key.remote_uri_template,
        )
        return await get_resolver(key.kind).resolve(source, uri, variables, self)

    async def read_upstream(
        self, upstream: str, remote_uri: str, uri: str
    ) -> Sequence[Mapping[str, Any]]:
        """Read ``remote_uri`` on ``upstream`` in the caller's session (``ReadContext``)."""
        return await upstream_read_resource(
            upstream,
            remote_uri,
            uri,
            caller=self.caller,
            request_headers=self.request_headers,
        )


def _read_file(name: str) -> bytes:
    with default_storage.open(name, "rb") as handle:
        data: bytes = handle.read()
        return data
