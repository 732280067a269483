"""URLs of the management API: ``/api/v1/...``, the schema and its docs (mcpsite/urls.py)."""

from __future__ import annotations

from typing import Any

from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerView
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.routers import APIRootView, DefaultRouter

from mcp_app.api import drafts, limits, replay, views
from mcp_app.api.parsers import check_query
from mcp_app.api.schema import SchemaView


class ApiRootView(APIRootView):
    """``/api/v1/``: the list of collections, refusing a NUL in the query as every route."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        check_query(request.query_params)
        super().initial(request, *args, **kwargs)


router = DefaultRouter()
router.APIRootView = ApiRootView
router.register("endpoints", views.EndpointViewSet)
router.register("tools", views.ToolViewSet)
router.register("resources", views.ResourceViewSet)
router.register("resource-templates", views.ResourceTemplateViewSet)
router.register("prompts", views.PromptViewSet)
router.register("credentials", views.CredentialViewSet)
router.register("upstreams", views.UpstreamViewSet)
router.register("policies", views.PolicyViewSet)
router.register("call-log", views.CallLogViewSet)
router.register("background-calls", views.BackgroundCallViewSet)
router.register("sessions", views.SessionViewSet)
router.register("rate-limits", limits.RateLimitViewSet)
router.register("catalog", views.CatalogViewSet, basename="catalog")
router.register("icons", views.IconViewSet, basename="icon")
router.register("drafts", drafts.DraftViewSet)

urlpatterns = [
    path("v1/", include(router.urls)),
    # The schema describes the API, not its data: readable without signing in.
    path(
        "schema/",
        SchemaView.as_view(permission_classes=[AllowAny], authentication_classes=[]),
        name="api-schema",
    ),
    path(
        "docs/",
        SpectacularSwaggerView.as_view(
            url_name="api-schema",
            template_name="api/swagger_ui.html",
            permission_classes=[AllowAny],
            # Open to all; the signed-in user's session only shapes the header's links.
            authentication_classes=[SessionAuthentication],
        ),
        name="api-docs",
    ),
]

# Replays of recorded calls against a draft (api/replay.py).
urlpatterns += [
    path("v1/drafts/<int:pk>/replay/", replay.DraftReplayView.as_view(), name="draft-replay"),
    path("v1/replays/<int:pk>/", replay.ReplayRunView.as_view(), name="replay-detail"),
]
