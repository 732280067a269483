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
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, include, path, resolve
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
    """Django's error page (templates/403.html, 404.html, 500.html), except under /api/: there
    the API's JSON error body (docs/api.md, "Errors"), so a client never has to parse HTML (an
    unknown route, an oversized body)."""

    def handler(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
        if request.path_info.startswith("/api/"):
            return api_error_response(request, status_code, exception)
        return page(request) if status_code == 500 else page(request, exception)

    return handler


# What each admin view of a model checks (django.contrib.admin.options.ModelAdmin), by the
# suffix of its URL name: the actions any one of which lets the user in.
_ADMIN_VIEW_ACTIONS = {
    "changelist": ("view", "change"),
    "change": ("view", "change"),
    "history": ("view", "change"),
    "add": ("add",),
    "delete": ("delete",),
}


def admin_permission_hint(request: HttpRequest) -> str:
    """Name the permission a model's admin page checks (``“Can view tool” (mcp_app.view_tool)``),
    or "" when the request is not for one of those pages."""
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return ""
    if match.namespace != "admin" or not match.url_name:
        return ""
    for suffix, actions in _ADMIN_VIEW_ACTIONS.items():
        prefix = match.url_name.removesuffix(f"_{suffix}")
        if prefix == match.url_name:
            continue
        models = {f"{m._meta.app_label}_{m._meta.model_name}": m for m in admin.site._registry}
        if prefix not in models:
            return ""
        opts = models[prefix]._meta
        names = [
            f"“Can {action} {opts.verbose_name}” ({opts.app_label}.{action}_{opts.model_name})"
            for action in actions
        ]
        return f"This page needs the permission {' or '.join(names)}."
    return ""


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """The 403 page, naming the missing permission: the PermissionDenied's own message where
    the code gave one, else what the admin page checks."""
    if not str(exception or "") and (hint := admin_permission_hint(request)):
        exception = PermissionDenied(hint)
    return defaults.permission_denied(request, exception or PermissionDenied())


handler400: Any = _api_answers_json(400, defaults.bad_request)
handler403: Any = _api_answers_json(403, permission_denied)
handler404: Any = _api_answers_json(404, defaults.page_not_found)
handler500: Any = _api_answers_json(500, defaults.server_error)
