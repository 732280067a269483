"""DOT's OAuth2Validator with our resource policy (RFC 8707).

DOT accepts any absolute URI as a resource and issues unrestricted tokens when none is given.
Here a resource must name one of our OAuth endpoints or the management API (else
``invalid_target``, redirected to the client with its ``state``), never both in one request,
and an authorization without one is bound to the only endpoint there is, or refused when that
is ambiguous. Grants therefore always carry a resource, and
DOT's token-time rules (a token request may only narrow, a refresh inherits) keep it on every
token issued from them.
"""

from __future__ import annotations

from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.oauth2.rfc6749.errors import CustomOAuth2Error

from mcp_app.auth import resources
from mcp_app.auth.scopes import requested_resources


def _invalid_target(request: Any, description: str) -> CustomOAuth2Error:
    return CustomOAuth2Error(
        error="invalid_target",
        description=description,
        request=request,
        state=getattr(request, "state", None),
    )


def bound_resources(request: Any) -> list[str]:
    """The resources an authorization request is for, as the client wrote them.

    Raises:
        CustomOAuth2Error: ``invalid_target``, for a resource that is not one of our OAuth
            endpoints or the management API, for both kinds at once, or for no resource when
            there is more than one endpoint.
    """
    named = requested_resources(request)
    management = [resource for resource in named if resources.is_management_resource(resource)]
    if management:
        # One token, one audience kind: a token handed to an MCP client must never be able
        # to manage the catalog, nor an automation's management token call tools.
        if len(management) != len(named):
            raise _invalid_target(
                request, "Ask for the management API and MCP endpoints in separate requests."
            )
        return named
    for resource in named:
        if resources.endpoint_for_resource(resource) is None:
            raise _invalid_target(
                request, f"{resource} is not an MCP endpoint of this server that uses OAuth."
            )
    if named:
        # Kept verbatim: DOT's token-time narrowing compares the strings exactly.
        return named
    sole = resources.sole_endpoint()
    if sole is None:
        raise _invalid_target(
            request, "Name the MCP endpoint with the resource parameter (RFC 8707)."
        )
    return [resources.endpoint_resource(sole.slug)]


class McpOAuth2Validator(OAuth2Validator):  # type: ignore[misc]  # oauth2_provider has no types
    def validate_scopes(
        self, client_id: str, scopes: list[str], client: Any, request: Any, *args: Any,
        **kwargs: Any,
    ) -> bool:  # fmt: skip
        # On the authorization request (it has a response_type; token requests do not), before
        # consent and again when it is approved: a bad resource is refused before the user is
        # asked anything.
        if getattr(request, "response_type", None):
            bound_resources(request)
        valid: bool = super().validate_scopes(client_id, scopes, client, request, *args, **kwargs)
        return valid

    def save_authorization_code(
        self, client_id: str, code: dict[str, Any], request: Any, *args: Any, **kwargs: Any
    ) -> None:
        request.resource = bound_resources(request)
        super().save_authorization_code(client_id, code, request, *args, **kwargs)
