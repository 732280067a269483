"""The "Import from OpenAPI" admin page: a document in, HTTP tools out (disabled drafts, or
enabled and published in the same step).

Two steps on one page. "Read" parses the uploaded or pasted document and lists its operations;
"Import" re-reads the same document (carried back as text, so the server keeps no state
between the steps) and creates a tool per ticked operation, on the chosen endpoints (which
needs the change permission on endpoints) and enabled if asked, through
``services.openapi.openapi_tools_create``. Conversion rules live in that service; this module
only parses the form and renders.
"""

from __future__ import annotations

import contextlib
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from mcp_app.admin.bulk import ENDPOINT_PERMISSION
from mcp_app.admin.forms import Picker
from mcp_app.admin.teams import narrow_choices
from mcp_app.models import Credential, Endpoint, Tool
from mcp_app.services.openapi import (
    MAX_DOCUMENT_BYTES,
    OpenApiDocument,
    OpenApiError,
    openapi_base_url,
    openapi_fetch,
    openapi_parse_text,
    openapi_read,
    openapi_tools_create,
)


def _split_list(value: str) -> list[str]:
    return [item for item in value.replace(",", " ").split() if item]


class OperationsField(forms.MultipleChoiceField):
    """Operation keys; checked against the document in the form's ``clean()``, since the
    choices exist only once the document is read."""

    widget = forms.CheckboxSelectMultiple

    def valid_value(self, value: str) -> bool:
        return True


class OpenApiImportForm(forms.Form):
    """The document (file or text) and, once read, which operations to import and where."""

    document_file = forms.FileField(
        required=False,
        label="OpenAPI file",
        help_text="An OpenAPI 3.0 or 3.1 document, JSON or YAML.",
    )
    document_url = forms.URLField(
        required=False,
        assume_scheme="https",
        label="or its URL",
        widget=forms.URLInput(attrs={"class": "vLargeTextField"}),
        help_text="Fetched once, through the same address checks as HTTP tools "
        "(private addresses only where MCP_HTTP_ALLOWED_NETWORKS allows).",
    )
    document_text = forms.CharField(
        required=False,
        strip=False,
        label="or paste the document",
        widget=forms.Textarea(attrs={"class": "mcp-code", "rows": 12, "spellcheck": "false"}),
    )
    operations = OperationsField(required=False, label="Operations to import")
    endpoints = forms.ModelMultipleChoiceField(
        queryset=Endpoint.objects.order_by("slug"),
        required=False,
        widget=Picker("endpoints"),
        help_text="Endpoints that will publish the drafts once enabled. Names are made unique "
        "on them.",
    )
    enable = forms.BooleanField(
        required=False,
        label="Create them enabled",
        help_text="Otherwise they are disabled drafts, for review. Enabled and published on "
        "the endpoints above, clients can call them at once.",
    )
    base_url = forms.CharField(
        required=False,
        max_length=2000,
        label="Base URL",
        widget=forms.TextInput(attrs={"class": "vLargeTextField"}),
        help_text="Empty: the document's first server URL.",
    )
    credential = forms.ModelChoiceField(
        queryset=Credential.objects.order_by("name"),
        to_field_name="name",
        required=False,
        help_text="How the requests authenticate; secrets live in Credentials.",
    )
    allow_hosts = forms.CharField(
        required=False,
        label="Allowed private hosts",
        help_text="Host names the tools may reach although private, comma separated.",
    )
    allow_networks = forms.CharField(
        required=False,
        label="Allowed private networks",
        help_text="Networks (CIDR) the tools may reach although not public, comma separated.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.document: OpenApiDocument | None = None

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        upload = data.get("document_file")
        try:
            if upload is not None:
                if upload.size > MAX_DOCUMENT_BYTES:
                    raise OpenApiError(f"The file is larger than {MAX_DOCUMENT_BYTES:,} bytes.")
                raw = upload.read()
                text = raw.decode("utf-8-sig", errors="replace")
                parsed = openapi_parse_text(raw)
            elif data.get("document_url") and not data.get("document_text", "").strip():
                raw = openapi_fetch(data["document_url"])
                text = raw.decode("utf-8-sig", errors="replace")
                parsed = openapi_parse_text(raw)
            else:
                text = data.get("document_text", "")
                if not text.strip():
                    raise OpenApiError("Upload an OpenAPI file, give its URL or paste it.")
                parsed = openapi_parse_text(text)
            self.document = openapi_read(parsed)
        except OpenApiError as exc:
            raise ValidationError(exc.message, code="invalid_document") from None
        # The import step posts the document back as text.
        data["document_text"] = text
        operations = self.fields["operations"]
        assert isinstance(operations, forms.ChoiceField)  # declared above
        operations.choices = operation_choices(self.document)
        if unknown := [
            key for key in data.get("operations", []) if not self.document.operation(key)
        ]:
            self.add_error("operations", f"The document has no operation {unknown[0]}.")
        return data


def operation_choices(document: OpenApiDocument) -> list[tuple[str, str]]:
    return [
        (operation.key, f"{operation.key}: {operation.summary or operation.description}")
        for operation in document.operations
    ]


def openapi_import_view(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """Read a document and list its operations; import the ticked ones as disabled drafts."""
    if not model_admin.has_add_permission(request):
        raise PermissionDenied(
            "Importing an OpenAPI document needs the permission “Can add tool” (mcp_app.add_tool)."
        )
    form = OpenApiImportForm(
        request.POST if request.method == "POST" else None,
        request.FILES if request.method == "POST" else None,
    )
    narrow_choices(form, request.user)
    importing = request.method == "POST" and "_import" in request.POST
    if form.is_valid() and importing:
        created = _import(form, request)
        if created is not None:
            tools = f"tool{'s' if len(created) != 1 else ''}"
            names = ", ".join(tool.name for tool in created)
            enabled = form.cleaned_data.get("enable", False)
            messages.success(
                request,
                f"Created {len(created)} enabled {tools}: {names}."
                if enabled
                else f"Created {len(created)} disabled draft {tools}: {names}. "
                "Review and enable them.",
            )
            changelist = reverse("admin:mcp_app_tool_changelist")
            return HttpResponseRedirect(f"{changelist}?enabled__exact={int(enabled)}")
    document = form.document
    if document is not None and not importing:
        # Read step: tick everything, and show the server the drafts will call.
        form = _second_step(form, document, request.user)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Import tools from OpenAPI",
        "opts": model_admin.opts,
        "form": form,
        "document": document,
        "media": model_admin.media + form.media,
    }
    return TemplateResponse(request, "admin/mcp_app/tool/openapi_import.html", context)


def _second_step(
    form: OpenApiImportForm, document: OpenApiDocument, user: Any
) -> OpenApiImportForm:
    """A fresh form for the import step, every operation ticked, the document as text."""
    initial = {
        "document_text": form.cleaned_data["document_text"],
        "operations": [operation.key for operation in document.operations],
        "base_url": form.cleaned_data.get("base_url", ""),
    }
    # Without a usable server the operator types one; the import step reports it if not.
    with contextlib.suppress(OpenApiError):
        initial["base_url"] = openapi_base_url(document, initial["base_url"])
    fresh = OpenApiImportForm(initial=initial)
    narrow_choices(fresh, user)
    fresh.document = document
    operations = fresh.fields["operations"]
    assert isinstance(operations, forms.ChoiceField)  # declared on the form
    operations.choices = operation_choices(document)
    return fresh


def _import(form: OpenApiImportForm, request: HttpRequest) -> list[Tool] | None:
    """Create the drafts, or put the reason on the form and return None (nothing created)."""
    data = form.cleaned_data
    document = form.document
    assert document is not None  # set by a valid form's clean()
    if not data["operations"]:
        form.add_error("operations", "Tick at least one operation to import.")
        return None
    if data.get("endpoints") and not request.user.has_perm(ENDPOINT_PERMISSION):
        # Publishing changes what the endpoints serve, as the list's "add to endpoints" does.
        form.add_error(
            "endpoints", f"Publishing on endpoints needs the permission {ENDPOINT_PERMISSION}."
        )
        return None
    credential = data.get("credential")
    try:
        return openapi_tools_create(
            document=document,
            keys=data["operations"],
            endpoints=list(data.get("endpoints") or []),
            base_url=data.get("base_url", ""),
            credential=credential.name if credential is not None else None,
            allow_hosts=_split_list(data.get("allow_hosts", "")),
            allow_networks=_split_list(data.get("allow_networks", "")),
            enabled=data.get("enable", False),
            actor=request.user,
        )
    except OpenApiError as exc:
        form.add_error(None, exc.message)
    except ValidationError as exc:
        # A draft failed the tool's own checks (an allow-list entry, say).
        for message in exc.messages:
            form.add_error(None, f"Nothing was imported: {message}")
    return None
