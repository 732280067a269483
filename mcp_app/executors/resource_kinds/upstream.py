"""Kind "upstream": each URI the template matches is read from the upstream MCP server the
template names (its ``upstream`` column), at the same URI or at its remote template filled in
with the variables matched here.

Config: none (``{}``); the upstream and remote template are columns of the row, which the
catalog import and the API name like any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import uritemplate

from mcp_app.executors.base import ConfigError
from mcp_app.executors.resource_kinds.base import Contents, ReadContext, Resolver, TemplateSource


class UpstreamResolver(Resolver):
    kind = "upstream"
    label = "Upstream MCP server"
    reads_upstream = True

    def validate_config(self, config: Mapping[str, Any]) -> None:
        if config:
            raise ConfigError("A template read from an upstream has no config.")

    async def resolve(
        self,
        template: TemplateSource,
        uri: str,
        variables: Mapping[str, str],
        context: ReadContext,
    ) -> Contents | None:
        if template.upstream is None:
            raise ConfigError("The template names no upstream.")
        remote_uri = uri
        if template.remote_uri_template and template.remote_uri_template != template.uri_template:
            remote_uri = uritemplate.expand(template.remote_uri_template, dict(variables))
        return await context.read_upstream(template.upstream, remote_uri, uri)
