"""Discovery documents: a server card per listed endpoint and the site's AI Catalog.

A client that knows only the site's domain fetches ``/.well-known/ai-catalog.json``, picks the
entries of type ``application/mcp-server-card+json`` and follows each one's ``url`` to a card
at ``<endpoint URL>/server-card``: the endpoint's name, version, icons, streamable-HTTP remote
and protocol versions, and what authorization it requires (SEP-2127; the discovery rules of the
modelcontextprotocol/experimental-ext-server-card repository). Only endpoints an operator
marked ``listed`` and that are enabled appear; any other slug answers 404, as an unknown one
does.

Both documents are public by design: they carry no secret and no internal address, so any
origin may read them without credentials. Each answer names an ETag computed from its bytes
and asks caches to revalidate every time, so an edit in the admin shows in the next fetch
while an unchanged document costs the client a 304.

Everything is derived from ``PUBLIC_BASE_URL`` (never the Host header), as the OAuth
resource identifiers are.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from mcp_app.auth import resources
from mcp_app.conf import get_site
from mcp_app.models import Endpoint
from mcp_app.protocol.handlers.lifecycle import SERVER_VERSION
from mcp_app.protocol.versions import ALL_VERSIONS
from mcp_app.services.icons import public_icons

CARD_SCHEMA = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
CARD_MEDIA_TYPE = "application/mcp-server-card+json"
CATALOG_MEDIA_TYPE = "application/ai-catalog+json"
CATALOG_PATH = "/.well-known/ai-catalog.json"
CARD_SUFFIX = "/server-card"
AI_CATALOG_VERSION = "1.0"
# Where the card says what authorization the endpoint needs: the card schema has no field for
# it, and ``_meta`` is its extension point (a one-label prefix, ours, not MCP's reserved one).
AUTHORIZATION_META = "mcphost/authorization"
# The card schema's length limits on ``title`` and ``description``.
_TEXT_LIMIT = 100
# Revalidate on every use: catalog edits must show in the next fetch, and the ETag makes an
# unchanged answer a bodyless 304.
CACHE_CONTROL = "public, no-cache"


# -- the documents


def site_host() -> str:
    """The host name of ``PUBLIC_BASE_URL``, lowercase, without port."""
    return (urlsplit(get_site().PUBLIC_BASE_URL).hostname or "localhost").lower()


def site_namespace() -> str:
    """The reverse-DNS namespace of the site (``mcp.example.com`` gives ``com.example.mcp``).

    An IP address is kept as written (reversing its octets names nothing); an IPv6 address's
    colons, which a card name may not hold, become hyphens.
    """
    host = site_host()
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return ".".join(reversed(host.split(".")))
    return str(address).replace(":", "-")


def card_name(endpoint: Endpoint) -> str:
    return f"{site_namespace()}/{endpoint.slug}"


def card_url(endpoint: Endpoint) -> str:
    return f"{endpoint.public_url()}{CARD_SUFFIX}"


def catalog_identifier(endpoint: Endpoint) -> str:
    """The AI Catalog identifier: ``urn:air:{publisher}:mcp:{name}``, publisher our host."""
    return f"urn:air:{site_host()}:mcp:{endpoint.slug}"


def _clip(text: str) -> str:
    """``text`` on one line and within the card schema's 100 characters (an ellipsis marks a
    cut)."""
    text = " ".join(text.split())
    return text if len(text) <= _TEXT_LIMIT else text[: _TEXT_LIMIT - 1].rstrip() + "…"


def _description(endpoint: Endpoint) -> str:
    # Required and non-empty in a card; an endpoint's may be blank.
    return _clip(endpoint.description) or _clip(f"MCP endpoint {endpoint.title or endpoint.slug}")


def authorization(endpoint: Endpoint) -> dict[str, Any]:
    """What a client must present: nothing (public), or an OAuth token issued for the
    endpoint's resource, whose RFC 9728 metadata names the authorization server."""
    if endpoint.auth_mode == Endpoint.AuthMode.PUBLIC:
        return {"type": "none"}
    return {
        "type": "oauth2",
        "resource": resources.endpoint_resource(endpoint.slug),
        "resourceMetadata": resources.metadata_url(endpoint.slug),
    }


def server_card(endpoint: Endpoint) -> dict[str, Any]:
    """The Server Card of ``endpoint`` (schema ``v1/server-card``)."""
    remote: dict[str, Any] = {
        "type": "streamable-http",
        "url": endpoint.public_url(),
        "supportedProtocolVersions": list(ALL_VERSIONS),
    }
    if endpoint.auth_mode != Endpoint.AuthMode.PUBLIC:
        remote["headers"] = [
            {
                "name": "Authorization",
                "description": (
                    "An OAuth bearer token issued for this endpoint; its protected resource "
                    f"metadata is at {resources.metadata_url(endpoint.slug)}."
                ),
                "isRequired": True,
                "isSecret": True,
            }
        ]
    card: dict[str, Any] = {
        "$schema": CARD_SCHEMA,
        "name": card_name(endpoint),
        "version": SERVER_VERSION,
        "description": _description(endpoint),
    }
    if title := _clip(endpoint.title):
        card["title"] = title
    if endpoint.icons:
        card["icons"] = list(public_icons(endpoint.icons))
    card["remotes"] = [remote]
    card["_meta"] = {AUTHORIZATION_META: authorization(endpoint)}
    return card


def site_catalog(endpoints: QuerySet[Endpoint]) -> dict[str, Any]:
    """The AI Catalog of ``endpoints``: one entry per card, by URL.

    An entry carries both the MCP discovery draft's ``type`` and the AI Catalog 1.0
    ``mediaType``/``displayName``: each reader ignores the members it does not know.
    """
    host = site_host()
    return {
        "specVersion": AI_CATALOG_VERSION,
        "host": {"displayName": host, "identifier": host},
        "entries": [
            {
                "identifier": catalog_identifier(endpoint),
                "type": CARD_MEDIA_TYPE,
                "mediaType": CARD_MEDIA_TYPE,
                "displayName": endpoint.title or endpoint.slug,
                "description": _description(endpoint),
                "url": card_url(endpoint),
            }
            for endpoint in endpoints
        ],
    }


def listed_endpoints() -> QuerySet[Endpoint]:
    """Endpoints the documents show: listed by an operator and enabled."""
    return Endpoint.objects.filter(listed=True, enabled=True).only(
        "slug", "title", "description", "auth_mode", "icons"
    )


# -- HTTP


def _etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def _matches(if_none_match: str, etag: str) -> bool:
    # Weak comparison (RFC 9110 13.1.2), as GET uses: W/ prefixes do not matter.
    tags = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
    return "*" in tags or etag in tags


def _cors(response: HttpResponse) -> HttpResponse:
    response["Access-Control-Allow-Origin"] = "*"
    response["Access-Control-Allow-Methods"] = "GET"
    response["Access-Control-Allow-Headers"] = "Content-Type, If-None-Match"
    response["Access-Control-Expose-Headers"] = "ETag"
    return response


def _error(status: int, error: str, **headers: str) -> HttpResponse:
    return _cors(
        HttpResponse(
            json.dumps({"error": error}),
            status=status,
            content_type="application/json",
            headers=headers,
        )
    )


def _document(
    build: Callable[[HttpRequest, str], Mapping[str, Any] | None], media_type: str
) -> Callable[..., HttpResponse]:
    """A view answering GET (and HEAD, and the CORS preflight) with ``build``'s document,
    or 404 when it builds none."""

    def view(request: HttpRequest, slug: str = "") -> HttpResponse:
        if request.method == "OPTIONS":
            response = HttpResponse(status=204)
            response["Access-Control-Max-Age"] = "600"
            return _cors(response)
        if request.method not in ("GET", "HEAD"):
            return _error(405, "method_not_allowed", Allow="GET, HEAD, OPTIONS")
        document = build(request, slug)
        if document is None:
            return _error(404, "not_found")
        body = json.dumps(document, ensure_ascii=False, sort_keys=True).encode()
        etag = _etag(body)
        headers = {"ETag": etag, "Cache-Control": CACHE_CONTROL}
        if _matches(request.headers.get("If-None-Match", ""), etag):
            return _cors(HttpResponse(status=304, headers=headers))
        response = HttpResponse(
            b"" if request.method == "HEAD" else body, content_type=media_type, headers=headers
        )
        response["Content-Length"] = str(len(body))
        return _cors(response)

    # A write is refused with 405 below, not by the CSRF check: nothing here reads cookies.
    return csrf_exempt(view)


def _card(request: HttpRequest, slug: str) -> dict[str, Any] | None:
    endpoint = listed_endpoints().filter(slug=slug).first()
    return None if endpoint is None else server_card(endpoint)


def _catalog(request: HttpRequest, slug: str) -> dict[str, Any]:
    return site_catalog(listed_endpoints())


server_card_view = _document(_card, CARD_MEDIA_TYPE)
site_catalog_view = _document(_catalog, CATALOG_MEDIA_TYPE)
