"""MCP Apps (SEP-1865, the ``io.modelcontextprotocol/ui`` extension, stable 2026-01-26).

A tool links an interactive HTML view: a ``ui://`` resource of MIME type
``text/html;profile=mcp-app`` named by ``_meta.ui.resourceUri`` on the tool definition. The
resource's contents carry ``_meta.ui`` (content-security domains, permissions, a dedicated
domain, a border preference), which the host turns into the view's CSP and iframe ``allow``.

Clients declare support in ``capabilities.extensions["io.modelcontextprotocol/ui"]`` with the
MIME types they render; servers should link views only for such clients (the spec's "Server
Behavior"), so other clients see the tool as a plain tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, TypeGuard

from mcp_app.protocol.catalog import JSON

EXTENSION = "io.modelcontextprotocol/ui"
MIME_TYPE = "text/html;profile=mcp-app"
URI_SCHEME = "ui://"

# The resource's ``_meta.ui`` fields ("UIResourceMeta") and their nested ones.
CSP_KEYS = ("connectDomains", "resourceDomains", "frameDomains", "baseUriDomains")
PERMISSION_KEYS = ("camera", "microphone", "geolocation", "clipboardWrite")
META_KEYS = ("csp", "permissions", "domain", "prefersBorder")


def is_view(uri: str, mime_type: str) -> bool:
    """Whether a resource is a view a tool may link: a ui:// URI and the view MIME type."""
    return uri.startswith(URI_SCHEME) and mime_type == MIME_TYPE


def client_renders_apps(capabilities: Mapping[str, Any]) -> bool:
    """Whether the client declared the extension with the MIME type of HTML views."""
    extensions = capabilities.get("extensions")
    if not isinstance(extensions, Mapping):
        return False
    declared = extensions.get(EXTENSION)
    if not isinstance(declared, Mapping):
        return False
    mime_types = declared.get("mimeTypes")
    return isinstance(mime_types, list) and MIME_TYPE in mime_types


def with_view_link(meta: Mapping[str, JSON], resource_uri: str) -> dict[str, JSON]:
    """Return the tool's ``_meta`` with ``ui.resourceUri`` set to ``resource_uri``.

    Other ``ui`` keys the operator wrote (``visibility``) are kept.
    """
    linked = dict(meta)
    ui = linked.get("ui")
    linked["ui"] = {**(ui if isinstance(ui, Mapping) else {}), "resourceUri": resource_uri}
    return linked


# The extension's older flat key for the link, still read by its SDK.
LEGACY_LINK_KEY = "ui/resourceUri"


def split_view_link(meta: Mapping[str, JSON]) -> tuple[dict[str, JSON], str]:
    """Return a tool's ``_meta`` without the view link it carries, and that link ("": none).

    A tool synced from an upstream carries the upstream's own ``ui.resourceUri`` (or the
    flat ``ui/resourceUri``) in its ``_meta``: taken out, it is linked as an operator's link
    is, to clients that render views and only when the endpoint publishes the view.
    """
    rest = dict(meta)
    flat = rest.pop(LEGACY_LINK_KEY, None)
    ui = rest.get("ui")
    nested = None
    if isinstance(ui, Mapping) and "resourceUri" in ui:
        nested = ui["resourceUri"]
        ui = {key: value for key, value in ui.items() if key != "resourceUri"}
        if ui:
            rest["ui"] = ui
        else:
            del rest["ui"]
    link = nested if isinstance(nested, str) else flat
    return rest, link if isinstance(link, str) and link.startswith(URI_SCHEME) else ""


def ui_meta_problems(value: JSON) -> list[str]:
    """Why ``value`` is not a resource's ``_meta.ui`` object as the extension defines it."""
    if not isinstance(value, Mapping):
        return ["Enter a JSON object ({...})."]
    problems = [
        f"Unknown key {key!r} (allowed: {', '.join(META_KEYS)})."
        for key in value
        if key not in META_KEYS
    ]
    csp = value.get("csp")
    if csp is not None:
        if not isinstance(csp, Mapping):
            problems.append('"csp" must be an object.')
        else:
            for key, domains in csp.items():
                if key not in CSP_KEYS:
                    problems.append(f"Unknown csp key {key!r} (allowed: {', '.join(CSP_KEYS)}).")
                elif not isinstance(domains, list) or not all(
                    _is_origin(domain) for domain in domains
                ):
                    problems.append(
                        f'"csp.{key}" must be a list of origins (https://example.com, '
                        "https://*.example.com)."
                    )
    permissions = value.get("permissions")
    if permissions is not None:
        if not isinstance(permissions, Mapping):
            problems.append('"permissions" must be an object.')
        else:
            for key, granted in permissions.items():
                if key not in PERMISSION_KEYS:
                    problems.append(
                        f"Unknown permission {key!r} (allowed: {', '.join(PERMISSION_KEYS)})."
                    )
                elif not isinstance(granted, Mapping):
                    problems.append(f'"permissions.{key}" must be an object ({{}}).')
    if "domain" in value and not isinstance(value["domain"], str):
        problems.append('"domain" must be a string.')
    if "prefersBorder" in value and not isinstance(value["prefersBorder"], bool):
        problems.append('"prefersBorder" must be true or false.')
    return problems


def _is_origin(value: JSON) -> TypeGuard[str]:
    # A CSP source naming an origin: a scheme, "://", and a host without spaces, quotes or
    # the directive separator (anything else could widen the policy built from it).
    if not isinstance(value, str) or "://" not in value:
        return False
    return not any(char in value for char in " ;,'\"\n\r\t")


def content_security_policy(ui_meta: Mapping[str, JSON]) -> str:
    """The CSP a host enforces on a view with ``_meta.ui`` ``ui_meta`` ("Security
    Implications": CSP construction from metadata).

    Only declared origins are allowed; with none declared, the extension's restrictive
    default. Network requests stay closed (``connect-src 'none'``) unless ``connectDomains``
    names origins: the spec lets a host restrict further, never loosen.
    """
    csp = ui_meta.get("csp")
    declared = csp if isinstance(csp, Mapping) else {}

    def origins(key: str) -> list[str]:
        value = declared.get(key)
        return [item for item in value if _is_origin(item)] if isinstance(value, list) else []

    resources = origins("resourceDomains")
    directives = [
        ("default-src", ["'none'"]),
        ("script-src", ["'self'", "'unsafe-inline'", *resources]),
        ("style-src", ["'self'", "'unsafe-inline'", *resources]),
        ("img-src", ["'self'", "data:", *resources]),
        ("font-src", ["'self'", *resources]),
        ("media-src", ["'self'", "data:", *resources]),
        ("connect-src", origins("connectDomains") or ["'none'"]),
        ("frame-src", origins("frameDomains") or ["'none'"]),
        ("object-src", ["'none'"]),
        ("base-uri", origins("baseUriDomains") or ["'self'"]),
    ]
    return "; ".join(f"{name} {' '.join(sources)}" for name, sources in directives)


# Permission Policy features by the ``permissions`` key that requests them.
_PERMISSION_FEATURES: Final[Mapping[str, str]] = {
    "camera": "camera",
    "microphone": "microphone",
    "geolocation": "geolocation",
    "clipboardWrite": "clipboard-write",
}


def permission_allow(ui_meta: Mapping[str, JSON]) -> str:
    """The iframe ``allow`` attribute granting the permissions the view requests."""
    permissions = ui_meta.get("permissions")
    if not isinstance(permissions, Mapping):
        return ""
    return "; ".join(feature for key, feature in _PERMISSION_FEATURES.items() if key in permissions)
