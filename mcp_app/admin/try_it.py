"""The "Try it" admin page of a tool: arguments in, the tool's MCP result out.

The page parses the arguments and calls ``services.try_it.tool_try``, which runs the tool
through the protocol layer exactly as a client's ``tools/call`` and records the call; this
module only parses and renders.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.views.decorators.clickjacking import xframe_options_sameorigin

from mcp_app.admin.forms import JsonTextarea, JsonTextField
from mcp_app.models import Tool
from mcp_app.protocol.shaping import shape_tool
from mcp_app.protocol.versions import LATEST_LEGACY
from mcp_app.services.snapshots import tool_def
from mcp_app.services.try_it import TryOutcome, tool_try, tool_view

# How deep the example arguments follow nested object schemas.
EXAMPLE_DEPTH = 3
_EXAMPLE_BY_TYPE: Mapping[str, Any] = {
    "string": "",
    "integer": 0,
    "number": 0,
    "boolean": False,
    "array": [],
    "object": {},
    "null": None,
}


class TryItForm(forms.Form):
    arguments = JsonTextField(
        required=True,
        empty_json={},
        label="Arguments",
        widget=JsonTextarea(attrs={"rows": 12}),
        help_text="A JSON object, checked against the tool's input schema as a client's call is.",
    )

    def clean_arguments(self) -> Any:
        value = self.cleaned_data["arguments"]
        if not isinstance(value, dict):
            raise forms.ValidationError("The arguments must be a JSON object.")
        return value


def example_arguments(schema: Any, depth: int = 0) -> Any:
    """An example value for ``schema``: its default, example, first enum value, or by type."""
    if not isinstance(schema, Mapping):
        return None
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    examples = schema.get("examples")
    if isinstance(examples, list) and examples:
        return examples[0]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((item for item in kind if item != "null"), "null")
    properties = schema.get("properties")
    if (kind == "object" or isinstance(properties, Mapping)) and depth < EXAMPLE_DEPTH:
        if not isinstance(properties, Mapping):
            return {}
        return {
            name: example_arguments(spec, depth + 1)
            for name, spec in properties.items()
            if isinstance(spec, Mapping)
        }
    return _EXAMPLE_BY_TYPE.get(kind, None) if isinstance(kind, str) else None


def try_it_view(
    model_admin: admin.ModelAdmin, request: HttpRequest, object_id: int
) -> HttpResponse:
    """Show the arguments form; on POST run the tool and show its result."""
    # Running a tool can change things upstream: change permission, not view, is required.
    if not model_admin.has_change_permission(request):
        raise PermissionDenied
    # Through the admin's queryset: another team's tool is not found (services.teams).
    tool = get_object_or_404(model_admin.get_queryset(request), pk=object_id)
    if not model_admin.has_change_permission(request, tool):
        raise PermissionDenied(
            "Trying a tool needs the permission “Can change tool” (mcp_app.change_tool)."
        )
    outcome: TryOutcome | None = None
    if request.method == "POST":
        form = TryItForm(request.POST)
        if form.is_valid():
            outcome = tool_try(
                tool=tool, arguments=form.cleaned_data["arguments"], user_id=request.user.pk
            )
    else:
        form = TryItForm(initial={"arguments": example_arguments(tool.input_schema) or {}})
    view = tool_view(tool)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Try {tool.name}",
        "opts": model_admin.opts,
        "original": tool,
        "tool": tool,
        "form": form,
        "outcome": outcome,
        "result_json": _pretty(outcome.result) if outcome and outcome.result is not None else "",
        # Shown beside the arguments, and read by try_it.js to build a form from it.
        "input_schema": tool.input_schema,
        "input_schema_json": _pretty(tool.input_schema),
        # The tool's MCP Apps view, shown with the result as a client renders it; app_host.js
        # is the host and reads what it hands the view from "try-it-host".
        "view": view,
        "host_data": {
            "arguments": form.cleaned_data["arguments"] if outcome else {},
            "result": outcome.result if outcome else None,
            "tool": shape_tool(tool_def(tool), LATEST_LEGACY, views=True),
        }
        if view is not None
        else None,
    }
    return TemplateResponse(request, "admin/mcp_app/tool/try_it.html", context)


@xframe_options_sameorigin
def try_it_view_document(
    model_admin: admin.ModelAdmin, request: HttpRequest, object_id: int
) -> HttpResponse:
    """The HTML of the tool's view, for the try-it page's sandboxed iframe.

    Served under the CSP built from the view's ``_meta.ui``, with ``sandbox allow-scripts`` in
    it too: opened on its own, the document still runs in an opaque origin, away from the
    admin's cookies and pages.
    """
    tool = get_object_or_404(Tool, pk=object_id)
    if not model_admin.has_change_permission(request, tool):
        raise PermissionDenied
    view = tool_view(tool)
    if view is None:
        raise Http404("This tool links no view with content of its own.")
    response = HttpResponse(view.html, content_type="text/html; charset=utf-8")
    response["Content-Security-Policy"] = f"{view.csp}; sandbox allow-scripts"
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "no-store"
    return response


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)
