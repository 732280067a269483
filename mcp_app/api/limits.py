"""``/api/v1/rate-limits/``: an endpoint's rate limits, concurrency caps and quotas.

Rows are checked by the model (``RateLimit.clean`` and its constraints) and saved and deleted
through the write path (``services.row_writes``), as credentials and upstreams are; history,
``If-Match`` and the permission rules are the other rows'. ``GET .../usage/`` shows how much
of its quota each caller used in the current period (read from Redis; 503 when Redis cannot be
read).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.response import Response

from mcp_app.api.serializers import SettingRowSerializer
from mcp_app.api.views import ApiViewMixin, HistoryMixin
from mcp_app.models import Endpoint, RateLimit
from mcp_app.services.limits import quota_usage


class RateLimitSerializer(SettingRowSerializer):
    endpoint = serializers.SlugRelatedField(
        slug_field="slug", queryset=Endpoint.objects.all(), help_text="The endpoint's slug."
    )

    class Meta:
        model = RateLimit
        fields = [
            "id", "endpoint", "description", "enabled", "scope", "target_kind", "target_name",
            "rate", "window", "burst", "max_concurrent", "quota", "quota_period",
            "on_redis_down", "created_at", "updated_at",
        ]  # fmt: skip
        read_only_fields = ["created_at", "updated_at"]


class LimiterUnavailableError(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The rate limiter's Redis could not be read; try again."
    default_code = "limiter_unavailable"


class RateLimitViewSet(ApiViewMixin, HistoryMixin, viewsets.ModelViewSet[RateLimit]):
    queryset = RateLimit.objects.select_related("endpoint")
    serializer_class = RateLimitSerializer
    filter_fields = {"endpoint": "endpoint__slug", "scope": "scope", "enabled": "enabled"}
    boolean_filters = ("enabled",)
    search_fields = ["target_name", "description"]
    ordering_fields = ["id", "created_at", "updated_at"]
    ordering = ["id"]
    action_permissions = {**HistoryMixin.action_permissions, "usage": ["view"]}

    @extend_schema(
        responses=inline_serializer(
            "RateLimitUsage",
            {
                "quota": serializers.IntegerField(allow_null=True),
                "quota_period": serializers.CharField(),
                "usage": serializers.ListField(child=serializers.DictField()),
            },
        )
    )
    @action(detail=True, methods=["get"])
    def usage(self, request: Request, pk: str | None = None) -> Response:
        """Calls counted against the quota this period, by caller (most first, at most 50)."""
        limit = self.get_object()
        usage = quota_usage(limit)
        if usage is None:
            raise LimiterUnavailableError()
        data: dict[str, Any] = {
            "quota": limit.quota,
            "quota_period": limit.quota_period,
            "usage": [{"caller": item.subject, "used": item.used} for item in usage],
        }
        return Response(data)
