"""API views: one viewset per model, plus actions (enable/disable, try-it, OpenAPI import,
catalog import/export, session close).

Updates and deletes honour ``If-Match`` against the row's ``ETag`` (a digest of its JSON), so
two automations editing one row do not overwrite each other: the second gets 412.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.db import transaction
from django.db.models import Model, QuerySet
from django.http import HttpResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from mcp_app.api import serializers as s
from mcp_app.api.errors import PreconditionFailed
from mcp_app.api.parsers import check_query
from mcp_app.audit.exports import FORMATS as CALL_LOG_FORMATS
from mcp_app.audit.exports import PAYLOAD_PERMISSION, call_log_export
from mcp_app.audit.forms import CallFilterForm
from mcp_app.audit.selectors import call_log_search
from mcp_app.models import (
    BackgroundCall,
    CallLog,
    Credential,
    Endpoint,
    Prompt,
    Resource,
    ResourceTemplate,
    Session,
    Tool,
    Upstream,
)
from mcp_app.services import history, openapi
from mcp_app.services.catalog_io import (
    CatalogFormatError,
    CatalogImportError,
    catalog_dump,
    catalog_export,
    catalog_import,
    catalog_parse,
)
from mcp_app.services.sessions import session_close
from mcp_app.services.try_it import tool_try
from mcp_app.services.upstreams import upstream_reset_breaker

EXPORT_RESPONSES = {
    (200, "application/yaml"): OpenApiTypes.OBJECT,
    (200, "application/json"): OpenApiTypes.OBJECT,
}


class ApiViewMixin:
    """Refuses NUL in the URL before any lookup: PostgreSQL cannot store or compare it.

    Every write through the API is recorded in the catalog history as coming from "api".
    """

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        with history.catalog_change_source(history.API):
            return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        check_query(request.query_params)  # every value of a repeated parameter too
        if any("\x00" in str(value) for value in kwargs.values()):
            raise ValidationError({"": ["The URL holds a NUL character."]})
        super().initial(request, *args, **kwargs)  # type: ignore[misc]


def etag_of(data: Any) -> str:
    digest = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()
    return f'"{digest[:32]}"'


class ConditionalMixin:
    """ETag on reads and writes; If-Match checked before an update or delete."""

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response: Response = super().retrieve(request, *args, **kwargs)  # type: ignore[misc]
        response["ETag"] = etag_of(response.data)
        return response

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        self._check_if_match(request)
        response: Response = super().update(request, *args, **kwargs)  # type: ignore[misc]
        # Read back: signals changed the row after the save (catalog_version, updated_at).
        response.data = self.get_serializer(self.get_object()).data  # type: ignore[attr-defined]
        response["ETag"] = etag_of(response.data)
        return response

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        self._check_if_match(request)
        return super().destroy(request, *args, **kwargs)  # type: ignore[misc]

    def _check_if_match(self, request: Request) -> None:
        wanted = request.headers.get("If-Match")
        if not wanted or wanted.strip() == "*":
            return
        current = etag_of(self.get_serializer(self.get_object()).data)  # type: ignore[attr-defined]
        if current not in [tag.strip().removeprefix("W/") for tag in wanted.split(",")]:
            raise PreconditionFailed()


class EnableMixin:
    """``POST .../enable`` and ``.../disable``: the row's ``enabled`` flag, saved as an edit."""

    action_permissions = {"enable": ["change"], "disable": ["change"]}

    @extend_schema(request=None)
    @action(detail=True, methods=["post"])
    def enable(self, request: Request, pk: str | None = None) -> Response:
        return self._set_enabled(True)

    @extend_schema(request=None)
    @action(detail=True, methods=["post"])
    def disable(self, request: Request, pk: str | None = None) -> Response:
        return self._set_enabled(False)

    def _set_enabled(self, enabled: bool) -> Response:
        row = self.get_object()  # type: ignore[attr-defined]
        if row.enabled != enabled:
            row.enabled = enabled
            row.save(update_fields=["enabled", "updated_at"])
            row = self.get_object()  # type: ignore[attr-defined]
        data = self.get_serializer(row).data  # type: ignore[attr-defined]
        return Response(data, headers={"ETag": etag_of(data)})


class CatalogItemViewSet(ApiViewMixin, ConditionalMixin, EnableMixin, viewsets.ModelViewSet):
    search_fields: list[str] = []
    ordering_fields: list[str] = []
    boolean_filters = ("enabled",)

    def perform_destroy(self, instance: Model) -> None:
        with transaction.atomic():
            instance.delete()


class EndpointViewSet(CatalogItemViewSet):
    queryset = Endpoint.objects.prefetch_related(
        "tools", "resources", "resource_templates", "prompts"
    )
    serializer_class = s.EndpointSerializer
    filter_fields = {"enabled": "enabled", "auth_mode": "auth_mode"}
    search_fields = ["slug", "title", "description"]
    ordering_fields = ["slug", "created_at", "updated_at"]
    ordering = ["slug"]
    action_permissions = {**EnableMixin.action_permissions, "export": ["view"]}

    @extend_schema(
        parameters=[OpenApiParameter("format", enum=["yaml", "json"], required=False)],
        responses=EXPORT_RESPONSES,
    )
    @action(detail=True, methods=["get"], url_path="export")
    def export(self, request: Request, pk: str | None = None) -> HttpResponse:
        """Export this endpoint and what it publishes (as ``mcp_export --endpoint``)."""
        return _export_response(request, [self.get_object().slug])


class ToolViewSet(CatalogItemViewSet):
    queryset = Tool.objects.prefetch_related("endpoints", "allowed_groups")
    serializer_class = s.ToolSerializer
    filter_fields = {
        "enabled": "enabled",
        "kind": "kind",
        "execution_mode": "execution_mode",
        "endpoint": "endpoints__slug",
        "name": "name",
    }
    search_fields = ["name", "title", "description"]
    ordering_fields = ["name", "id", "created_at", "updated_at"]
    ordering = ["name", "id"]
    action_permissions = {
        **EnableMixin.action_permissions,
        # As the admin's try-it page, which sits on the tool's change page.
        "try_it": ["change"],
        "openapi_import": ["add"],
    }

    @extend_schema(
        request=s.TryItSerializer,
        responses=inline_serializer(
            "TryItResult",
            {
                "version": serializers.CharField(),
                "duration_ms": serializers.FloatField(),
                "is_error": serializers.BooleanField(),
                "result": serializers.JSONField(allow_null=True),
                "error_code": serializers.IntegerField(allow_null=True),
                "error_message": serializers.CharField(),
            },
        ),
    )
    @action(detail=True, methods=["post"], url_path="try")
    def try_it(self, request: Request, pk: str | None = None) -> Response:
        """Run the tool as a client's ``tools/call`` would; recorded as an admin test call."""
        tool = self.get_object()
        payload = s.TryItSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        outcome = tool_try(
            tool=tool, arguments=payload.validated_data["arguments"], user_id=request.user.pk
        )
        return Response(
            {
                "version": outcome.version,
                "duration_ms": outcome.duration_ms,
                "is_error": outcome.is_error,
                "result": outcome.result,
                "error_code": outcome.error_code,
                "error_message": outcome.error_message,
            }
        )

    @extend_schema(
        request=s.OpenApiImportSerializer,
        responses=inline_serializer(
            "OpenApiImportResult",
            {
                "created": serializers.BooleanField(),
                "tools": serializers.ListField(child=serializers.JSONField()),
            },
        ),
    )
    @action(detail=False, methods=["post"], url_path="openapi-import")
    def openapi_import(self, request: Request) -> Response:
        """Preview (default) or create disabled HTTP tools from an OpenAPI 3.x document."""
        payload = s.OpenApiImportSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        endpoints = data.get("endpoints") or []
        credential = data["credential"].name if data.get("credential") else None
        try:
            document = openapi.openapi_read(data["document"])
            keys = data.get("operations") or [op.key for op in document.operations]
            if data["preview"]:
                drafts = openapi.openapi_tool_drafts(
                    document,
                    keys=keys,
                    base_url=openapi.openapi_base_url(document, data["base_url"]),
                    taken_names=openapi.tool_names_on_endpoints(endpoints=endpoints),
                    credential=credential,
                )
                tools = [
                    {"name": d.name, "title": d.title, "description": d.description,
                     "input_schema": d.input_schema, "config": d.config}
                    for d in drafts
                ]  # fmt: skip
                return Response({"created": False, "tools": tools})
            created = openapi.openapi_tools_create(
                document=document,
                keys=keys,
                endpoints=endpoints,
                base_url=data["base_url"],
                credential=credential,
            )
        except openapi.OpenApiError as exc:
            raise ValidationError({"document": [str(exc)]}) from None
        tools = s.ToolSerializer(created, many=True, context=self.get_serializer_context()).data
        return Response({"created": True, "tools": tools}, status=status.HTTP_201_CREATED)


class ResourceViewSet(CatalogItemViewSet):
    queryset = Resource.objects.prefetch_related("endpoints", "allowed_groups")
    serializer_class = s.ResourceSerializer
    filter_fields = {"enabled": "enabled", "endpoint": "endpoints__slug", "uri": "uri"}
    search_fields = ["uri", "name", "title", "description"]
    ordering_fields = ["uri", "name", "created_at", "updated_at"]
    ordering = ["uri"]


class ResourceTemplateViewSet(CatalogItemViewSet):
    queryset = ResourceTemplate.objects.prefetch_related("endpoints", "allowed_groups")
    serializer_class = s.ResourceTemplateSerializer
    filter_fields = {"enabled": "enabled", "kind": "kind", "endpoint": "endpoints__slug"}
    search_fields = ["uri_template", "name", "title", "description"]
    ordering_fields = ["uri_template", "name", "created_at", "updated_at"]
    ordering = ["uri_template"]


class PromptViewSet(CatalogItemViewSet):
    queryset = Prompt.objects.prefetch_related(
        "endpoints", "allowed_groups", "arguments", "messages"
    )
    serializer_class = s.PromptSerializer
    filter_fields = {"enabled": "enabled", "endpoint": "endpoints__slug", "name": "name"}
    search_fields = ["name", "title", "description"]
    ordering_fields = ["name", "created_at", "updated_at"]
    ordering = ["name"]


class CredentialViewSet(ApiViewMixin, ConditionalMixin, viewsets.ModelViewSet):
    queryset = Credential.objects.all()
    serializer_class = s.CredentialSerializer
    filter_fields = {"kind": "kind", "name": "name"}
    search_fields = ["name", "description"]
    ordering_fields = ["name", "created_at", "updated_at"]
    ordering = ["name"]


class UpstreamViewSet(ApiViewMixin, ConditionalMixin, viewsets.ModelViewSet):
    """Upstream MCP servers: their settings (health and breaker state read-only)."""

    queryset = Upstream.objects.select_related("credential")
    serializer_class = s.UpstreamSerializer
    filter_fields = {"name": "name", "enabled": "enabled"}
    boolean_filters = ("enabled",)
    search_fields = ["name", "description", "url"]
    ordering_fields = ["name", "created_at", "updated_at"]
    ordering = ["name"]

    @extend_schema(request=None)
    @action(detail=True, methods=["post"], url_path="reset-breaker")
    def reset_breaker(self, request: Request, pk: str | None = None) -> Response:
        """Close the circuit breaker now: the next call tries the upstream again."""
        upstream = self.get_object()
        upstream_reset_breaker(upstream)
        upstream.refresh_from_db()
        return Response(self.get_serializer(upstream).data)


class CallLogViewSet(ApiViewMixin, viewsets.ReadOnlyModelViewSet):
    """The call log, with the filters of /audit/ (endpoint, tool, method, status, era,
    session, since, until, q); payloads need "Can see recorded arguments and results"."""

    queryset = CallLog.objects.select_related("principal")
    serializer_class = s.CallLogSerializer
    ordering_fields = ["id", "created_at"]
    ordering = ["-id"]
    extra_permissions = ["mcp_app.audit_calls"]

    def filter_queryset(self, queryset: QuerySet[CallLog]) -> QuerySet[CallLog]:
        form = CallFilterForm(self.request.query_params)
        if not form.is_valid():
            raise ValidationError(form.errors.get_json_data())
        searched = call_log_search(filters=form.call_filter()).select_related("principal")
        return super().filter_queryset(searched)

    @extend_schema(
        parameters=[
            OpenApiParameter("format", enum=list(CALL_LOG_FORMATS), required=False),
            *(
                OpenApiParameter(name, required=False, description="As in /audit/.")
                for name in CallFilterForm.base_fields
            ),
        ],
        responses={
            (200, "text/csv"): OpenApiTypes.STR,
            (200, "application/x-ndjson"): OpenApiTypes.STR,
        },
    )
    @action(detail=False, methods=["get"])
    def export(self, request: Request) -> StreamingHttpResponse:
        """The filtered call log as CSV (default) or JSON Lines, exactly as /audit/ exports it."""
        fmt = request.query_params.get("format", "csv")
        if fmt not in CALL_LOG_FORMATS:
            raise ValidationError({"format": ["Expected csv or jsonl."]})
        form = CallFilterForm(request.query_params)
        if not form.is_valid():
            raise ValidationError(form.errors.get_json_data())
        return call_log_export(
            request._request,
            fmt=fmt,
            filters=form.call_filter(),
            payloads=request.user.has_perm(PAYLOAD_PERMISSION),
        )


class BackgroundCallViewSet(ApiViewMixin, viewsets.ReadOnlyModelViewSet):
    """Background tool calls and MCP tasks (``?is_task=true``)."""

    queryset = BackgroundCall.objects.select_related("endpoint")
    serializer_class = s.BackgroundCallSerializer
    filter_fields = {
        "status": "status",
        "is_task": "is_task",
        "endpoint": "endpoint__slug",
        "tool_name": "tool_name",
    }
    boolean_filters = ("is_task",)
    ordering_fields = ["created_at", "updated_at", "id"]
    ordering = ["-created_at", "id"]


class SessionViewSet(
    ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    queryset = Session.objects.select_related("endpoint", "user")
    serializer_class = s.SessionSerializer
    filter_fields = {"endpoint": "endpoint__slug", "closed": "closed_at__isnull"}
    ordering_fields = ["created_at", "last_seen_at", "id"]
    ordering = ["-last_seen_at", "id"]
    action_permissions = {"close": ["change"]}

    @extend_schema(request=None)
    @action(detail=True, methods=["post"])
    def close(self, request: Request, pk: str | None = None) -> Response:
        """End the session as a client's DELETE would; its streams end."""
        session = self.get_object()
        if not session_close(
            session_id=session.id,
            endpoint_id=session.endpoint_id,
            user_id=session.user_id,
            oauth_client_id=session.oauth_client_id,
        ):
            raise NotFound("The session is not live.")
        session.refresh_from_db()
        return Response(self.get_serializer(session).data)


class CatalogViewSet(ApiViewMixin, viewsets.ViewSet):
    """Whole-catalog export and import (the ``mcp_export`` / ``mcp_import`` commands)."""

    # Import changes endpoints and their items: it needs every catalog permission.
    queryset = Endpoint.objects.none()
    action_permissions = {"export": ["view"], "import_": ["add", "change", "delete"]}
    # Import writes every kind of catalog row: it needs the permissions of each.
    import_permissions = [
        f"mcp_app.{action}_{model}"
        for model in ("endpoint", "tool", "resource", "resourcetemplate", "prompt")
        for action in ("add", "change", "delete")
    ]

    def get_serializer(self, *args: Any, **kwargs: Any) -> BaseSerializer:
        return s.CatalogImportSerializer(*args, **kwargs)

    @extend_schema(
        parameters=[
            OpenApiParameter("format", enum=["yaml", "json"], required=False),
            OpenApiParameter("endpoint", many=True, required=False),
        ],
        responses=EXPORT_RESPONSES,
    )
    @action(detail=False, methods=["get"])
    def export(self, request: Request) -> HttpResponse:
        """The catalog (or ``?endpoint=slug`` ones) as an import file."""
        return _export_response(request, request.query_params.getlist("endpoint") or None)

    @extend_schema(
        request=s.CatalogImportSerializer,
        responses=inline_serializer(
            "CatalogImportResult",
            {
                "dry_run": serializers.BooleanField(),
                "changes": serializers.ListField(child=serializers.JSONField()),
            },
        ),
    )
    @action(detail=False, methods=["post"], url_path="import")
    def import_(self, request: Request) -> Response:
        """Import a catalog document (JSON body) or an exported file (multipart ``file``);
        ``dry_run`` reports the diff only."""
        if not request.user.has_perms(self.import_permissions):
            raise PermissionDenied("Importing needs add, change and delete on every catalog model.")
        payload = s.CatalogImportSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        field = "file" if "file" in data else "document"
        try:
            if "file" in data:
                document = catalog_parse(data["file"].read())
            else:
                document = catalog_parse(json.dumps(data["document"]), fmt="json")
            report = catalog_import(document=document, prune=data["prune"], dry_run=data["dry_run"])
        except CatalogFormatError as exc:
            raise ValidationError({field: [str(exc)]}) from None
        except CatalogImportError as exc:
            raise ValidationError(
                {f"{field}.{error.path}": [error.message] for error in exc.errors}
            ) from None
        return Response(report.as_dict())


def _export_response(request: Request, slugs: list[str] | None) -> HttpResponse:
    fmt = request.query_params.get("format", "yaml")
    if fmt not in ("yaml", "json"):
        raise ValidationError({"format": ["Expected yaml or json."]})
    try:
        document = catalog_export(endpoint_slugs=slugs)
    except CatalogFormatError as exc:
        raise ValidationError({"endpoint": [str(exc)]}) from None
    content_type = "application/json" if fmt == "json" else "application/yaml"
    return HttpResponse(
        catalog_dump(document, fmt=fmt), content_type=f"{content_type}; charset=utf-8"
    )
