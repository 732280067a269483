"""Resource identifiers (RFC 8707) of our endpoints, derived from PUBLIC_BASE_URL only.

An endpoint's resource is ``canonical(PUBLIC_BASE_URL + /mcp/<slug>)``; comparisons are between
canonical forms (lowercase scheme and host, no default port, no trailing slash), so a client
that sends an uppercase host still matches (2025-11-25 basic/authorization). Never derived from
the Host header.
"""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.db.models import QuerySet

from mcp_app.conf import get_site
from mcp_app.models import Endpoint

_DEFAULT_PORTS = {"http": 80, "https": 443}
_SLUG = re.compile(r"[-a-zA-Z0-9_]+")
PRM_PREFIX = "/.well-known/oauth-protected-resource"


def canonical(uri: str) -> str | None:
    """Return the canonical form of an absolute http(s) URI, or None if it is not one."""
    try:
        parts = urlsplit(uri.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname or parts.username or parts.fragment:
        return None
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        host = f"{host}:{port}"
    return urlunsplit((scheme, host, parts.path.rstrip("/"), parts.query, ""))


def issuer() -> str:
    """The authorization server's issuer: PUBLIC_BASE_URL exactly, as DOT publishes it."""
    return str(settings.PUBLIC_BASE_URL)


def endpoint_resource(slug: str) -> str:
    """The resource identifier of endpoint ``slug`` (what PRM publishes and tokens carry)."""
    return _endpoint_resource(get_site().PUBLIC_BASE_URL, slug)


@lru_cache(maxsize=4096)
def _endpoint_resource(base_url: str, slug: str) -> str:
    # Every OAuth request compares its token's audience with this: parse the URL once.
    return canonical(f"{base_url}/mcp/{slug}") or ""


def management_resource() -> str:
    """The management API's resource identifier (``PUBLIC_BASE_URL/api``): tokens issued for
    it manage the catalog (``mcp_app/api``) and are refused by every MCP endpoint, whose own
    resource never equals it."""
    return canonical(f"{settings.PUBLIC_BASE_URL}/api") or ""


def is_management_resource(resource: str) -> bool:
    return canonical(resource) == management_resource()


def metadata_url(slug: str) -> str:
    """The protected resource metadata URL of endpoint ``slug`` (RFC 9728 path form)."""
    return f"{settings.PUBLIC_BASE_URL}{PRM_PREFIX}/mcp/{slug}"


def slug_of(resource: str) -> str | None:
    """The endpoint slug a resource identifier names, or None if it names none of ours."""
    wanted = canonical(resource)
    base = canonical(f"{settings.PUBLIC_BASE_URL}/mcp")
    if wanted is None or base is None or not wanted.startswith(base + "/"):
        return None
    slug = wanted[len(base) + 1 :]
    return slug if _SLUG.fullmatch(slug) else None


def oauth_endpoints() -> QuerySet[Endpoint]:
    """Endpoints tokens can be issued for: enabled and OAuth-protected."""
    return Endpoint.objects.filter(enabled=True, auth_mode=Endpoint.AuthMode.OAUTH)


def endpoint_for_resource(resource: str) -> Endpoint | None:
    slug = slug_of(resource)
    if slug is None:
        return None
    return oauth_endpoints().filter(slug=slug).first()


def sole_endpoint() -> Endpoint | None:
    """The only OAuth endpoint, when there is exactly one (a resource-less request is then
    unambiguous); None otherwise."""
    endpoints = list(oauth_endpoints()[:2])
    return endpoints[0] if len(endpoints) == 1 else None
