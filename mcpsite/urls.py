"""Django URLs: admin, staff pages, sign-in, and the OAuth authorization server.

MCP endpoints are routed in asgi.py. The OAuth URLs are listed one by one (not DOT's
``urls.py``) so only what MCP clients use is published: no implicit, password or device
flows, no application-management pages. Metadata advertises exactly these URLs, trailing
slashes included, so no client POST is ever redirected.
"""

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from django.views import defaults
from oauth2_provider import views as oauth_views

from mcp_app import discovery, icons
from mcp_app.api.errors import api_error_response
from mcp_app.auth import views as auth

oauth_patterns = (
    [
        path("authorize/", auth.ConsentView.as_view(), name="authorize"),
        path("token/", auth.cors(oauth_views.TokenView.as_view()), name="token"),
        path(
            "revoke_token/", auth.cors(oauth_views.RevokeTokenView.as_view()), name="revoke-token"
        ),
        path(
            "register/",
            auth.cors(auth.RateLimitedRegistrationView.as_view()),
            name="dcr-register",
        ),
        path(
            "register/<str:client_id>/",
            auth.cors(oauth_views.DynamicClientRegistrationManagementView.as_view()),
            name="dcr-register-management",
        ),
    ],
    "oauth2_provider",
)

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("o/", include(oauth_patterns)),
    path("api/", include("mcp_app.api.urls")),
    path(
        ".well-known/oauth-authorization-server",
        auth.cors(oauth_views.OAuthServerMetadataView.as_view()),
        name="oauth-server-metadata",
    ),
    path(
        ".well-known/oauth-protected-resource/mcp/<slug:slug>",
        auth.protected_resource_metadata,
        name="oauth-resource-metadata",
    ),
    # Discovery (mcp_app/discovery.py): the site catalog and a server card per listed
    # endpoint, beside the endpoint's own URL (which asgi.py routes to MCP, not here).
    path(".well-known/ai-catalog.json", discovery.site_catalog_view, name="ai-catalog"),
    path("mcp/<slug:slug>/server-card", discovery.server_card_view, name="server-card"),
    # Uploaded icons (mcp_app/icons.py), named by their bytes' SHA-256.
    path("icons/<str:name>", icons.icon_view, name="icon"),
    path("", include("mcp_app.urls")),
]


def _api_answers_json(
    status_code: int, page: Callable[..., HttpResponse]
) -> Callable[..., HttpResponse]:
    """Django's error page, except under /api/: there the API's JSON error body (docs/api.md,
    "Errors"), so a client never has to parse HTML (an unknown route, an oversized body)."""

    def handler(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
        if request.path_info.startswith("/api/"):
            return api_error_response(request, status_code, exception)
        return page(request) if status_code == 500 else page(request, exception)

    return handler


handler400: Any = _api_answers_json(400, defaults.bad_request)
handler403: Any = _api_answers_json(403, defaults.permission_denied)
handler404: Any = _api_answers_json(404, defaults.page_not_found)
handler500: Any = _api_answers_json(500, defaults.server_error)
