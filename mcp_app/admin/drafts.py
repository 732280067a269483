"""Drafts in the admin: the list, and each draft's page with its diff and its buttons.

A draft's page shows every entry it changes beside the live row, field by field (JSON
pretty-printed, long text wrapped), with the conflicts a publish would stop on and the fields
changed live since; its title and (for power users) its whole document, as YAML or JSON text,
are edited there. Check, Approve, Publish and Discard are each a POST of the page's form that
calls ``services/drafts.py`` once; the service's messages (a rule a live save would break, a
conflict, a missing permission) are reported through the messages framework, and nothing
changes on an error. The list publishes several drafts together, as one change set.

Drafts are made from a row's change form ("Save as draft", ``admin/drafting.py``), the API or
``mcp_import --as-draft``; the admin has no add page for them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from mcp_app.admin.selection import CheckedSelectionAdmin
from mcp_app.admin.teams import TeamScopedAdmin
from mcp_app.models import Draft, Endpoint, Prompt, Resource, ResourceTemplate, Tool
from mcp_app.services import teams
from mcp_app.services.catalog_io import (
    CatalogFormatError,
    ImportReport,
    catalog_dump,
    catalog_parse,
)
from mcp_app.services.drafts import (
    APPROVE,
    DraftError,
    EntryDiff,
    draft_approve,
    draft_check,
    draft_diff,
    draft_discard,
    draft_update,
    drafts_publish,
)

# The buttons of a draft's page: the POSTed "action" -> whether it changes the draft (needs
# the change permission on drafts; Approve's own permission is the service's to check, and
# Check is a dry run anyone who sees the draft may run, validating it as its author).
ACTIONS = {"save": True, "check": False, "publish": True, "discard": True, "approve": False}
# Each section's model, for links from an entry to its row.
_MODELS = {
    "endpoints": (Endpoint, "slug"),
    "tools": (Tool, "name"),
    "resources": (Resource, "uri"),
    "resource_templates": (ResourceTemplate, "uri_template"),
    "prompts": (Prompt, "name"),
}


@dataclass(frozen=True)
class FieldRow:
    """One changed field as the page shows it: both values as text."""

    name: str
    live: str | None  # None: the row does not exist live yet
    draft: str
    conflict: bool


@admin.register(Draft)
class DraftAdmin(TeamScopedAdmin, CheckedSelectionAdmin):
    list_display = ["title", "status", "author", "endpoint_list", "approval", "updated_at"]
    list_filter = ["status", "endpoints"]
    list_select_related = ["author", "approved_by"]
    search_fields = ["title"]
    actions = ["publish_together"]

    class Media:
        css = {"all": ["mcp_app/admin.css"]}

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # made from a row's form, the API or an import, never empty

    def has_delete_permission(self, request: HttpRequest, obj: Draft | None = None) -> bool:
        # A published draft is what history rows name ("draft #7"); an unwanted one is
        # discarded, and stays to say so.
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Draft]:
        return super().get_queryset(request).prefetch_related("endpoints")

    @admin.display(description="endpoints")
    def endpoint_list(self, draft: Draft) -> str:
        return ", ".join(endpoint.slug for endpoint in draft.endpoints.all()) or "-"

    @admin.display(description="approved")
    def approval(self, draft: Draft) -> str:
        if draft.approved_by is None:
            return "-"
        if not draft.approved:
            return f"withdrawn: edited after {draft.approved_by} approved it"
        return f"by {draft.approved_by}"

    @admin.action(description="Publish selected drafts together", permissions=["change"])
    def publish_together(self, request: HttpRequest, queryset: QuerySet[Draft]) -> None:
        drafts = list(queryset)
        try:
            report = drafts_publish(drafts, actor=request.user)
        except (DraftError, PermissionDenied) as exc:
            _report_refusal(request, "Nothing was published", exc)
            return
        names = ", ".join(f"#{draft.pk}" for draft in drafts)
        messages.success(
            request, f"Drafts {names} published together: {_changes(report) or 'no change'}."
        )

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """The draft's page; a POST runs one of its buttons (``ACTIONS``) and comes back."""
        draft = self._draft_or_404(request, object_id)
        if not self.has_view_or_change_permission(request, draft):
            raise PermissionDenied("Opening a draft needs the permission “Can view draft”.")
        if request.method != "POST":
            return self._page(request, draft, extra_context)
        action = request.POST.get("action", "")
        if action not in ACTIONS:
            raise Http404("No such button.")
        if ACTIONS[action] and not self.has_change_permission(request, draft):
            raise PermissionDenied(
                "Changing or publishing a draft needs the permission “Can change draft”."
            )
        if action == "save":
            return self._save(request, draft, extra_context)
        self._run(request, draft, action)
        return HttpResponseRedirect(request.path)

    def _draft_or_404(self, request: HttpRequest, object_id: str) -> Draft:
        # Another team's draft is "not found", as a missing one.
        if not object_id.isascii() or not object_id.isdigit() or len(object_id) > 18:
            raise Http404
        draft = self.get_queryset(request).filter(pk=int(object_id)).first()
        if draft is None:
            raise Http404(f"No draft #{object_id} here.")
        return draft

    def _run(self, request: HttpRequest, draft: Draft, action: str) -> None:
        user = request.user
        try:
            if action == "check":
                report = draft_check(draft, actor=user)
                changes = _changes(report)
                messages.info(
                    request,
                    f"Publishing now would: {changes}."
                    if changes
                    else "Publishing now would "
                    "change nothing: the live rows already match the draft.",
                )
            elif action == "approve":
                draft_approve(draft, actor=user)
                messages.success(request, f"You approved draft #{draft.pk} as it stands.")
            elif action == "publish":
                report = drafts_publish([draft], actor=user)
                messages.success(
                    request, f"Draft #{draft.pk} published: {_changes(report) or 'no change'}."
                )
            else:
                draft_discard(draft, actor=user)
                messages.success(request, f"Draft #{draft.pk} discarded.")
        except (DraftError, PermissionDenied) as exc:
            _report_refusal(request, _REFUSED[action], exc)

    def _save(
        self, request: HttpRequest, draft: Draft, extra_context: dict[str, Any] | None
    ) -> HttpResponse:
        """The title and, when its text was edited, the document (YAML or JSON)."""
        title = request.POST.get("title", "")
        text = request.POST.get("document", "")
        document = None
        if text.strip() and text != _document_text(draft):
            try:
                document = catalog_parse(text)
            except CatalogFormatError as exc:
                messages.error(request, f"The draft was not saved: {exc}")
                return self._page(request, draft, extra_context, title=title, text=text)
        try:
            draft_update(draft, actor=request.user, title=title, document=document)
        except (DraftError, PermissionDenied) as exc:
            _report_refusal(request, "The draft was not saved", exc)
            draft.refresh_from_db()
            return self._page(request, draft, extra_context, title=title, text=text)
        withdrawn = (
            " Its approval is withdrawn: it changed." if document and draft.approved_by else ""
        )
        messages.success(request, f"Draft #{draft.pk} saved.{withdrawn}")
        return HttpResponseRedirect(request.path)

    def _page(
        self,
        request: HttpRequest,
        draft: Draft,
        extra_context: dict[str, Any] | None,
        *,
        title: str | None = None,
        text: str | None = None,
    ) -> HttpResponse:
        user = request.user
        is_open = draft.status == Draft.Status.OPEN
        can_change = is_open and self.has_change_permission(request, draft)
        diffs = draft_diff(draft, user=user) if is_open else []
        context = {
            **self.admin_site.each_context(request),
            "title": f"Draft #{draft.pk}: {draft.title}",
            "opts": self.opts,
            "original": draft,
            "draft": draft,
            "is_open": is_open,
            "entries": [_entry(diff, user) for diff in diffs],
            "conflicts": any(diff.conflicts for diff in diffs),
            "can_change": can_change,
            "can_approve": (
                is_open
                and user.has_perm(APPROVE)
                and draft.author_id != user.pk
                and not draft.approved
            ),
            "reviewed": sorted(
                draft.endpoints.filter(require_review=True).values_list("slug", flat=True)
            ),
            "title_value": draft.title if title is None else title,
            "document_text": _document_text(draft) if text is None else text,
            "document_open": text is not None,  # shown again with what was typed
            "replay_url": _replay_url(draft),
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/mcp_app/draft/draft.html", context)


_REFUSED = {
    "check": "Publishing now would be refused",
    "approve": "The draft was not approved",
    "publish": "Nothing was published",
    "discard": "The draft was not discarded",
}


def _report_refusal(request: HttpRequest, lead: str, exc: Exception) -> None:
    """The service's messages, one each (a DraftError's list, a PermissionDenied's text)."""
    found = exc.messages if isinstance(exc, DraftError) else [str(exc) or "Permission denied."]
    messages.error(request, f"{lead}:")
    for message in found:
        messages.error(request, message)


def _changes(report: ImportReport) -> str:
    return "; ".join(str(change) for change in report.changes)


def _document_text(draft: Draft) -> str:
    return catalog_dump(draft.document, fmt="yaml")


def _replay_url(draft: Draft) -> str:
    """The draft's replay page (``audit/replay.py``): its recorded calls run against it."""
    return reverse("mcp_app:replay", args=[draft.pk])


def _entry(diff: EntryDiff, user: Any) -> dict[str, Any]:
    return {
        "label": diff.label,
        "action": diff.action,
        "problem": diff.problem,
        "changed_live": diff.changed_live,
        "conflicts": diff.conflicts,
        "url": _row_url(diff.section, diff.key, user),
        "fields": [
            FieldRow(
                name=change.name,
                live=None if diff.action == "create" else shown(change.live),
                draft=shown(change.draft),
                conflict=change.conflict,
            )
            for change in diff.fields
        ],
    }


def shown(value: Any) -> str:
    """A field's value as text: a string as it is, anything else as indented JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


def _row_url(section: str, key: str, user: Any) -> str | None:
    """The admin page of the live row an entry changes, when there is exactly one."""
    model, field = _MODELS[section]
    rows = list(teams.visible(model._default_manager.filter(**{field: key}), user)[:2])
    if len(rows) != 1:
        return None
    opts = model._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[rows[0].pk])
