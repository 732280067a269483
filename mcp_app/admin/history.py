"""Catalog history in the admin: each object's versions, a diff of any two, revert, and the
site-wide "recent changes" page (``services/history.py`` reads the history tables).

Reverting is simple-history's version page: the admin form filled with that version's values,
saved like any edit, so it runs the form's and the model's validation and the catalog signals
(invalidation and list_changed); a version naming a row that no longer exists (a tool's
upstream) is refused first (``services.history.version_check``). Everything saved from the
admin is recorded as "admin".
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import conditional_escape
from simple_history.admin import SimpleHistoryAdmin

from mcp_app.admin.selection import CheckedSelectionAdmin
from mcp_app.admin.teams import TeamScopedAdmin
from mcp_app.models import Endpoint, Prompt
from mcp_app.services import history, teams


class CatalogHistoryAdmin(TeamScopedAdmin, CheckedSelectionAdmin, SimpleHistoryAdmin):
    """Base of every catalog admin: history pages, writes stamped as coming from "admin",
    actions only on a selection the list shows (``CheckedSelectionAdmin``), and help texts
    shown as plain text.

    Its rows are the user's teams' (``TeamScopedAdmin``); another team's row's history pages
    answer 404 as its change page does.
    """

    def _seen_or_404(self, request: HttpRequest, object_id: Any) -> None:
        # simple-history falls back to a row's history when the row is not in get_queryset.
        if teams.scope_of(request.user) is None:
            return
        if (
            not str(object_id).isdigit()
            or not self.get_queryset(request).filter(pk=int(object_id)).exists()
        ):
            raise Http404

    object_history_template = "admin/mcp_app/object_history.html"
    object_history_list_template = "admin/mcp_app/object_history_list.html"

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        formfield = super().formfield_for_dbfield(db_field, request, **kwargs)
        # The admin renders help texts as HTML: a model's plain-text placeholder such as
        # ("upstream": "<name>") would vanish as an unknown tag. Escaped, it shows as written.
        if formfield is not None and formfield.help_text:
            formfield.help_text = conditional_escape(formfield.help_text)
        return formfield

    def changeform_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        with history.catalog_change_source(history.ADMIN):
            return super().changeform_view(request, *args, **kwargs)

    def changelist_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        # Bulk actions (delete selected, list_editable) write from the changelist.
        with history.catalog_change_source(history.ADMIN):
            return super().changelist_view(request, *args, **kwargs)

    def delete_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        with history.catalog_change_source(history.ADMIN):
            return super().delete_view(request, *args, **kwargs)

    def history_form_view(
        self, request: HttpRequest, object_id: str, version_id: str, extra_context: Any = None
    ) -> Any:
        self._seen_or_404(request, object_id)
        record = self.model.history.filter(id=object_id, history_id=version_id).first()
        if record is not None and self.has_change_permission(request, record.instance):
            try:
                history.version_check(record)
            except ValidationError as exc:
                # Refused before the form is shown or saved: nothing changes.
                for message in exc.messages:
                    messages.error(request, message)
                opts = self.model._meta
                return HttpResponseRedirect(
                    reverse(f"admin:{opts.app_label}_{opts.model_name}_history", args=[object_id])
                )
        # response_change says which version the row went back to (simple-history's message
        # is the plain "changed successfully").
        request.reverted_version = record  # type: ignore[attr-defined]
        with history.catalog_change_source(history.ADMIN):
            return super().history_form_view(request, object_id, version_id, extra_context)

    def response_change(self, request: HttpRequest, obj: Any) -> HttpResponse:
        record = getattr(request, "reverted_version", None)
        if record is None or request.method != "POST":
            return super().response_change(request, obj)
        opts = self.model._meta
        self.message_user(
            request,
            f"The {opts.verbose_name} “{obj}” was reverted to {version_label(record)}; "
            "the revert is the newest version in its history.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(
            reverse(f"admin:{opts.app_label}_{opts.model_name}_history", args=[obj.pk])
        )

    def get_urls(self) -> list[URLPattern]:
        opts = self.model._meta
        compare = path(
            "<int:object_id>/history/compare/",
            self.admin_site.admin_view(self.history_compare_view),
            name=f"{opts.app_label}_{opts.model_name}_history_compare",
        )
        return [compare, *super().get_urls()]

    def history_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> Any:
        self._seen_or_404(request, object_id)
        opts = self.model._meta
        versions = self.model.history.filter(id=object_id).order_by("-history_id")
        context = {
            "versions": [(version.history_id, version_label(version)) for version in versions],
            "compare_url": reverse(
                f"admin:{opts.app_label}_{opts.model_name}_history_compare", args=[object_id]
            ),
            "part_history": (
                history.prompt_part_history(int(object_id)) if self.model is Prompt else None
            ),
            "membership_history": (
                history.membership_changes(int(object_id)) if self.model is Endpoint else None
            ),
            **(extra_context or {}),
        }
        return super().history_view(request, object_id, extra_context=context)

    def history_compare_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """Two versions side by side (``?a=<history id>&b=<history id>``), older first."""
        self._seen_or_404(request, object_id)
        records = self.model.history.filter(id=object_id)
        latest = records.order_by("-history_id").first()
        if latest is None:
            raise Http404
        if not self.has_view_history_or_change_history_permission(request, latest.instance):
            opts = self.model._meta
            raise PermissionDenied(
                f"Comparing versions needs the permission “Can view {opts.verbose_name}”"
                f" ({opts.app_label}.view_{opts.model_name})."
            )
        try:
            ids = sorted(int(request.GET[name]) for name in ("a", "b"))
            older, newer = (records.get(history_id=pk) for pk in ids)
        except (KeyError, ValueError, self.model.history.model.DoesNotExist) as exc:
            raise Http404("Choose two versions of this object.") from exc
        opts = self.model._meta
        context = {
            **self.admin_site.each_context(request),
            "title": f"Compare versions of {latest.instance}",
            "opts": opts,
            "object": latest.instance,
            "older": older,
            "newer": newer,
            "older_label": version_label(older),
            "newer_label": version_label(newer),
            "can_revert": not self.revert_disabled(request, latest.instance),
            "changes": history.version_diff(older, newer),
            "history_url": reverse(
                f"admin:{opts.app_label}_{opts.model_name}_history", args=[object_id]
            ),
            "version_url_name": f"admin:{opts.app_label}_{opts.model_name}_simple_history",
        }
        return TemplateResponse(request, "admin/mcp_app/history_compare.html", context)


def version_label(record: Any) -> str:
    """A version as the history pages name it: "version #7 (2026-11-26 06:00:01 UTC, by admin via
    the admin)", who made it and where; either is left out when unknown."""
    when = timezone.localtime(record.history_date).strftime("%Y-%m-%d %H:%M:%S %Z")
    who = [f"by {record.history_user}"] if record.history_user is not None else []
    source = record.history_change_reason
    if source:
        who.append(f"via {history.SOURCE_NAMES.get(source, source)}")
    details = [when, " ".join(who)] if who else [when]
    return f"version #{record.history_id} ({', '.join(details)})"


def recent_changes_view(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """Every catalog change, newest first, filterable by user and endpoint."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied(
            "Recent changes need the permission “Can view endpoint” (mcp_app.view_endpoint)."
        )
    user_id = _int_param(request, "user")
    endpoint_id = _int_param(request, "endpoint")
    changes = _seen(history.recent_changes(user_id=user_id, endpoint_id=endpoint_id), request)
    rows = [
        {
            "change": change,
            "object_url": reverse(
                f"admin:mcp_app_{change.owner_model._meta.model_name}_history",
                args=[change.owner_id],
            ),
        }
        for change in changes
    ]
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Recent catalog changes",
        "opts": model_admin.model._meta,
        "rows": rows,
        # A team member is offered those who changed their rows, not the site's users.
        "users": (
            get_user_model().objects.order_by("username")[:500]
            if teams.scope_of(request.user) is None
            else sorted(
                {change.user for change in changes if change.user is not None},
                key=lambda user: user.get_username(),
            )
        ),
        "endpoints": teams.visible(Endpoint.objects.order_by("slug"), request.user),
        "user_id": user_id,
        "endpoint_id": endpoint_id,
    }
    return TemplateResponse(request, "admin/mcp_app/recent_changes.html", context)


def _seen(changes: list[history.RecentChange], request: HttpRequest) -> list[Any]:
    """The changes of rows the user's teams see (a deleted row's are no longer anyone's
    team's: only operators of every team see them)."""
    if teams.scope_of(request.user) is None:
        return changes
    ids: dict[type[Any], set[int]] = {}
    for change in changes:
        ids.setdefault(change.owner_model, set()).add(change.owner_id)
    seen = {
        (model, pk)
        for model, pks in ids.items()
        for pk in teams.visible(
            model._default_manager.filter(pk__in=pks), request.user
        ).values_list("pk", flat=True)
    }
    return [change for change in changes if (change.owner_model, change.owner_id) in seen]


def _int_param(request: HttpRequest, name: str) -> int | None:
    value = request.GET.get(name, "")
    return int(value) if value.isdigit() else None
