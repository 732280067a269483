"""``/api/v1/drafts/``: catalog changes saved as drafts (``services/drafts.py``), shown beside
the live rows, approved, published or discarded. Nothing a draft holds reaches a client
until it is published.

What each route needs (model permissions on Draft; docs/api.md, "Drafts"):

- list, retrieve (with the diff), ``check`` (a dry run of the publish): view;
- create: add; update (PATCH ``title`` or ``document``): change;
- ``approve``: ``mcp_app.approve_draft`` (and view): a second user's approval, which an
  endpoint with ``require_review`` needs before a publish;
- ``discard``: change. Discarding closes the draft and keeps it, as a publish does, so what
  was proposed stays readable; no draft is deleted through the API, and ``delete_draft``
  grants nothing here;
- ``publish`` (one draft) and ``publish`` on the collection (``{"drafts": [ids]}``, one change
  set): change, plus the catalog permissions of the changes, which the service checks as an
  import checks them (403 naming those missing).

A draft is its team's: another team's answers 404, and naming it in ``drafts`` fails as
naming a missing one. The service's refusals become the API's errors: ``DraftError`` 400 (its
messages), ``DraftConflict`` 409 (each conflict), ``PermissionDenied`` 403.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from mcp_app.api.errors import DraftConflictError
from mcp_app.api.serializers import DraftEntryDiffSerializer, JsonObjectField
from mcp_app.api.views import ApiViewMixin
from mcp_app.models import Draft, Endpoint
from mcp_app.services.catalog_io import ImportReport
from mcp_app.services.drafts import (
    DraftConflict,
    DraftError,
    draft_approve,
    draft_check,
    draft_create,
    draft_diff,
    draft_discard,
    draft_update,
    drafts_publish,
)

# Drafts one collection publish takes at most.
MAX_PUBLISHED = 100


def _user_field() -> serializers.SlugRelatedField[Any]:
    return serializers.SlugRelatedField(
        slug_field=get_user_model().USERNAME_FIELD, read_only=True, allow_null=True
    )


class DraftSerializer(serializers.ModelSerializer[Draft]):
    """A draft as lists show it: its document, status and who did what, without the diff."""

    team: serializers.SlugRelatedField[Group] = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )
    endpoints: serializers.SlugRelatedField[Endpoint] = serializers.SlugRelatedField(
        many=True, slug_field="slug", read_only=True
    )
    document = JsonObjectField(
        help_text="A catalog document (format mcphost-catalog/1) listing only the changed "
        "entries: endpoints, tools, resources, resource_templates, prompts."
    )
    author = _user_field()
    approved = serializers.BooleanField(
        read_only=True, help_text="Approved as the document stands (an edit withdraws it)."
    )
    approved_by = _user_field()
    published_by = _user_field()

    class Meta:
        model = Draft
        fields = [
            "id", "title", "status", "team", "endpoints", "document", "author", "approved",
            "approved_by", "approved_at", "published_by", "published_at", "change_set",
            "created_at", "updated_at",
        ]  # fmt: skip
        read_only_fields = fields


class DraftDetailSerializer(DraftSerializer):
    """A draft with its diff: each entry beside the live row it changes."""

    diff = serializers.SerializerMethodField()

    class Meta(DraftSerializer.Meta):
        fields = [*DraftSerializer.Meta.fields, "diff"]
        read_only_fields = fields

    @extend_schema_field(DraftEntryDiffSerializer(many=True))
    def get_diff(self, draft: Draft) -> Any:
        user = self.context["request"].user
        return DraftEntryDiffSerializer(draft_diff(draft, user=user), many=True).data


class DraftWriteSerializer(serializers.Serializer[Any]):
    """What a draft is made or edited from (PATCH: either or both)."""

    title = serializers.CharField(max_length=200, help_text="What the change is, in a few words.")
    document = JsonObjectField(
        help_text="A catalog document listing only the changed entries, each as it would be."
    )


class DraftPublishSerializer(serializers.Serializer[Any]):
    drafts = serializers.ListField(
        child=serializers.IntegerField(min_value=1),
        min_length=1,
        max_length=MAX_PUBLISHED,
        help_text="The ids of the drafts to publish together, as one change set.",
    )


IMPORT_REPORT = serializers.ListField(
    child=serializers.JSONField(), help_text="What the publish makes (or would make) live."
)
CHECK_RESULT = inline_serializer(
    "DraftCheckResult", {"dry_run": serializers.BooleanField(), "changes": IMPORT_REPORT}
)
PUBLISH_RESULT = inline_serializer(
    "DraftPublishResult",
    {
        "change_set": serializers.UUIDField(),
        "changes": IMPORT_REPORT,
        "drafts": DraftSerializer(many=True),
    },
)
CONFLICT = OpenApiResponse(
    response=inline_serializer(
        "DraftConflict",
        {
            "type": serializers.CharField(help_text="draft_conflict"),
            "detail": serializers.CharField(),
            "errors": serializers.ListField(
                child=serializers.DictField(), help_text="One {path, message, code} a conflict."
            ),
        },
    ),
    description="Live rows changed since the draft was made, where it changes them too "
    "(errors lists each conflict); nothing was published.",
)


@contextlib.contextmanager
def _service_errors(path: str = "") -> Iterator[None]:
    """The service's refusals as the API's errors (PermissionDenied passes: 403)."""
    try:
        yield
    except DraftConflict as exc:
        raise DraftConflictError(exc.messages) from None
    except DraftError as exc:
        raise ValidationError({path or "non_field_errors": exc.messages}) from None


class DraftViewSet(
    ApiViewMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[Draft],
):
    queryset = Draft.objects.select_related(
        "team", "author", "approved_by", "published_by"
    ).prefetch_related("endpoints")
    serializer_class = DraftSerializer
    # Drafts are closed (discard, publish), never replaced whole nor deleted.
    http_method_names = ["get", "post", "patch", "head", "options"]
    filter_fields = {"status": "status", "endpoint": "endpoints__slug"}
    search_fields = ["title"]
    ordering_fields = ["id", "created_at", "updated_at"]
    ordering = ["-updated_at", "-id"]
    action_permissions = {
        "check": ["view"],
        "approve": ["view", "approve"],
        "discard": ["change"],
        "publish": ["change"],
        "publish_together": ["change"],
    }

    def get_serializer_class(self) -> type[serializers.BaseSerializer[Any]]:
        if self.action == "retrieve":
            return DraftDetailSerializer
        if self.action in ("create", "partial_update"):
            return DraftWriteSerializer
        return DraftSerializer

    def _detail(self, draft: Draft, code: int = status.HTTP_200_OK) -> Response:
        draft = self.get_queryset().get(pk=draft.pk)
        data = DraftDetailSerializer(draft, context=self.get_serializer_context()).data
        return Response(data, status=code)

    @extend_schema(request=DraftWriteSerializer, responses={201: DraftDetailSerializer})
    def create(self, request: Request) -> Response:
        """Save a draft: checked by the rules of a live save, as the request's user (their
        permissions and teams); nothing is live until it is published."""
        payload = DraftWriteSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        with _service_errors("document"):
            draft = draft_create(actor=request.user, **payload.validated_data)
        return self._detail(draft, status.HTTP_201_CREATED)

    @extend_schema(request=DraftWriteSerializer, responses=DraftDetailSerializer)
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        """Change an open draft's title or document; a new document withdraws an approval."""
        draft = self.get_object()
        payload = DraftWriteSerializer(data=request.data, partial=True)
        payload.is_valid(raise_exception=True)
        with _service_errors("document"):
            draft_update(draft, actor=request.user, **payload.validated_data)
        return self._detail(draft)

    @extend_schema(responses=DraftDetailSerializer)
    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """The draft, with each entry beside the live row (fields, conflicts)."""
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(request=None, responses={200: CHECK_RESULT, 409: CONFLICT})
    @action(detail=True, methods=["post"])
    def check(self, request: Request, pk: str | None = None) -> Response:
        """What publishing the draft now would change (a dry run: nothing is written), or
        the conflicts that stop it (409)."""
        draft = self.get_object()
        with _service_errors():
            report = draft_check(draft, actor=request.user)
        return Response(report.as_dict())

    @extend_schema(request=None, responses=DraftDetailSerializer)
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str | None = None) -> Response:
        """Approve the draft as it stands (not its author's own)."""
        draft = self.get_object()
        with _service_errors():
            draft_approve(draft, actor=request.user)
        return self._detail(draft)

    @extend_schema(request=None, responses=DraftDetailSerializer)
    @action(detail=True, methods=["post"])
    def discard(self, request: Request, pk: str | None = None) -> Response:
        """Close the draft unpublished (kept, with its status)."""
        draft = self.get_object()
        with _service_errors():
            draft_discard(draft, actor=request.user)
        return self._detail(draft)

    @extend_schema(request=None, responses={200: PUBLISH_RESULT, 409: CONFLICT})
    @action(detail=True, methods=["post"])
    def publish(self, request: Request, pk: str | None = None) -> Response:
        """Make the draft live: its history rows name it (and its approver), and clients
        hear one list_changed per endpoint."""
        return self._publish(request, [self.get_object()])

    @extend_schema(
        request=DraftPublishSerializer,
        responses={200: PUBLISH_RESULT, 409: CONFLICT},
        operation_id="drafts_publish_together",
    )
    @action(detail=False, methods=["post"], url_path="publish")
    def publish_together(self, request: Request) -> Response:
        """Publish several drafts as one change set, in one transaction: all or none."""
        payload = DraftPublishSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        ids = list(dict.fromkeys(payload.validated_data["drafts"]))
        found = self.get_queryset().in_bulk(ids)
        missing = [str(pk) for pk in ids if pk not in found]
        if missing:
            # Another team's draft reads as a missing one.
            raise ValidationError({"drafts": [f"No draft {', '.join(missing)}."]})
        return self._publish(request, [found[pk] for pk in ids])

    def _publish(self, request: Request, drafts: Sequence[Draft]) -> Response:
        with _service_errors():
            report: ImportReport = drafts_publish(drafts, actor=request.user)
        published = self.get_queryset().filter(pk__in=[draft.pk for draft in drafts])
        context = self.get_serializer_context()
        return Response(
            {
                "change_set": drafts[0].change_set,
                "changes": report.as_dict()["changes"],
                "drafts": DraftSerializer(
                    published.order_by("pk"), many=True, context=context
                ).data,
            }
        )
