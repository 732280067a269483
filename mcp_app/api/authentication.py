"""Who calls the API: a personal API token, an OAuth access token for the API, or a session.

Both token kinds arrive as ``Authorization: Bearer <token>``; API tokens start with
``mcpk_``. An OAuth token must come from our authorization server, carry
``settings.API_OAUTH_SCOPE`` and be issued for the API's resource (``PUBLIC_BASE_URL/api``)
only: a token bound to an MCP endpoint is refused, so a token handed to an MCP client never
manages the catalog.

A bearer token from an address that failed to authenticate too often is refused (429) before
it is looked up, and every refused token counts against its address (``api/throttling.py``).
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, PermissionDenied
from rest_framework.request import Request

from mcp_app.api.throttling import auth_failure_record, auth_failures_check
from mcp_app.auth import resources
from mcp_app.auth.bearer import checksum, load_token
from mcp_app.services.api_tokens import TOKEN_PREFIX, api_token_authenticate

REALM = 'Bearer realm="api"'


def api_resource() -> str:
    """The resource identifier (RFC 8707) a management OAuth token must be issued for."""
    return resources.management_resource()


def _bearer(request: Request) -> str | None:
    """The request's bearer token, once its address may still present one.

    Raises:
        Throttled: the address failed to authenticate too often (nothing is looked up).
        AuthenticationFailed: the header is malformed (counted as a failure).
    """
    parts: list[bytes] = get_authorization_header(request).split()
    if not parts or parts[0].lower() != b"bearer":
        return None
    auth_failures_check(request)
    if len(parts) != 2:
        raise _failed(request, "Authorization: Bearer takes exactly one token.")
    try:
        return parts[1].decode("ascii")
    except UnicodeDecodeError:
        raise _failed(request, "The token is not ASCII.") from None


def _failed(request: Request, detail: str) -> AuthenticationFailed:
    """Count a refused token against its address; return the error to raise."""
    auth_failure_record(request)
    return AuthenticationFailed(detail)


class ApiTokenAuthentication(BaseAuthentication):
    """A personal API token (admin: API tokens), stored hashed; expiry and last use kept."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        key = _bearer(request)
        if key is None or not key.startswith(TOKEN_PREFIX):
            return None
        token = api_token_authenticate(key=key)
        if token is None:
            raise _failed(request, "Unknown or expired API token.")
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return REALM


class OAuthManagementAuthentication(BaseAuthentication):
    """An access token of our authorization server, for the API's resource and scope."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        key = _bearer(request)
        if key is None or key.startswith(TOKEN_PREFIX):
            return None
        info = load_token(checksum(key))
        if info is None or info.expires_at <= time.time():
            raise _failed(request, "Unknown or expired access token.")
        if info.audiences != {api_resource()}:
            raise _failed(
                request,
                f"This token is not for the management API: ask for resource={api_resource()}.",
            )
        if settings.API_OAUTH_SCOPE not in info.principal.scopes:
            raise PermissionDenied(f"The token lacks the scope {settings.API_OAUTH_SCOPE}.")
        user = get_user_model().objects.filter(pk=info.user_id, is_active=True).first()
        if user is None:
            raise _failed(request, "Unknown or expired access token.")
        return user, info

    def authenticate_header(self, request: Request) -> str:
        return REALM


# drf-spectacular leaves its extensions' __init_subclass__ unannotated.
class ApiTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = ApiTokenAuthentication
    name = "apiToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal API token (mcpk_...), created by an admin.",
        }


class OAuthManagementScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = OAuthManagementAuthentication
    name = "oauthManagement"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An OAuth access token of this server for the API's resource, "
            "with the management scope.",
        }
