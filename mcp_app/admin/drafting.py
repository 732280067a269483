""" "Save as draft" on the change forms of endpoints, tools, resources, templates and prompts,
and the review rule on their Save.

The button submits the form like Save: it is validated as usual (the write path's checks
included), but nothing is saved; instead the change becomes a draft (``services/drafts.py``),
and the user lands on the draft's page. The draft's document is the row's live entry
(``catalog_io``'s format) with the values the form changes laid over it: plain fields by name,
the endpoints as slugs, the allowed groups and the team by name; a new row's entry is made
from the form's values. On an endpoint's form, a change of what it publishes is a change of
its items' ``endpoints``, so each item added or removed is in the draft too.

A prompt's arguments and messages (its inlines) are in the draft too: the inline forms are
validated as for Save, and the draft's entry lists the arguments and messages they leave (in
position order, a message's stored file carried as the document carries files), so an edit
of them is drafted, approved and published like the prompt's own fields. An invalid inline
makes no draft: the form comes back with its error. Other inlines (none today) are refused
with "Save as draft".

A row of an endpoint that requires review is changed only through an approved draft: its
Save (and an edit of its row in the list) is refused with the review message as the form's
error, and its deletion is listed as refused on the delete page (the write path would refuse
them too, as a server error); its page says so above the form.
"""

from __future__ import annotations

import base64
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models, transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html

from mcp_app.models import (
    Draft,
    Endpoint,
    Prompt,
    PromptArgument,
    PromptMessage,
    Resource,
    ResourceTemplate,
    Tool,
)
from mcp_app.services import review, teams
from mcp_app.services.catalog_io import (
    ARGUMENT_FIELDS,
    ENDPOINT_FIELDS,
    FORMAT,
    MESSAGE_FIELDS,
    PROMPT_FIELDS,
    RESOURCE_FIELDS,
    TEMPLATE_FIELDS,
    TOOL_FIELDS,
    catalog_entries,
    file_entry,
)
from mcp_app.services.drafts import DraftError, draft_create
from mcp_app.services.icons import icon_store

# The name of the change form's "Save as draft" button.
SAVE_AS_DRAFT = "_save_draft"
ADD_DRAFT = "mcp_app.add_draft"
# Request attribute holding the draft the form was saved as.
_DRAFT = "_mcp_saved_draft"
# Request attribute holding the inline formsets of the form being saved as a draft.
_FORMSETS = "_mcp_draft_formsets"
# A prompt's inlines a draft takes: the part's model -> its key in the entry, its fields.
_PARTS: dict[type[models.Model], tuple[str, tuple[str, ...]]] = {
    PromptArgument: ("arguments", ARGUMENT_FIELDS),
    PromptMessage: ("messages", MESSAGE_FIELDS),
}

# Model -> (document section, natural key, plain fields).
_SECTIONS: dict[type[models.Model], tuple[str, str, tuple[str, ...]]] = {
    Endpoint: ("endpoints", "slug", ENDPOINT_FIELDS),
    Tool: ("tools", "name", TOOL_FIELDS),
    Resource: ("resources", "uri", RESOURCE_FIELDS),
    ResourceTemplate: ("resource_templates", "uri_template", TEMPLATE_FIELDS),
    Prompt: ("prompts", "name", PROMPT_FIELDS),
}
# An endpoint form's membership fields -> the item model.
_MEMBERS: dict[str, type[models.Model]] = {
    "tools": Tool,
    "resources": Resource,
    "resource_templates": ResourceTemplate,
    "prompts": Prompt,
}
PROMPT_NOTE = (
    "A draft takes the prompt's own fields and access, and its arguments and messages as "
    "edited below."
)
INLINES_NOTE = "A draft covers this form's own fields: change the rows below with Save."


def is_drafting(request: HttpRequest) -> bool:
    return request.method == "POST" and SAVE_AS_DRAFT in request.POST


class DraftableAdmin:
    """Mixin (first among the bases) for the admins whose rows can be saved as drafts."""

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        context = {**self._draft_context(request, object_id), **(extra_context or {})}
        if not is_drafting(request):
            return super().changeform_view(request, object_id, form_url, context)  # type: ignore[misc]
        if not request.user.has_perm(ADD_DRAFT):
            raise PermissionDenied("Saving a draft needs the permission “Can add draft”.")
        # The draft is made while the form is checked; when the page comes back with an
        # error (an inline's, say) instead of going to the draft, it is undone.
        with transaction.atomic():
            response: HttpResponse = super().changeform_view(  # type: ignore[misc]
                request, object_id, form_url, context
            )
            if request.__dict__.get(_DRAFT) is None or response.status_code != 302:
                transaction.set_rollback(True)
        return response

    def _draft_context(self, request: HttpRequest, object_id: str | None) -> dict[str, Any]:
        context: dict[str, Any] = {"draftable": request.user.has_perm(ADD_DRAFT)}
        if self.model is Prompt:  # type: ignore[attr-defined]
            context["draft_note"] = PROMPT_NOTE
        row = self.get_object(request, unquote(object_id)) if object_id else None  # type: ignore[attr-defined]
        if row is not None and (slugs := review.reviewed_slugs(row)):
            context["review_banner"] = (
                f"Endpoint {', '.join(slugs)} requires review: changes to this "
                f"{row._meta.verbose_name} go through drafts. Use “Save as draft”, and have "
                "another user approve the draft before it is published."
            )
        return context

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form_class = super().get_form(request, obj, change, **kwargs)  # type: ignore[misc]
        if request.method != "POST":
            return form_class
        drafting = is_drafting(request)

        class DraftableForm(form_class):  # type: ignore[misc,valid-type]  # made per request
            def _post_clean(self) -> None:
                super()._post_clean()
                if self.errors:
                    return
                if drafting:
                    _save_as_draft(self, request)
                else:
                    _check_review(self, request.user)

        DraftableForm.__name__ = DraftableForm.__qualname__ = form_class.__name__
        return DraftableForm

    def get_changelist_form(self, request: HttpRequest, **kwargs: Any) -> Any:
        form_class = super().get_changelist_form(request, **kwargs)  # type: ignore[misc]
        user = request.user

        class ReviewedListForm(form_class):  # type: ignore[misc,valid-type]  # made per request
            """A list row's edit (Enabled) refused on a reviewed endpoint's row, on its row."""

            def _post_clean(self) -> None:
                super()._post_clean()
                if self.errors or not self.has_changed():
                    return
                try:
                    review.check_may_change(self.instance, user)
                except ValidationError as exc:
                    self.add_error(None, f"Cannot change {self.instance}: {' '.join(exc.messages)}")

        ReviewedListForm.__name__ = ReviewedListForm.__qualname__ = form_class.__name__
        return ReviewedListForm

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)  # type: ignore[misc]
        # Listed as protected, Django's delete page and "delete selected" delete none of them.
        reviewed = [
            f"{row._meta.verbose_name.capitalize()} “{row}”: {review.review_message(slugs)}"
            for row in objs
            if (slugs := review.reviewed_slugs(row))
        ]
        return deleted, counts, perms_needed, [*protected, *reviewed]

    def get_formsets_with_inlines(self, request: HttpRequest, obj: Any = None) -> Any:
        for formset, inline in super().get_formsets_with_inlines(request, obj):  # type: ignore[misc]
            if is_drafting(request) and formset.model not in _PARTS:
                formset = _unchanged_inlines(formset)
            yield formset, inline

    def _create_formsets(self, request: HttpRequest, obj: Any, change: bool) -> Any:
        # Made before the form is checked: its check reads them to draft a prompt's parts.
        formsets, inlines = super()._create_formsets(request, obj, change)  # type: ignore[misc]
        if is_drafting(request):
            request.__dict__[_FORMSETS] = formsets
        return formsets, inlines

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if _DRAFT not in request.__dict__:
            super().save_model(request, obj, form, change)  # type: ignore[misc]

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        if _DRAFT not in request.__dict__:
            super().save_related(request, form, formsets, change)  # type: ignore[misc]

    def construct_change_message(
        self, request: HttpRequest, form: Any, formsets: Any, add: bool = False
    ) -> Any:
        if _DRAFT in request.__dict__:
            return []  # nothing was saved: the inlines hold no saved objects to name
        return super().construct_change_message(request, form, formsets, add)  # type: ignore[misc]

    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        if _DRAFT not in request.__dict__:
            return super().log_addition(request, obj, message)  # type: ignore[misc]
        return None

    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        if _DRAFT not in request.__dict__:
            return super().log_change(request, obj, message)  # type: ignore[misc]
        return None

    def response_add(self, request: HttpRequest, obj: Any, *args: Any) -> HttpResponse:
        if (draft := request.__dict__.get(_DRAFT)) is not None:
            return _to_draft(request, draft)
        return super().response_add(request, obj, *args)  # type: ignore[misc]

    def response_change(self, request: HttpRequest, obj: Any) -> HttpResponse:
        if (draft := request.__dict__.get(_DRAFT)) is not None:
            return _to_draft(request, draft)
        return super().response_change(request, obj)  # type: ignore[misc]


def _unchanged_inlines(formset_class: Any) -> Any:
    """``formset_class`` refusing a change: a draft holds the form's row only."""

    class DraftFormSet(formset_class):  # made per request
        def clean(self) -> None:
            super().clean()
            if self.has_changed():
                raise ValidationError(INLINES_NOTE)

    DraftFormSet.__name__ = DraftFormSet.__qualname__ = formset_class.__name__
    return DraftFormSet


def _to_draft(request: HttpRequest, draft: Draft) -> HttpResponse:
    url = reverse("admin:mcp_app_draft_change", args=[draft.pk])
    messages.success(
        request,
        format_html(
            'Saved as <a href="{}">draft #{}</a>: nothing is live until it is published.',
            url,
            draft.pk,
        ),
    )
    return HttpResponseRedirect(url)


def _check_review(form: forms.ModelForm, user: Any) -> None:
    """The review rule, as the form's error: the write path would refuse the save."""
    endpoints = form.cleaned_data.get("endpoints") if "endpoints" in form.fields else None
    try:
        review.check_may_change(
            form.instance, user, endpoint_ids=[endpoint.pk for endpoint in endpoints or ()]
        )
    except ValidationError as exc:
        form.add_error(None, exc.messages)


def _save_as_draft(form: forms.ModelForm, request: HttpRequest) -> None:
    """Make the draft of the change ``form`` (valid) holds; its refusals become the form's
    errors."""
    user = request.user
    formsets = [fs for fs in request.__dict__.get(_FORMSETS, ()) if fs.model in _PARTS]
    if not all([formset.is_valid() for formset in formsets]):  # each checked, errors shown
        return  # no draft: the page comes back with the inlines' errors
    try:
        parts = {_PARTS[formset.model][0]: _parts(formset) for formset in formsets}
        document, label = form_document(form, user=user, parts=parts)
        if (icon := getattr(form, "uploaded_icon", None)) is not None:
            icon_store(icon=icon)  # the draft's icons name it, as a saved row's would
        request.__dict__[_DRAFT] = draft_create(title=label, document=document, actor=user)
    except ValidationError as exc:
        form.add_error(None, exc.messages)
    except DraftError as exc:
        form.add_error(None, [f"The draft was not saved: {message}" for message in exc.messages])
    except PermissionDenied as exc:
        form.add_error(None, f"The draft was not saved: {exc}")


def _parts(formset: Any) -> list[dict[str, Any]]:
    """The arguments or messages a prompt's valid inline ``formset`` leaves, in the order
    the prompt lists them (position, then the older row first), as a document lists them."""
    deleted = set(formset.deleted_forms) if formset.can_delete else set()
    kept = [
        (index, form)
        for index, form in enumerate(formset.forms)
        if form not in deleted and (form.instance.pk is not None or form.has_changed())
    ]

    def order(item: tuple[int, Any]) -> tuple[int, int, int]:
        index, form = item
        pk = form.instance.pk
        return (form.instance.position or 0, 0 if pk is not None else 1, pk or index)

    _key, names = _PARTS[formset.model]
    parts = []
    for _index, form in sorted(kept, key=order):
        part = {name: getattr(form.instance, name) for name in names}
        if formset.model is PromptMessage:
            if "file" in form.changed_data:
                part["file"] = _file_entry(form.cleaned_data.get("file"))
            else:
                part["file"] = file_entry(form.instance.file)
        parts.append(part)
    return parts


def form_document(
    form: forms.ModelForm, *, user: Any, parts: dict[str, list[dict[str, Any]]] | None = None
) -> tuple[dict[str, Any], str]:
    """The catalog document of the change ``form`` (valid) makes, and a title for it;
    ``parts``: a prompt's arguments and messages as its inlines leave them.

    Raises:
        ValidationError: the change cannot be a draft (a rename: entries are found by key).
    """
    row = form.instance
    section, key, _fields = _SECTIONS[type(row)]
    new_key = str(getattr(row, key))
    stored = type(row)._default_manager.filter(pk=row.pk).first() if row.pk else None
    if stored is not None and getattr(stored, key) != new_key:
        raise ValidationError(
            {
                key: f"A draft cannot change the {key}: a draft finds its rows by it. "
                "Rename with Save."
            }
        )
    live = _live_entry_of(stored, user) if stored is not None else None
    entry = _entry_from_form(form, live, parts or {})
    document: dict[str, Any] = {"format": FORMAT}
    if live is None or entry != live:
        document[section] = [entry]
    if isinstance(row, Endpoint):
        for name, model in _MEMBERS.items():
            if name in form.fields and name in form.cleaned_data:
                members = _membership_entries(stored, new_key, name, form.cleaned_data[name], user)
                if members:
                    document.setdefault(_SECTIONS[model][0], []).extend(members)
    noun = row._meta.verbose_name
    label = f"Edit {noun} {new_key}" if stored is not None else f"New {noun} {new_key}"
    return document, label


def _entry_from_form(
    form: forms.ModelForm, live: dict[str, Any] | None, parts: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """``live`` (None: a new row) with the values the form (and ``parts``) change over it."""
    row = form.instance
    data = form.cleaned_data
    _section, key, fields = _SECTIONS[type(row)]
    values: dict[str, Any] = {key: getattr(row, key)}
    values.update((name, getattr(row, name)) for name in fields)
    values["team"] = row.team.name if getattr(row, "team_id", None) else None
    if not isinstance(row, (Tool, Endpoint)):
        values["upstream"] = row.upstream.name if row.upstream_id else None
    if "allowed_groups" in form.fields and "allowed_groups" in data:
        values["allowed_groups"] = sorted(group.name for group in data["allowed_groups"])
    if "endpoints" in form.fields and "endpoints" in data:
        values["endpoints"] = sorted(endpoint.slug for endpoint in data["endpoints"])
    if isinstance(row, Resource) and ("file" in form.changed_data or live is None):
        values["file"] = _file_entry(data.get("file"))
    values.update(parts)
    if live is None:
        return values
    entry = dict(live)
    entry.update((name, value) for name, value in values.items() if live.get(name) != value)
    return entry


def _file_entry(upload: Any) -> dict[str, str] | None:
    """An uploaded file as a document carries it (False: cleared, None: none)."""
    if not upload:
        return None
    upload.seek(0)
    return {
        "name": str(upload.name).rsplit("/", 1)[-1],
        "base64": base64.b64encode(upload.read()).decode("ascii"),
    }


def _membership_entries(
    endpoint: Endpoint | None, slug: str, name: str, chosen: Any, user: Any
) -> list[dict[str, Any]]:
    """The entries of the items an endpoint's form adds to or removes from its ``name``
    relation: their live entries with ``slug`` added to or taken from their endpoints."""
    now = set(chosen)
    before = set(teams.visible(getattr(endpoint, name).all(), user)) if endpoint else set()
    entries = []
    for item in sorted(now ^ before, key=lambda item: item.pk):
        live = _live_entry_of(item, user)
        if live is None:
            continue
        slugs = set(live["endpoints"])
        slugs = slugs | {slug} if item in now else slugs - {slug}
        entries.append({**live, "endpoints": sorted(slugs)})
    return entries


def _live_entry_of(row: models.Model, user: Any) -> dict[str, Any] | None:
    """The live entry of ``row`` (a tool name on several endpoints: this tool's)."""
    section, key, _fields = _SECTIONS[type(row)]
    entries = catalog_entries({section: [str(getattr(row, key))]}, user=user).get(section, [])
    if len(entries) > 1 and isinstance(row, Tool):
        slugs = sorted(teams.visible(row.endpoints.all(), user).values_list("slug", flat=True))
        entries = [entry for entry in entries if entry["endpoints"] == slugs]
    return entries[0] if len(entries) == 1 else None
