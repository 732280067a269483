"""System checks: misconfigured executors, resource-template kinds, python tool modules, policy
kinds, secret keys or stdio allow-list fail ``check``.

With a database (``check --database default``, ``migrate``), the catalog rows are also checked
against the executors and resolvers, as a warning: a row whose function went away fails only
that tool or template.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.core.checks import CheckMessage, Error, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError

from mcp_app.bridge.servers import AllowListError
from mcp_app.conf import get_conf
from mcp_app.executors import get_executors
from mcp_app.executors.base import ConfigError
from mcp_app.executors.netguard import global_policy
from mcp_app.executors.python import resource_functions, tool_functions
from mcp_app.executors.resource_kinds import get_resolvers
from mcp_app.models import ResourceTemplate, Tool
from mcp_app.protocol.results import ToolError
from mcp_app.services.credentials import configured_keys, secret_keys_configured
from mcp_app.services.policies import get_policy_kinds
from mcp_app.services.stdio import stdio_servers


@register("mcp")
def check_executors(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    try:
        executors = get_executors()
        tool_functions()
        resource_functions()
    except (ImproperlyConfigured, ImportError) as exc:
        return [Error(str(exc), id="mcp_app.E001")]
    # One message for all missing kinds: a trimmed MCP_EXECUTORS usually drops several.
    missing = [repr(kind) for kind in Tool.Kind.values if kind not in executors]
    if not missing:
        return []
    return [
        Error(
            f"Tool kind(s) {', '.join(missing)} have no executor in MCP_EXECUTORS.",
            hint="Add the executor class of each kind to MCP_EXECUTORS.",
            id="mcp_app.E002",
        )
    ]


@register("mcp")
def check_resource_template_kinds(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    try:
        get_resolvers()
    except ImproperlyConfigured as exc:
        return [
            Error(
                str(exc),
                hint="List Resolver classes by dotted path in MCP_RESOURCE_TEMPLATE_KINDS.",
                id="mcp_app.E040",
            )
        ]
    return []


@register("mcp")
def check_policy_kinds(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    # A kind that does not load would refuse every call its policies guard (fail closed).
    try:
        get_policy_kinds()
    except (ImproperlyConfigured, ImportError) as exc:
        return [
            Error(
                str(exc),
                hint="List PolicyKind classes by dotted path in MCP_POLICY_KINDS.",
                id="mcp_app.E030",
            )
        ]
    return []


@register("mcp", "database")
def check_catalog_rows(
    app_configs: Sequence[AppConfig] | None = None,
    databases: Sequence[str] | None = None,
    **kwargs: Any,
) -> list[CheckMessage]:
    if not databases:
        return []
    try:
        executors = get_executors()
        resolvers = get_resolvers()
        resource_functions()
    except (ImproperlyConfigured, ImportError):
        return []  # reported by check_executors and check_resource_template_kinds
    messages: list[CheckMessage] = []
    try:
        for database in databases:
            for tool in Tool.objects.using(database).only("pk", "name", "kind", "config"):
                executor = executors.get(tool.kind)
                try:
                    if executor is None:
                        raise ConfigError(f"no executor for kind {tool.kind!r}")
                    executor.validate_config(tool.config)
                except ConfigError as exc:
                    messages.append(
                        Warning(
                            f"Tool {tool.name!r} (id {tool.pk}) cannot run: {exc}",
                            obj=tool,
                            id="mcp_app.W001",
                        )
                    )
            for template in ResourceTemplate.objects.using(database).only(
                "pk", "uri_template", "kind", "config"
            ):
                resolver = resolvers.get(template.kind)
                try:
                    if resolver is None:
                        raise ConfigError(f"no resolver for kind {template.kind!r}")
                    resolver.validate_config(template.config)
                except ConfigError as exc:
                    messages.append(
                        Warning(
                            f"Resource template {template.uri_template!r} (id {template.pk}) "
                            f"cannot resolve: {exc}",
                            obj=template,
                            id="mcp_app.W002",
                        )
                    )
    except DatabaseError:
        # Before the first migrate the tables do not exist yet; nothing to check.
        return []
    return messages


@register("mcp")
def check_credential_keys(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    messages: list[CheckMessage] = []
    try:
        configured_keys()
    except ValueError as exc:
        messages.append(Error(str(exc), id="mcp_app.E003"))
    if not secret_keys_configured():
        messages.append(
            Warning(
                "MCP_SECRET_KEYS is not set: credential secrets are encrypted with a key "
                "derived from SECRET_KEY, so changing SECRET_KEY makes them unreadable.",
                hint="Set MCP_SECRET_KEYS to a key from "
                "cryptography.fernet.Fernet.generate_key(), then run manage.py "
                "rotate_credentials.",
                id="mcp_app.W003",
            )
        )
    try:
        global_policy()
    except ToolError:
        messages.append(
            Error(
                "MCP_HTTP_ALLOWED_NETWORKS must be comma-separated networks in CIDR notation, "
                "e.g. 10.20.0.0/16,fd12::/48.",
                id="mcp_app.E004",
            )
        )
    return messages


@register("mcp")
def check_stdio_servers(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """An invalid stdio allow-list is an error; allowed servers with no bridge, a warning."""
    try:
        servers = stdio_servers()
    except AllowListError as exc:
        return [Error(str(exc), id="mcp_app.E020")]
    if servers and not get_conf().MCP_STDIO_BRIDGE_URL.strip():
        return [
            Warning(
                "MCP_STDIO_SERVERS allows stdio servers, but MCP_STDIO_BRIDGE_URL is not set: "
                "their upstreams fail until it names the stdio bridge.",
                hint="Run manage.py mcp_stdio_bridge and set MCP_STDIO_BRIDGE_URL to its URL "
                "(python3 dev.py run does both).",
                id="mcp_app.W020",
            )
        ]
    return []
