"""API views: one viewset per model, plus actions (enable/disable, try-it, OpenAPI import,
catalog import/export, session close).

Every write of one row (update, delete, enable/disable, reset-breaker) honours ``If-Match``
against the row's ``ETag`` (a digest of its JSON) under a row lock, so of two automations
editing one row with the same ETag exactly one succeeds; the other gets 412. A delete is
refused with 409 while ``services.references`` finds rows that use the row.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpResponse, StreamingHttpResponse
from django.utils.http import parse_etags
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ParseError, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from mcp_app.api import parsers
from mcp_app.api import serializers as s
from mcp_app.api.errors import InUse, PreconditionFailed
from mcp_app.api.parsers import check_query
from mcp_app.audit.exports import FORMATS as CALL_LOG_FORMATS
from mcp_app.audit.exports import PAYLOAD_PERMISSION, call_log_export
from mcp_app.audit.forms import CallFilterForm
from mcp_app.audit.selectors import call_log_search
from mcp_app.conf import get_conf
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
    CatalogPermissionError,
    catalog_check_bounds,
    catalog_document,
    catalog_dump,
    catalog_export,
    catalog_import,
    catalog_parse,
    catalog_permissions,
    catalog_permissions_missing,
)
from mcp_app.services.catalog_writes import catalog_row_enable
from mcp_app.services.references import RowInUseError, ensure_unused
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


def if_match_passes(header: str | None, etag: str) -> bool:
    """Whether an ``If-Match`` header lets a write of the row whose ETag is ``etag`` go on.

    RFC 9110 section 13.1.1: strong comparison, so a weak tag (``W/"..."``) never matches;
    ``*`` matches any current row; no header, no condition.
    """
    if header is None:
        return True
    tags = parse_etags(header)
    return tags == ["*"] or etag in tags


def if_none_match_passes(header: str | None, etag: str) -> bool:
    """Whether an ``If-None-Match`` header's condition holds (false means 304 or 412).

    RFC 9110 section 13.1.2: weak comparison; ``*`` matches any current row.
    """
    if header is None:
        return True
    tags = parse_etags(header)
    return not (tags == ["*"] or etag in [tag.removeprefix("W/") for tag in tags])


class ConditionalMixin:
    """ETags on reads and writes; ``If-Match`` and ``If-None-Match`` on one row.

    A write (update, delete, and the row actions through ``conditional_write``) locks the row
    (``SELECT ... FOR UPDATE``) in the request's transaction before comparing its current
    ETag with ``If-Match``, so of concurrent writers holding one ETag exactly one succeeds and
    the others get 412. The ETag a write answers is read back in the same transaction, after
    the signals' updates: it is what a following GET answers.
    """

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response: Response = super().retrieve(request, *args, **kwargs)  # type: ignore[misc]
        etag = etag_of(response.data)
        if not if_none_match_passes(request.headers.get("If-None-Match"), etag):
            return Response(status=status.HTTP_304_NOT_MODIFIED, headers={"ETag": etag})
        response["ETag"] = etag
        return response

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        with transaction.atomic():
            response: Response = super().create(request, *args, **kwargs)  # type: ignore[misc]
            # Read back as a GET would (signals may have changed it): the ETag matches it.
            row = self.get_queryset().get(pk=response.data["id"])  # type: ignore[attr-defined]
            response.data = self.get_serializer(row).data  # type: ignore[attr-defined]
        response["ETag"] = etag_of(response.data)
        return response

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        with transaction.atomic():
            self.locked_object(request)
            response: Response = super().update(request, *args, **kwargs)  # type: ignore[misc]
            # Read back: signals changed the row after the save (catalog_version, updated_at).
            response.data = self.get_serializer(self.get_object()).data  # type: ignore[attr-defined]
        response["ETag"] = etag_of(response.data)
        return response

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        with transaction.atomic():
            row = self.locked_object(request)
            try:
                ensure_unused(row)
            except RowInUseError as exc:
                raise InUse(exc) from None
            self.perform_destroy(row)  # type: ignore[attr-defined]
        return Response(status=status.HTTP_204_NO_CONTENT)

    def locked_object(self, request: Request) -> Any:
        """Return the row, locked until the transaction ends, once its preconditions hold.

        Call inside ``transaction.atomic()``. The row is read again after the lock is taken,
        so a concurrent writer's committed change is what the ETag is compared with.

        Raises:
            PreconditionFailed: ``If-Match`` or ``If-None-Match`` does not hold (412).
        """
        row = self.get_object()  # type: ignore[attr-defined]  # 404 and permissions first
        model = type(row)
        list(model._default_manager.select_for_update().filter(pk=row.pk).values_list("pk"))
        row = self.get_object()  # type: ignore[attr-defined]
        etag = etag_of(self.get_serializer(row).data)  # type: ignore[attr-defined]
        if not if_match_passes(request.headers.get("If-Match"), etag):
            raise PreconditionFailed()
        if not if_none_match_passes(request.headers.get("If-None-Match"), etag):
            raise PreconditionFailed(
                "The resource matches If-None-Match; the request was not applied."
            )
        return row

    def conditional_write(self, request: Request, write: Callable[[Any], None]) -> Response:
        """Apply ``write`` to the locked row if its preconditions hold; answer it with its ETag."""
        with transaction.atomic():
            row = self.locked_object(request)
            write(row)
            data = self.get_serializer(self.get_object()).data  # type: ignore[attr-defined]
        return Response(data, headers={"ETag": etag_of(data)})


class EnableMixin(ConditionalMixin):
    """``POST .../enable`` and ``.../disable``: the row's ``enabled`` flag, saved as an edit,
    under ``If-Match`` like any write."""

    action_permissions = {"enable": ["change"], "disable": ["change"]}

    @extend_schema(request=None)
    @action(detail=True, methods=["post"])
    def enable(self, request: Request, pk: str | None = None) -> Response:
        return self.conditional_write(request, lambda row: _set_enabled(request, row, True))

    @extend_schema(request=None)
    @action(detail=True, methods=["post"])
    def disable(self, request: Request, pk: str | None = None) -> Response:
        return self.conditional_write(request, lambda row: _set_enabled(request, row, False))


def _set_enabled(request: Request, row: Any, enabled: bool) -> None:
    catalog_row_enable(row, enabled=enabled, actor=request.user, source=history.API)


class CatalogItemViewSet(ApiViewMixin, EnableMixin, viewsets.ModelViewSet):
    search_fields: list[str] = []
    ordering_fields: list[str] = []
    boolean_filters = ("enabled",)


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
                actor=request.user,
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
        return self.conditional_write(request, upstream_reset_breaker)


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


class CatalogJsonParser(parsers.JsonParser):
    """An import's JSON body: checked as every API body is (NUL, unpaired surrogates, nesting:
    ``api/parsers.py``), but up to ``MCP_CATALOG_MAX_BYTES``, as ``catalog_parse`` reads a
    file, and within the catalog's count of values."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        limit = get_conf().MCP_CATALOG_MAX_BYTES
        body = stream.read(limit + 1) if stream is not None else b""
        if len(body) > limit:
            raise parsers.PayloadTooLarge(
                f"The body is larger than {limit} bytes; MCP_CATALOG_MAX_BYTES sets the limit."
            )
        data = parsers.loads(body)
        try:
            catalog_check_bounds(data)
        except CatalogFormatError as exc:
            raise ParseError(str(exc)) from None
        return data


class CatalogViewSet(ApiViewMixin, viewsets.ViewSet):
    """Whole-catalog export and import (the ``mcp_export`` / ``mcp_import`` commands)."""

    queryset = Endpoint.objects.none()
    # What export and import need is the catalog's rule (services.catalog_io's
    # catalog_permissions), checked in the actions: only signing in is checked here.
    action_permissions: dict[str, list[str]] = {"export": [], "import_": []}
    parser_classes = [CatalogJsonParser, parsers.FormParser, parsers.MultiPartParser]

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
        """The catalog (or ``?endpoint=slug`` ones) as an import file; needs view on every
        model a document holds."""
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
        ``dry_run`` reports the diff only. Both need the permissions of every model the
        document lists or the import would change (403 naming those missing)."""
        payload = s.CatalogImportSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        field = "file" if "file" in data else "document"
        try:
            if "file" in data:
                # One byte past the limit is enough for catalog_parse to refuse it.
                document = catalog_parse(data["file"].read(get_conf().MCP_CATALOG_MAX_BYTES + 1))
            else:
                document = catalog_document(data["document"])
            report = catalog_import(
                document=document,
                prune=data["prune"],
                dry_run=data["dry_run"],
                user=request.user,
            )
        except CatalogPermissionError as exc:
            raise PermissionDenied(
                _missing_message("Importing this document", exc.missing)
            ) from None
        except CatalogFormatError as exc:
            raise ValidationError({field: [str(exc)]}) from None
        except CatalogImportError as exc:
            raise ValidationError(
                {f"{field}.{error.path}": [error.message] for error in exc.errors}
            ) from None
        return Response(report.as_dict())


def _export_response(request: Request, slugs: list[str] | None) -> HttpResponse:
    missing = catalog_permissions_missing(request.user, catalog_permissions())
    if missing:
        raise PermissionDenied(_missing_message("Exporting the catalog", missing))
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


def _missing_message(what: str, missing: list[str]) -> str:
    return f"{what} needs permissions you do not have: {', '.join(missing)}."
