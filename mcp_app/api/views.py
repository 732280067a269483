"""API views: one viewset per model, plus actions (enable/disable, try-it, OpenAPI import,
catalog import/export, session close, a row's history/diff/revert, an upstream's sync).

Every write of one row (update, delete, enable/disable, revert, reset-breaker, sync apply)
honours ``If-Match`` against the row's ``ETag`` (a digest of its JSON) under a row lock, so
of two automations editing one row with the same ETag exactly one succeeds; the other gets
412. A delete is refused with 409 while ``services.references`` finds rows that use the row.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync
from django.core.exceptions import ObjectDoesNotExist
from django.core.handlers.asgi import ASGIRequest
from django.db import transaction
from django.db.models import Prefetch, QuerySet
from django.http import StreamingHttpResponse
from django.utils.http import parse_etags
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import (
    APIException,
    NotFound,
    ParseError,
    PermissionDenied,
    ValidationError,
)
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer
from rest_framework.views import APIView

from mcp_app.api import parsers
from mcp_app.api import serializers as s
from mcp_app.api.errors import InUse, PreconditionFailed
from mcp_app.api.parsers import check_query
from mcp_app.api.permissions import denied_message, missing_permissions
from mcp_app.audit.exports import FORMATS as CALL_LOG_FORMATS
from mcp_app.audit.exports import PAYLOAD_PERMISSION, call_log_export
from mcp_app.audit.forms import CallFilterForm
from mcp_app.audit.selectors import call_log_search
from mcp_app.conf import get_conf
from mcp_app.executors.mcp_upstream import close_sessions
from mcp_app.models import (
    BackgroundCall,
    CallLog,
    Credential,
    Endpoint,
    IconImage,
    Policy,
    Prompt,
    Resource,
    ResourceTemplate,
    Session,
    Tool,
    Upstream,
)
from mcp_app.protocol.results import ToolError
from mcp_app.services import history, openapi, teams
from mcp_app.services.catalog_io import (
    CatalogFormatError,
    CatalogImportError,
    CatalogPermissionError,
    catalog_check_bounds,
    catalog_document,
    catalog_export_text,
    catalog_import,
    catalog_parse,
    catalog_permissions,
    catalog_permissions_missing,
    catalog_text_async,
)
from mcp_app.services.catalog_writes import catalog_row_enable
from mcp_app.services.draft_import import catalog_import_as_draft
from mcp_app.services.drafts import DraftError, draft_diff
from mcp_app.services.icons import icon_store, public_icons
from mcp_app.services.policies.writes import policy_delete
from mcp_app.services.references import RowInUseError
from mcp_app.services.replica import replica_reads
from mcp_app.services.row_writes import row_delete, row_revert
from mcp_app.services.sessions import session_close
from mcp_app.services.try_it import tool_try
from mcp_app.services.upstream_sync import (
    ItemPlan,
    OfferPlan,
    SyncChoice,
    SyncOutcome,
    UpstreamOffer,
    upstream_offer_apply,
    upstream_offer_plan,
)
from mcp_app.services.upstream_targets import upstream_list_offer, upstream_reset_breaker

EXPORT_RESPONSES = {
    (200, "application/yaml"): OpenApiTypes.OBJECT,
    (200, "application/json"): OpenApiTypes.OBJECT,
}


if TYPE_CHECKING:
    # What the mixins below are mixed into, for mypy; at run time they are plain classes,
    # before the view's own DRF bases in its MRO.
    _ApiView = APIView
    _ModelView = viewsets.ModelViewSet[Any]
else:
    _ApiView = _ModelView = object


class ApiViewMixin(_ApiView):
    """Refuses NUL in the URL before any lookup: PostgreSQL cannot store or compare it.

    Lists and lookups hold only the rows the user's teams see (``get_queryset``).

    Every write through the API is recorded in the catalog history as coming from "api".
    """

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        with history.catalog_change_source(history.API):
            return super().dispatch(request, *args, **kwargs)

    def get_queryset(self) -> Any:
        """The rows of the view's model that the user sees (``services.teams``): another
        team's row answers 404, as a missing one does."""
        parent = getattr(super(), "get_queryset", None)  # a plain ViewSet has none
        queryset = parent() if parent is not None else self.queryset  # type: ignore[attr-defined]
        if teams.is_scoped(queryset.model):
            return teams.visible(queryset, self.request.user)
        return queryset

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        check_query(request.query_params)  # every value of a repeated parameter too
        if any("\x00" in str(value) for value in kwargs.values()):
            raise ValidationError({"": ["The URL holds a NUL character."]})
        super().initial(request, *args, **kwargs)


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


class ConditionalMixin(_ModelView):
    """ETags on reads and writes; ``If-Match`` and ``If-None-Match`` on one row.

    A write (update, delete, and the row actions through ``conditional_write``) locks the row
    (``SELECT ... FOR UPDATE``) in the request's transaction before comparing its current
    ETag with ``If-Match``, so of concurrent writers holding one ETag exactly one succeeds and
    the others get 412. The ETag a write answers is read back in the same transaction, after
    the signals' updates: it is what a following GET answers.
    """

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response: Response = super().retrieve(request, *args, **kwargs)
        etag = etag_of(response.data)
        if not if_none_match_passes(request.headers.get("If-None-Match"), etag):
            return Response(status=status.HTTP_304_NOT_MODIFIED, headers={"ETag": etag})
        response["ETag"] = etag
        return response

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        with transaction.atomic():
            response: Response = super().create(request, *args, **kwargs)
            # Read back as a GET would (signals may have changed it): the ETag matches it.
            row = self.get_queryset().get(pk=response.data["id"])
            response.data = self.get_serializer(row).data
        response["ETag"] = etag_of(response.data)
        return response

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        with transaction.atomic():
            self.locked_object(request)
            response: Response = super().update(request, *args, **kwargs)
            # Read back: signals changed the row after the save (catalog_version, updated_at).
            response.data = self.get_serializer(self.get_object()).data
        response["ETag"] = etag_of(response.data)
        return response

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        with transaction.atomic():
            row = self.locked_object(request)
            self.perform_destroy(row)
        return Response(status=status.HTTP_204_NO_CONTENT)

    def perform_destroy(self, instance: Any) -> None:
        """Delete through the write path, as the API's user (409 while the row is in use)."""
        try:
            row_delete(instance, actor=self.request.user, source=history.API)
        except RowInUseError as exc:
            raise InUse(exc) from None

    def locked_object(self, request: Request) -> Any:
        """Return the row, locked until the transaction ends, once its preconditions hold.

        Call inside ``transaction.atomic()``. The row is read again after the lock is taken,
        so a concurrent writer's committed change is what the ETag is compared with.

        Raises:
            PreconditionFailed: ``If-Match`` or ``If-None-Match`` does not hold (412).
        """
        row = self.get_object()  # 404 and permissions first
        model = type(row)
        list(model._default_manager.select_for_update().filter(pk=row.pk).values_list("pk"))
        row = self.get_object()
        etag = etag_of(self.get_serializer(row).data)
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
            data = self.get_serializer(self.get_object()).data
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


# Versions a history list answers, newest first.
HISTORY_LIMIT = 200


class HistoryMixin(ConditionalMixin):
    """A row's history as the admin shows it: ``GET .../history/`` (its versions, newest
    first), ``GET .../diff/?a=&b=`` (two versions compared, field by field) and
    ``POST .../revert/`` (``services.row_writes.row_revert``: the write path's checks, under
    ``If-Match`` like any write; a version naming a row that is gone is refused, 400)."""

    action_permissions = {"versions": ["view"], "diff": ["view"], "revert": ["change"]}

    @extend_schema(responses=s.HistoryVersionSerializer(many=True))
    @action(detail=True, methods=["get"], url_path="history")
    def versions(self, request: Request, pk: str | None = None) -> Response:
        """The row's versions, newest first (at most 200)."""
        row = self.get_object()
        records = (
            type(row)
            .history.filter(id=row.pk)
            .select_related("history_user")
            .order_by("-history_id")[:HISTORY_LIMIT]
        )
        return Response(s.HistoryVersionSerializer(records, many=True).data)

    @extend_schema(
        parameters=[
            OpenApiParameter("a", int, required=True, description="A version's history_id."),
            OpenApiParameter("b", int, required=True, description="Another one's."),
        ],
        responses=s.VersionDiffSerializer,
    )
    @action(detail=True, methods=["get"])
    def diff(self, request: Request, pk: str | None = None) -> Response:
        """Two versions of the row compared, the older first whatever the order asked."""
        row = self.get_object()
        ids = []
        for name in ("a", "b"):
            value = request.query_params.get(name, "")
            if not value.isdigit():
                raise ValidationError({"query": {name: ["Expected a version's history_id."]}})
            ids.append(int(value))
        ids.sort()
        records = type(row).history.filter(id=row.pk)
        found = {record.history_id: record for record in records.filter(history_id__in=ids)}
        if any(pk not in found for pk in ids):
            raise NotFound("No such version of this row.")
        older, newer = found[ids[0]], found[ids[1]]
        changes = [
            {"field": c.field, "label": c.label, "old": c.old, "new": c.new, "lines": c.lines}
            for c in history.version_diff(older, newer)
        ]
        return Response({"older": ids[0], "newer": ids[1], "changes": changes})

    @extend_schema(request=s.RevertSerializer)
    @action(detail=True, methods=["post"])
    def revert(self, request: Request, pk: str | None = None) -> Response:
        """Give the row back its values of one version, saved through the write path as an
        edit (its checks, catalog signals, a new version of its own recorded as "api")."""
        payload = s.RevertSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        history_id = payload.validated_data["history_id"]

        def write(row: Any) -> None:
            try:
                row_revert(row, history_id=history_id, actor=request.user, source=history.API)
            except ObjectDoesNotExist:
                raise ValidationError({"history_id": ["No such version of this row."]}) from None

        return self.conditional_write(request, write)


class CatalogItemViewSet(ApiViewMixin, EnableMixin, HistoryMixin, viewsets.ModelViewSet[Any]):
    search_fields: list[str] = []
    ordering_fields: list[str] = []
    boolean_filters = ("enabled",)
    action_permissions = {**EnableMixin.action_permissions, **HistoryMixin.action_permissions}


class EndpointViewSet(CatalogItemViewSet):
    queryset = Endpoint.objects.all()
    serializer_class = s.EndpointSerializer
    filter_fields = {"enabled": "enabled", "auth_mode": "auth_mode"}

    def get_queryset(self) -> Any:
        # An endpoint lists only the items its viewer's teams see.
        user = self.request.user
        return (
            super()
            .get_queryset()
            .prefetch_related(
                *(
                    Prefetch(name, queryset=teams.visible(model.objects.all(), user))
                    for name, model in (
                        ("tools", Tool),
                        ("resources", Resource),
                        ("resource_templates", ResourceTemplate),
                        ("prompts", Prompt),
                    )
                )
            )
        )

    search_fields = ["slug", "title", "description"]
    ordering_fields = ["slug", "created_at", "updated_at"]
    ordering = ["slug"]
    action_permissions = {
        **EnableMixin.action_permissions,
        **HistoryMixin.action_permissions,
        "export": ["view"],
    }

    @extend_schema(
        parameters=[OpenApiParameter("format", enum=["yaml", "json"], required=False)],
        responses=EXPORT_RESPONSES,
    )
    @action(detail=True, methods=["get"], url_path="export")
    def export(self, request: Request, pk: str | None = None) -> StreamingHttpResponse:
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
        **HistoryMixin.action_permissions,
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
        payload = s.OpenApiImportSerializer(data=request.data, context={"request": request})
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
        shown = s.ToolSerializer(created, many=True, context=self.get_serializer_context()).data
        return Response({"created": True, "tools": shown}, status=status.HTTP_201_CREATED)


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


class CredentialViewSet(ApiViewMixin, HistoryMixin, viewsets.ModelViewSet[Credential]):
    queryset = Credential.objects.all()
    serializer_class = s.CredentialSerializer
    filter_fields = {"kind": "kind", "name": "name"}
    search_fields = ["name", "description"]
    ordering_fields = ["name", "created_at", "updated_at"]
    ordering = ["name"]
    action_permissions = HistoryMixin.action_permissions


class PolicyViewSet(ApiViewMixin, ConditionalMixin, viewsets.ModelViewSet[Policy]):
    """Policies around endpoints' calls (README, "Governance: policies"): checked by their
    kind, saved and deleted through the write path."""

    queryset = Policy.objects.select_related("endpoint")
    serializer_class = s.PolicySerializer
    filter_fields = {"endpoint": "endpoint__slug", "kind": "kind", "mode": "mode"}
    search_fields = ["name", "target"]
    ordering_fields = ["position", "name", "created_at", "updated_at"]
    ordering = ["endpoint__slug", "position", "id"]

    def perform_destroy(self, instance: Any) -> None:
        policy_delete(instance, actor=self.request.user, source=history.API)


# The models a sync lists and writes, by permission codename.
SYNC_MODELS = ("tool", "resource", "resourcetemplate", "prompt")
# The sync body's fields, by SyncChoice's.
SYNC_TICKS = {
    "add_tools": "add",
    "update_tools": "update",
    "remove_tools": "remove",
    "add_resources": "add_resources",
    "update_resources": "update_resources",
    "remove_resources": "remove_resources",
    "add_templates": "add_templates",
    "update_templates": "update_templates",
    "remove_templates": "remove_templates",
    "add_prompts": "add_prompts",
    "update_prompts": "update_prompts",
    "remove_prompts": "remove_prompts",
}
SYNC_PREVIEW = inline_serializer(
    "UpstreamSyncPreview",
    {
        "upstream": serializers.CharField(),
        "tools_out_of_sync": serializers.BooleanField(),
        "tools": serializers.JSONField(help_text="added, changed, removed, unchanged"),
        "resources": serializers.JSONField(help_text="added, changed, removed, unchanged"),
        "resource_templates": serializers.JSONField(help_text="added, changed, removed, unchanged"),
        "prompts": serializers.JSONField(help_text="added, changed, removed, unchanged"),
    },
)
SYNC_RESULT = inline_serializer(
    "UpstreamSyncResult",
    {
        "created": serializers.ListField(child=serializers.JSONField()),
        "updated": serializers.ListField(child=serializers.JSONField()),
        "disabled": serializers.ListField(child=serializers.JSONField()),
        "skipped": serializers.ListField(child=serializers.CharField()),
        "upstream": s.UpstreamSerializer(),
    },
)


class UpstreamViewSet(ApiViewMixin, HistoryMixin, viewsets.ModelViewSet[Upstream]):
    """Upstream MCP servers: their settings (health, breaker and probe state read-only), their
    history, and the sync of what they offer (preview, then apply the chosen changes)."""

    queryset = Upstream.objects.select_related("credential")
    serializer_class = s.UpstreamSerializer
    filter_fields = {"name": "name", "enabled": "enabled"}
    boolean_filters = ("enabled",)
    search_fields = ["name", "description", "url"]
    ordering_fields = ["name", "created_at", "updated_at"]
    ordering = ["name"]
    # What the sync needs of the other models is checked in the actions (``_sync_needs``).
    action_permissions = {
        **HistoryMixin.action_permissions,
        "sync": ["view"],
        "sync_apply": ["view", "change"],
    }

    @extend_schema(request=None)
    @action(detail=True, methods=["post"], url_path="reset-breaker")
    def reset_breaker(self, request: Request, pk: str | None = None) -> Response:
        """Close the circuit breaker now: the next call tries the upstream again."""
        return self.conditional_write(request, upstream_reset_breaker)

    @extend_schema(responses=SYNC_PREVIEW)
    @action(detail=True, methods=["get"])
    def sync(self, request: Request, pk: str | None = None) -> Response:
        """What the upstream offers now against the rows got from it: what a sync would
        create, change (field by field, ours and the upstream's) and disable. Reads only.
        Needs view on tools, resources, resource templates and prompts (it lists them)."""
        _require(request, [f"mcp_app.view_{model}" for model in SYNC_MODELS])
        upstream = self.get_object()
        plan = upstream_offer_plan(upstream, _offer(upstream))
        return Response(_sync_preview(upstream, plan))

    @extend_schema(request=s.UpstreamSyncSerializer, responses=SYNC_RESULT)
    @sync.mapping.post
    def sync_apply(self, request: Request, pk: str | None = None) -> Response:
        """Apply the chosen changes of the preview, as the admin's sync page does: new rows
        on ``endpoints``, disabled unless ``enabled``; recorded as "upstream sync". Needs
        ``add_<model>`` for what it creates and ``change_<model>`` for what it changes or
        disables; a name the preview does not list there is refused (400), nothing applied."""
        payload = s.UpstreamSyncSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        _require(request, _sync_needs(data))
        offer = _offer(self.get_object())
        choice = SyncChoice(**{field: frozenset(data[key]) for key, field in SYNC_TICKS.items()})
        done: dict[str, Any] = {}

        def write(upstream: Upstream) -> None:
            _check_ticks(upstream_offer_plan(upstream, offer), data)
            tools, items = upstream_offer_apply(
                upstream, offer, choice=choice, endpoints=data["endpoints"],
                enabled=data["enabled"], actor=request.user,
            )  # fmt: skip
            done.update(_sync_outcome(tools, items))

        response = self.conditional_write(request, write)
        return Response({**done, "upstream": response.data}, headers={"ETag": response["ETag"]})


def _require(request: Request, names: list[str]) -> None:
    missing = missing_permissions(request, names)
    if missing:
        raise PermissionDenied(denied_message(missing))


def _sync_needs(data: dict[str, Any]) -> list[str]:
    """The permissions applying ``data`` needs besides the upstream's own."""
    needs: list[str] = []
    for model, adds, changes in (
        ("tool", ["add_tools"], ["update_tools", "remove_tools"]),
        ("resource", ["add_resources"], ["update_resources", "remove_resources"]),
        ("resourcetemplate", ["add_templates"], ["update_templates", "remove_templates"]),
        ("prompt", ["add_prompts"], ["update_prompts", "remove_prompts"]),
    ):
        if any(data[key] for key in adds):
            needs.append(f"mcp_app.add_{model}")
        if any(data[key] for key in changes):
            needs.append(f"mcp_app.change_{model}")
    return needs


class UpstreamUnavailableError(APIException):
    status_code = status.HTTP_502_BAD_GATEWAY
    default_detail = "The upstream could not be listed."
    default_code = "upstream_unavailable"


def _offer(upstream: Upstream) -> UpstreamOffer:
    try:
        return async_to_sync(_list_offer)(upstream.name)
    except ToolError as exc:
        # The upstream's name and what failed; never its URL or credential (as a call's).
        raise UpstreamUnavailableError(exc.message) from None


async def _list_offer(name: str) -> UpstreamOffer:
    # async_to_sync runs this on a loop of its own: close its upstream clients before leaving.
    try:
        return await upstream_list_offer(name)
    finally:
        await close_sessions()


def _sync_preview(upstream: Upstream, plan: OfferPlan) -> dict[str, Any]:
    def tool(row: Tool) -> dict[str, Any]:
        return {"id": row.pk, "name": row.name, "remote_name": _remote(row), "enabled": row.enabled}

    def item(row: Any, key: str) -> dict[str, Any]:
        return {
            "id": row.pk,
            key: getattr(row, key),
            "remote": _remote(row),
            "enabled": row.enabled,
        }

    def offered(remote: dict[str, Any], key: str) -> dict[str, Any]:
        return {
            key: remote.get(key), "name": remote.get("name"), "title": remote.get("title"),
            "description": remote.get("description"),
        }  # fmt: skip

    def changed(plan: ItemPlan, key: str) -> list[dict[str, Any]]:
        return [
            {
                **item(row, key),
                "fields": {
                    name: {"ours": ours, "theirs": theirs}
                    for name, (ours, theirs) in fields.items()
                },
            }
            for row, _remote_key, fields in plan.changes()
        ]

    tools = plan.tools
    return {
        "upstream": upstream.name,
        "tools_out_of_sync": upstream.tools_out_of_sync,
        "tools": {
            "added": [offered(remote, "name") for remote in tools.added],
            "changed": [
                {
                    **tool(row),
                    "fields": {
                        name: {"ours": ours, "theirs": theirs}
                        for name, (ours, theirs) in tools.fields[_remote(row)].items()
                    },
                }
                for row, _remote_tool in tools.changed
            ],
            "removed": [tool(row) for row in tools.removed],
            "unchanged": [tool(row) for row in tools.unchanged],
        },
        "resources": {
            "added": [offered(remote, "uri") for remote in plan.resources.added],
            "changed": changed(plan.resources, "uri"),
            "removed": [item(row, "uri") for row in plan.resources.removed],
            "unchanged": [item(row, "uri") for row in plan.resources.unchanged],
        },
        "resource_templates": {
            "added": [offered(remote, "uriTemplate") for remote in plan.templates.added],
            "changed": changed(plan.templates, "uri_template"),
            "removed": [item(row, "uri_template") for row in plan.templates.removed],
            "unchanged": [item(row, "uri_template") for row in plan.templates.unchanged],
        },
        "prompts": {
            "added": [offered(remote, "name") for remote in plan.prompts.added],
            # "arguments": the upstream's, as before "fields" named each change.
            "changed": [
                {**entry, "arguments": remote.get("arguments") or []}
                for entry, (_row, remote) in zip(
                    changed(plan.prompts, "name"), plan.prompts.changed, strict=True
                )
            ],
            "removed": [item(row, "name") for row in plan.prompts.removed],
            "unchanged": [item(row, "name") for row in plan.prompts.unchanged],
        },
    }


def _remote(row: Any) -> str:
    """What the upstream calls a row got from it."""
    if isinstance(row, Tool):
        return str(row.config.get("tool") or row.name)
    if isinstance(row, Resource):
        return row.upstream_uri
    if isinstance(row, ResourceTemplate):
        return row.upstream_uri_template
    return str(row.upstream_name)


def _check_ticks(plan: OfferPlan, data: dict[str, Any]) -> None:
    """Refuse a name the preview does not list under the change it is ticked for."""
    offered = {
        "add_tools": {remote["name"] for remote in plan.tools.added},
        "update_tools": set(plan.tools.fields),
        "remove_tools": {_remote(row) for row in plan.tools.removed},
        "add_resources": {remote["uri"] for remote in plan.resources.added},
        "update_resources": set(plan.resources.fields),
        "remove_resources": {_remote(row) for row in plan.resources.removed},
        "add_templates": {remote["uriTemplate"] for remote in plan.templates.added},
        "update_templates": set(plan.templates.fields),
        "remove_templates": {_remote(row) for row in plan.templates.removed},
        "add_prompts": {remote["name"] for remote in plan.prompts.added},
        "update_prompts": {_remote(row) for row, _remote_item in plan.prompts.changed},
        "remove_prompts": {_remote(row) for row in plan.prompts.removed},
    }
    errors = {
        key: {
            str(index): [f"{name!r} is not among what the preview lists there."]
            for index, name in enumerate(data[key])
            if name not in names
        }
        for key, names in offered.items()
    }
    errors = {key: value for key, value in errors.items() if value}
    if errors:
        raise ValidationError(errors)


def _sync_outcome(tools: SyncOutcome, items: SyncOutcome) -> dict[str, Any]:
    def named(row: Any) -> dict[str, Any]:
        kind = {Tool: "tool", Resource: "resource", ResourceTemplate: "resource_template"}.get(
            type(row), "prompt"
        )
        return {"kind": kind, "id": row.pk, "name": str(row), "enabled": row.enabled}

    return {
        key: [named(row) for row in (*getattr(tools, key), *getattr(items, key))]
        for key in ("created", "updated", "disabled")
    } | {"skipped": [*tools.skipped, *items.skipped]}


class CallLogViewSet(ApiViewMixin, viewsets.ReadOnlyModelViewSet[CallLog]):
    """The call log, with the filters of /audit/ (the client program's name and version,
    user, OAuth client by id or name, "failed" as status, quick ranges...); payloads need
    "Can see recorded arguments and results"."""

    queryset = CallLog.objects.select_related("principal")
    serializer_class = s.CallLogSerializer
    ordering_fields = ["id", "created_at"]
    ordering = ["-id"]
    extra_permissions = ["mcp_app.audit_calls"]

    @replica_reads
    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        """Read the call log from the replica when there is one that may serve (its state in
        the ``X-Read-Source`` header): every action here only reads."""
        return super().dispatch(request, *args, **kwargs)

    def filter_queryset(self, queryset: QuerySet[CallLog, Any]) -> QuerySet[CallLog, Any]:
        form = CallFilterForm(self.request.query_params, user=self.request.user)
        if not form.is_valid():
            raise ValidationError(form.errors.get_json_data())
        searched = call_log_search(filters=form.call_filter()).select_related("principal")
        filtered: QuerySet[CallLog] = super().filter_queryset(searched)
        return filtered

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
        form = CallFilterForm(request.query_params, user=request.user)
        if not form.is_valid():
            raise ValidationError(form.errors.get_json_data())
        return call_log_export(
            request._request,
            fmt=fmt,
            filters=form.call_filter(),
            payloads=request.user.has_perm(PAYLOAD_PERMISSION),
        )


class BackgroundCallViewSet(ApiViewMixin, viewsets.ReadOnlyModelViewSet[BackgroundCall]):
    """Background tool calls and MCP tasks (``?is_task=true``)."""

    queryset = BackgroundCall.objects.select_related("endpoint", "tool")
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
    ApiViewMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[Session],
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


class IconViewSet(ApiViewMixin, viewsets.GenericViewSet[IconImage]):
    """Uploads an icon (README.md, "Icons"): its bytes, base64 in JSON, are checked as an
    admin upload is and stored once; the answer is the ``Icon`` to put in a row's ``icons``."""

    queryset = IconImage.objects.none()

    def get_serializer(self, *args: Any, **kwargs: Any) -> BaseSerializer[Any]:
        return s.IconUploadSerializer(*args, **kwargs)

    @extend_schema(
        request=s.IconUploadSerializer,
        responses={201: OpenApiTypes.OBJECT},
    )
    def create(self, request: Request) -> Response:
        payload = s.IconUploadSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        icon = payload.validated_data["icon"]
        icon_store(icon=icon)
        (shown,) = public_icons([icon.icon(theme=payload.validated_data["theme"])])
        return Response(shown, status=status.HTTP_201_CREATED)


class CatalogViewSet(ApiViewMixin, viewsets.ViewSet):
    """Whole-catalog export and import (the ``mcp_export`` / ``mcp_import`` commands)."""

    queryset = Endpoint.objects.none()
    # What export and import need is the catalog's rule (services.catalog_io's
    # catalog_permissions), checked in the actions: only signing in is checked here.
    action_permissions: dict[str, list[str]] = {"export": [], "import_": []}
    parser_classes = [CatalogJsonParser, parsers.FormParser, parsers.MultiPartParser]

    def get_serializer(self, *args: Any, **kwargs: Any) -> BaseSerializer[Any]:
        return s.CatalogImportSerializer(*args, **kwargs)

    @extend_schema(
        parameters=[
            OpenApiParameter("format", enum=["yaml", "json"], required=False),
            OpenApiParameter("endpoint", many=True, required=False),
        ],
        responses=EXPORT_RESPONSES,
    )
    @action(detail=False, methods=["get"])
    def export(self, request: Request) -> StreamingHttpResponse:
        """The catalog (or ``?endpoint=slug`` ones) as an import file; needs view on every
        model a document holds."""
        return _export_response(request, request.query_params.getlist("endpoint") or None)

    @extend_schema(
        request=s.CatalogImportSerializer,
        responses={
            200: inline_serializer(
                "CatalogImportResult",
                {
                    "dry_run": serializers.BooleanField(),
                    "changes": serializers.ListField(child=serializers.JSONField()),
                },
            ),
            201: inline_serializer(
                "CatalogImportDraft",
                {
                    "draft": serializers.IntegerField(help_text="The draft's id."),
                    "title": serializers.CharField(),
                    "diff": s.DraftEntryDiffSerializer(many=True),
                },
            ),
        },
    )
    @action(detail=False, methods=["post"], url_path="import")
    def import_(self, request: Request) -> Response:
        """Import a catalog document (JSON body) or an exported file (multipart ``file``);
        ``dry_run`` reports the diff only. Both need the permissions of every model the
        document lists or the import would change (403 naming those missing). With
        ``as_draft``, the document is saved as one draft (201: its id and diff) and nothing
        is live until it is published (/api/v1/drafts/)."""
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
            if data["as_draft"]:
                return _import_as_draft(request, document, data, field)
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


def _import_as_draft(
    request: Request, document: dict[str, Any], data: dict[str, Any], field: str
) -> Response:
    try:
        draft = catalog_import_as_draft(
            document=document,
            title=data["title"] or "Catalog import",
            actor=request.user,
            prune=data["prune"],
            dry_run=data["dry_run"],
        )
    except DraftError as exc:
        raise ValidationError({field: exc.messages}) from None
    diff = s.DraftEntryDiffSerializer(draft_diff(draft, user=request.user), many=True).data
    return Response(
        {"draft": draft.pk, "title": draft.title, "diff": diff}, status=status.HTTP_201_CREATED
    )


def _export_response(request: Request, slugs: list[str] | None) -> StreamingHttpResponse:
    missing = catalog_permissions_missing(request.user, catalog_permissions())
    if missing:
        raise PermissionDenied(_missing_message("Exporting the catalog", missing))
    fmt = request.query_params.get("format", "yaml")
    if fmt not in ("yaml", "json"):
        raise ValidationError({"format": ["Expected yaml or json."]})
    try:
        pieces = catalog_export_text(endpoint_slugs=slugs, user=request.user, fmt=fmt)
    except CatalogFormatError as exc:
        raise ValidationError({"endpoint": [str(exc)]}) from None
    content_type = "application/json" if fmt == "json" else "application/yaml"
    # Streamed: a large catalog's first bytes leave at once, and the process holds one
    # chunk of rows, not the document (services.catalog_io.catalog_export_text).
    body = catalog_text_async(pieces) if isinstance(request._request, ASGIRequest) else pieces
    return StreamingHttpResponse(body, content_type=f"{content_type}; charset=utf-8")


def _missing_message(what: str, missing: list[str]) -> str:
    return f"{what} needs permissions you do not have: {', '.join(missing)}."
