"""Replays through the API: ``POST /api/v1/drafts/<id>/replay/`` runs one, ``GET
/api/v1/replays/<id>/`` reads it back (``services/replay.py`` does the work).

Reading needs "Can view draft"; running one also "Can change tool", as the try-it action
does (a replay runs tools). Recorded arguments, results, errors and diffs are in the answer
only for users who may see call payloads (``mcp_app.view_call_payloads``); others get the
outcomes, durations and counts. Another team's draft or run answers 404, as a missing one.
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from mcp_app.api.permissions import denied_message, missing_permissions
from mcp_app.api.views import ApiViewMixin
from mcp_app.models import ReplayRun
from mcp_app.services.drafts import drafts_visible
from mcp_app.services.replay import (
    MAX_SAMPLE,
    ReplayError,
    replay_filter,
    replay_results,
    replay_run,
    replay_runs_visible,
    replay_summary,
)

VIEW = "mcp_app.view_draft"
RUN = "mcp_app.change_tool"
PAYLOADS = "mcp_app.view_call_payloads"


class _SignedIn(BasePermission):
    """Only signing in is checked here; the views name the permissions they need."""

    def has_permission(self, request: Request, view: Any) -> bool:
        return bool(request.user and request.user.is_authenticated)


def _require(request: Request, *names: str) -> None:
    missing = missing_permissions(request, names)
    if missing:
        raise PermissionDenied(denied_message(missing))


class ReplayFilterSerializer(serializers.Serializer[Any]):
    endpoint = serializers.CharField(required=False, allow_blank=True, max_length=100)
    client_name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    status = serializers.CharField(
        required=False, allow_blank=True, max_length=16, help_text='A call status, or "failed".'
    )
    since = serializers.DateTimeField(required=False, allow_null=True)
    until = serializers.DateTimeField(required=False, allow_null=True)


class ReplayRequestSerializer(serializers.Serializer[Any]):
    tool = serializers.CharField(max_length=128, help_text="A tool the draft changes or creates.")
    filter = ReplayFilterSerializer(required=False)
    sample = serializers.IntegerField(required=False, min_value=1, max_value=MAX_SAMPLE)
    confirm = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text='"<tool>:<number of calls>", for a tool that may have side effects elsewhere.',
    )


class ReplayRunSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    draft = serializers.IntegerField()
    tool = serializers.CharField()
    filter = serializers.JSONField()
    created_at = serializers.DateTimeField()
    created_by = serializers.CharField(allow_null=True)
    confirmed = serializers.BooleanField()
    summary = serializers.CharField()
    counts = serializers.DictField(
        child=serializers.IntegerField(),
        help_text=(
            "calls, refused, changed, identical, not_run, and the calls passed over: "
            "skipped_unrecorded (arguments not recorded or cut) and skipped_redacted "
            "(arguments holding a redacted value or one a mask policy replaced, such as "
            '"[masked:email]").'
        ),
    )
    payloads = serializers.BooleanField(help_text="Whether results carry arguments and results.")
    results = serializers.ListField(child=serializers.JSONField())


def _run_body(request: Request, run: ReplayRun) -> dict[str, Any]:
    return {
        "id": run.pk,
        "draft": run.draft_id,
        "tool": run.tool,
        "filter": run.filter,
        "created_at": run.created_at,
        "created_by": run.created_by.get_username() if run.created_by else None,
        "confirmed": run.confirmed,
        "summary": replay_summary(run),
        "counts": {
            name: getattr(run, name)
            for name in (
                "calls",
                "refused",
                "changed",
                "identical",
                "skipped_unrecorded",
                "skipped_redacted",
                "not_run",
            )
        },
        "payloads": request.user.has_perm(PAYLOADS),
        "results": replay_results(run, payloads=request.user.has_perm(PAYLOADS)),
    }


class DraftReplayView(ApiViewMixin, APIView):
    """Replay recorded calls of a tool the draft changes, against the live tool and the draft."""

    permission_classes = [_SignedIn]

    @extend_schema(request=ReplayRequestSerializer, responses={201: ReplayRunSerializer})
    def post(self, request: Request, pk: int) -> Response:
        """Run a replay (synchronously: at most 50 calls, 10 s per call, 60 s in all) and
        store it. A tool that may have side effects elsewhere needs ``confirm``; without it
        (or with a wrong one) the answer is a 400 naming the value expected, and nothing
        runs."""
        _require(request, VIEW, RUN)
        draft = get_object_or_404(drafts_visible(request.user), pk=pk)
        payload = ReplayRequestSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        try:
            filters = replay_filter({**data.get("filter", {}), "sample": data.get("sample")})
            run = replay_run(
                draft,
                tool=data["tool"],
                filters=filters,
                user=request.user,
                confirm=data.get("confirm", ""),
            )
        except ReplayError as exc:
            raise ValidationError(
                {_field(name): [message] for name, message in exc.errors.items()}
            ) from None
        return Response(_run_body(request, run), status=201)


def _field(name: str) -> str:
    return name if name in ("tool", "sample", "confirm", "draft") else f"filter.{name}"


class ReplayRunView(ApiViewMixin, APIView):
    """One stored replay."""

    permission_classes = [_SignedIn]

    @extend_schema(responses=ReplayRunSerializer)
    def get(self, request: Request, pk: int) -> Response:
        """The replay's summary, counts and each call's comparison (payloads as allowed)."""
        _require(request, VIEW)
        run = get_object_or_404(
            replay_runs_visible(request.user).select_related("created_by"), pk=pk
        )
        return Response(_run_body(request, run))
