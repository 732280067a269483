"""Bulk work on the catalog lists (tools, resources, resource templates, prompts).

``CatalogItemAdmin`` gives each list four actions (enable, disable, add to endpoints, remove
from endpoints) and an editable Enabled column. They write through
``services.catalog_writes`` (``catalog_rows_enable``, ``catalog_rows_publish``,
``catalog_rows_unpublish``): one transaction, a history row per row changed, one
list_changed per endpoint. All or nothing, as "delete selected" is: when one selected row
cannot go live, none changes and the message names each row refused and why.

Adding to or removing from an endpoint changes what the endpoint publishes, so it needs the
change permission on endpoints as well as on the rows (the actions are hidden without it).
The endpoints are picked on an intermediate page, as Django's delete confirmation does; the
selected rows travel with it and are counted again on submit, so a tampered list changes
nothing.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from mcp_app.admin.teams import narrow_choices
from mcp_app.admin.writes import CatalogRowAdmin
from mcp_app.models import Endpoint
from mcp_app.services import history
from mcp_app.services.catalog_writes import (
    ItemRow,
    catalog_row_check,
    catalog_rows_enable,
    catalog_rows_publish,
    catalog_rows_unpublish,
)

# The permission adding to or removing from an endpoint needs besides the row's own.
ENDPOINT_PERMISSION = "mcp_app.change_endpoint"


class EnabledListForm(forms.ModelForm):
    """A row of the list with Enabled editable: switching a row on passes the write path's
    checks here, so a refusal shows on its row (switching off is never refused)."""

    def _post_clean(self) -> None:
        super()._post_clean()  # type: ignore[misc]  # ModelForm's private hook
        if self.errors or not self.has_changed() or not self.instance.enabled:
            return
        try:
            catalog_row_check(self.instance)
        except ValidationError as exc:
            self.add_error(None, f"Cannot enable {self.instance}: {' '.join(exc.messages)}")


class EndpointChoiceForm(forms.Form):
    """The intermediate page's form: which endpoints, and (adding) whether to enable too."""

    endpoints = forms.ModelMultipleChoiceField(
        queryset=Endpoint.objects.order_by("slug"),
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Choose at least one endpoint."},
    )
    enable = forms.BooleanField(required=False, label="Enable them too")


class CatalogItemAdmin(CatalogRowAdmin):
    """A catalog item's admin: the bulk actions and the editable Enabled column."""

    list_editable = ["enabled"]
    actions = ["enable_selected", "disable_selected", "publish_selected", "unpublish_selected"]

    def has_publish_permission(self, request: HttpRequest) -> bool:
        """May change the rows and what endpoints publish (the two endpoint actions)."""
        return self.has_change_permission(request) and request.user.has_perm(ENDPOINT_PERMISSION)

    def get_changelist_form(self, request: HttpRequest, **kwargs: Any) -> Any:
        kwargs.setdefault("form", EnabledListForm)
        return super().get_changelist_form(request, **kwargs)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if isinstance(form, EnabledListForm):
            catalog_rows_enable(
                [obj], enabled=obj.enabled, actor=request.user, source=history.ADMIN
            )
            return
        super().save_model(request, obj, form, change)

    @admin.action(description="Enable selected %(verbose_name_plural)s", permissions=["change"])
    def enable_selected(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._enable(request, queryset, enabled=True)

    @admin.action(description="Disable selected %(verbose_name_plural)s", permissions=["change"])
    def disable_selected(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._enable(request, queryset, enabled=False)

    @admin.action(
        description="Add selected %(verbose_name_plural)s to endpoints…",
        permissions=["publish"],  # Django needs any one of those listed: this one says both
    )
    def publish_selected(self, request: HttpRequest, queryset: QuerySet[Any]) -> Any:
        return self._endpoints_page(request, queryset, publish=True)

    @admin.action(
        description="Remove selected %(verbose_name_plural)s from endpoints…",
        permissions=["publish"],  # Django needs any one of those listed: this one says both
    )
    def unpublish_selected(self, request: HttpRequest, queryset: QuerySet[Any]) -> Any:
        return self._endpoints_page(request, queryset, publish=False)

    def _enable(self, request: HttpRequest, queryset: QuerySet[Any], *, enabled: bool) -> None:
        rows = self._selected_rows(request, queryset)
        if rows is None:
            return
        verb = "enabled" if enabled else "disabled"
        try:
            changed = catalog_rows_enable(
                rows, enabled=enabled, actor=request.user, source=history.ADMIN
            )
        except ValidationError as exc:
            self._refused(request, "enabled", exc)
            return
        self.message_user(
            request, f"{len(changed)} of {len(rows)} {self._plural(rows)} {verb}.", messages.SUCCESS
        )

    def _endpoints_page(
        self, request: HttpRequest, queryset: QuerySet[Any], *, publish: bool
    ) -> HttpResponse | None:
        rows = self._selected_rows(request, queryset)
        if rows is None:
            return None
        form = EndpointChoiceForm(request.POST if request.POST.get("post") == "yes" else None)
        narrow_choices(form, request.user)
        if not publish:
            del form.fields["enable"]
        if form.is_bound and form.is_valid():
            self._apply_endpoints(request, rows, form.cleaned_data, publish=publish)
            return None
        action = "publish_selected" if publish else "unpublish_selected"
        context = {
            **self.admin_site.each_context(request),
            "title": f"{'Add' if publish else 'Remove'} {len(rows)} {self._plural(rows)} "
            f"{'to' if publish else 'from'} endpoints",
            "opts": self.opts,
            "rows": rows,
            "form": form,
            "action": action,
            "publish": publish,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/mcp_app/bulk_endpoints.html", context)

    def _apply_endpoints(
        self, request: HttpRequest, rows: list[ItemRow], data: dict[str, Any], *, publish: bool
    ) -> None:
        endpoints = list(data["endpoints"])
        slugs = ", ".join(endpoint.slug for endpoint in endpoints)
        try:
            if publish:
                catalog_rows_publish(
                    rows,
                    endpoints=endpoints,
                    enable=data.get("enable", False),
                    actor=request.user,
                    source=history.ADMIN,
                )
            else:
                catalog_rows_unpublish(
                    rows, endpoints=endpoints, actor=request.user, source=history.ADMIN
                )
        except ValidationError as exc:
            self._refused(request, "added" if publish else "removed", exc)
            return
        if publish:
            done = "enabled and added to" if data.get("enable") else "added to"
        else:
            done = "removed from"
        self.message_user(
            request, f"{len(rows)} {self._plural(rows)} {done} {slugs}.", messages.SUCCESS
        )

    def _selected_rows(self, request: HttpRequest, queryset: QuerySet[Any]) -> list[Any] | None:
        """The rows the action acts on, or None (said to the user) when the posted selection
        names rows that are not there: a stale page or a tampered list."""
        if request.POST.get("select_across") == "1":
            return list(queryset)
        rows = list(queryset)
        if len(rows) != len(set(request.POST.getlist(helpers.ACTION_CHECKBOX_NAME))):
            self._stale_selection(request)
            return None
        return rows

    def _refused(self, request: HttpRequest, verb: str, exc: ValidationError) -> None:
        self.message_user(
            request,
            f"Nothing was {verb}: {' '.join(exc.messages)}",
            messages.ERROR,
        )

    def _plural(self, rows: list[Any]) -> str:
        return str(self.opts.verbose_name if len(rows) == 1 else self.opts.verbose_name_plural)
