"""The web side of OAuth: metadata documents, consent, rate-limited registration, CORS.

DOT serves the authorization server (authorize, token, revoke, RFC 8414 metadata, DCR); these
views adjust it for MCP:

- ``protected_resource_metadata``: RFC 9728 per endpoint, at
  ``/.well-known/oauth-protected-resource/mcp/<slug>`` (404 for public or unknown endpoints);
- ``ConsentView``: DOT's authorization view with what a user must see before approving a
  client that named itself (DCR and CIMD clients are unverified): the redirect host, the
  endpoint and the scopes in plain words;
- ``RateLimitedRegistrationView``: DCR with a per-address hourly budget (429 past it);
- ``cors``: browser clients (MCP Inspector) read the metadata and call register and token
  from another origin; no credentials are involved, so any origin may.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, JsonResponse
from oauth2_provider.views import AuthorizationView
from oauth2_provider.views.dynamic_client_registration import DynamicClientRegistrationView

from mcp_app.auth import resources
from mcp_app.auth.addresses import client_address
from mcp_app.auth.scopes import EndpointScopes

CORS_HEADERS = "Authorization, Content-Type, MCP-Protocol-Version"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def cors(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Let any origin call ``view`` without credentials, preflight included."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method == "OPTIONS":
            response = HttpResponse(status=204)
            response["Access-Control-Allow-Methods"] = "GET, POST, OPTIONS"
            response["Access-Control-Allow-Headers"] = CORS_HEADERS
            response["Access-Control-Max-Age"] = "600"
        else:
            response = view(request, *args, **kwargs)
        response["Access-Control-Allow-Origin"] = "*"
        response["Access-Control-Expose-Headers"] = "WWW-Authenticate"
        return response

    return wrapped


@cors
def protected_resource_metadata(request: HttpRequest, slug: str) -> HttpResponse:
    """RFC 9728 document of one OAuth endpoint: its resource, our issuer and its scopes."""
    if request.method not in ("GET", "HEAD"):
        return JsonResponse({"error": "method_not_allowed"}, status=405, headers={"Allow": "GET"})
    endpoint = resources.oauth_endpoints().filter(slug=slug).first()
    if endpoint is None:
        return JsonResponse({"error": "not_found"}, status=404)
    return JsonResponse(
        {
            "resource": resources.endpoint_resource(endpoint.slug),
            "authorization_servers": [resources.issuer()],
            "scopes_supported": [name for name, _ in endpoint.scope_list()],
            "bearer_methods_supported": ["header"],
            "resource_name": endpoint.title or endpoint.slug,
        }
    )


def _host_of(uri: str) -> str:
    try:
        parts = urlsplit(uri)
        return parts.netloc.rpartition("@")[2] or uri
    except ValueError:
        return uri


class ConsentView(AuthorizationView):  # type: ignore[misc]  # oauth2_provider has no types
    """DOT's consent page, with what the user needs to judge the request."""

    template_name = "oauth2_provider/authorize.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context_data(**kwargs)
        application = context.get("application")
        redirect_uri = context.get("redirect_uri") or ""
        host = urlsplit(redirect_uri).hostname or ""
        named = str(context.get("resource") or "").split()
        if named:
            endpoints = [resources.endpoint_for_resource(resource) for resource in named]
        else:
            endpoints = [resources.sole_endpoint()]
        descriptions = EndpointScopes().get_all_scopes()
        context.update(
            client_name=(application.name if application else "") or "An unnamed client",
            client_verified=application is not None
            and application.registration_source == application.RegistrationSource.MANUAL,
            registration_source=application.get_registration_source_display()
            if application
            else "",
            redirect_host=_host_of(redirect_uri),
            loopback_redirect=host in LOOPBACK_HOSTS,
            endpoints=[
                {"title": e.title or e.slug, "url": resources.endpoint_resource(e.slug)}
                for e in endpoints
                if e is not None
            ]
            + [
                {"title": "Management API", "url": resources.management_resource()}
                for resource in named
                if resources.is_management_resource(resource)
            ],
            scope_items=[
                {"name": name, "description": descriptions.get(name, name)}
                for name in context.get("scopes", ())
            ],
        )
        return context


def registration_allowed(address: str, *, limit: int | None = None) -> bool:
    """Count one registration from ``address`` in the current hour; False past the limit.

    The counter lives in Django's cache (Redis with REDIS_URL or CACHE_REDIS_URL, so every web
    process shares it).
    """
    limit = int(settings.OAUTH_DCR_RATE_PER_HOUR) if limit is None else limit
    if limit <= 0:
        return True
    key = f"mcphost:dcr:{address}:{int(time.time() // 3600)}"
    cache.add(key, 0, 3600)
    try:
        count = cache.incr(key)
    except ValueError:  # the entry expired between add and incr: this is the first one
        cache.set(key, 1, 3600)
        count = 1
    return count <= limit


class RateLimitedRegistrationView(DynamicClientRegistrationView):  # type: ignore[misc]  # untyped
    """RFC 7591 registration, limited per client address (``OAUTH_DCR_RATE_PER_HOUR``).

    Every MCP client install registers anew, and each registration is a row: the limit stops
    one address from filling the table; ``purge_oauth_clients`` removes the unused ones.
    """

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not registration_allowed(client_address(request.META)):
            return JsonResponse(
                {
                    "error": "temporarily_unavailable",
                    "error_description": "Too many registrations from this address; retry later.",
                },
                status=429,
                headers={"Retry-After": "3600"},
            )
        response: HttpResponse = super().post(request, *args, **kwargs)
        return response
