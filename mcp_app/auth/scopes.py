"""DOT scopes backend: each endpoint publishes its own scopes (``Endpoint.scopes``).

A request's scopes are judged against the endpoints it names with ``resource`` (or the one it
is bound to when it names none), so a client cannot ask one endpoint for another's scopes. A
request without ``scope`` gets only the endpoint's base scope, never everything. A request for
the management API (``resources.management_resource()``) may have only its scope
(``settings.API_OAUTH_SCOPE``), which no endpoint's request can have.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.conf import settings
from oauth2_provider.scopes import BaseScopes

from mcp_app.auth import resources
from mcp_app.models import Endpoint


def requested_resources(request: Any) -> list[str]:
    """Every ``resource`` value of an oauthlib request (RFC 8707 allows repeating it).

    oauthlib keeps only the last value of a repeated query parameter, so the authorization
    request's URI is read again; DOT puts the full list on the request at consent and token
    time.
    """
    if request is None:
        return []
    value = getattr(request, "resource", None)
    if isinstance(value, list):
        return [str(item) for item in value]
    uri = getattr(request, "uri", None) or ""
    from_query = parse_qs(urlsplit(uri).query).get("resource")
    if from_query:
        return from_query
    return [value] if isinstance(value, str) and value.strip() else []


def target_endpoints(request: Any) -> list[Endpoint]:
    """The endpoints a request is for: those it names, or the only one there is.

    Unknown resources are left out here; the validator turns them into ``invalid_target``.
    """
    named = requested_resources(request)
    if named:
        found = (resources.endpoint_for_resource(resource) for resource in named)
        return [endpoint for endpoint in found if endpoint is not None]
    sole = resources.sole_endpoint()
    return [sole] if sole is not None else []


MANAGEMENT_SCOPE_DESCRIPTION = "Manage the catalog through the management API, as yourself"


def for_management(request: Any) -> bool:
    """Whether a request names the management API as its resource."""
    return any(resources.is_management_resource(r) for r in requested_resources(request))


def _management_scopes() -> dict[str, str]:
    return {settings.API_OAUTH_SCOPE: MANAGEMENT_SCOPE_DESCRIPTION}


def _scopes_of(endpoints: Iterable[Endpoint]) -> dict[str, str]:
    scopes: dict[str, str] = {}
    for endpoint in endpoints:
        for name, description in endpoint.scope_list():
            scopes.setdefault(name, description)
    return scopes


class EndpointScopes(BaseScopes):  # type: ignore[misc]  # oauth2_provider has no types
    def get_all_scopes(self) -> dict[str, str]:
        return {**_management_scopes(), **_scopes_of(resources.oauth_endpoints())}

    def get_available_scopes(
        self, application: Any = None, request: Any = None, *args: Any, **kwargs: Any
    ) -> list[str]:
        if request is None:
            return list(self.get_all_scopes())
        if for_management(request):
            return list(_management_scopes())
        scopes = _scopes_of(target_endpoints(request))
        # An endpoint publishing the management scope's name still never grants it.
        scopes.pop(settings.API_OAUTH_SCOPE, None)
        return list(scopes)

    def get_default_scopes(
        self, application: Any = None, request: Any = None, *args: Any, **kwargs: Any
    ) -> list[str]:
        if for_management(request):
            return [settings.API_OAUTH_SCOPE]
        return sorted(
            {endpoint.base_scope for endpoint in target_endpoints(request) if endpoint.base_scope}
        )
