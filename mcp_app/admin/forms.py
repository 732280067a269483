"""Admin forms: JSON text fields with precise errors, and the tool / template / endpoint forms.

Forms parse and check input; anything spanning rows (tool names unique per endpoint) is asked of
``services.catalog``. Nothing here writes except the ModelForm's own save.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django import forms
from django.contrib.admin.widgets import FilteredSelectMultiple
from django.core.exceptions import ValidationError

from mcp_app.executors import get_executor
from mcp_app.executors.base import ConfigError
from mcp_app.executors.python import resource_functions, tool_functions
from mcp_app.executors.template import OUTPUTS
from mcp_app.models import Endpoint, ResourceTemplate, Tool
from mcp_app.models.fields import (
    default_input_schema,
    validate_input_schema,
    validate_output_schema,
)
from mcp_app.services.catalog import check_unique_tool_names, python_tool_defaults

_HINT_FIELDS = ("read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint")


# JsonTextField's empty_json default: use the model field's default (passed as ``initial``).
_MODEL_DEFAULT: Any = object()


class JsonTextarea(forms.Textarea):
    """A monospace textarea for JSON (styled by static/mcp_app/admin.css)."""

    def __init__(self, attrs: Mapping[str, Any] | None = None) -> None:
        defaults = {"class": "mcp-code", "rows": 10, "spellcheck": "false"}
        super().__init__(attrs={**defaults, **(attrs or {})})


class CodeTextarea(JsonTextarea):
    """The same monospace textarea, for template text."""


class JsonTextField(forms.JSONField):
    """JSON entered as text: exact parse errors, pretty-printed display, a per-field empty value.

    ``empty_json`` is what an empty textarea means; by default the model field's default
    ({} for config, [] for icons) or None (an optional schema). NaN and Infinity are refused:
    they are not JSON and jsonb rejects them.
    """

    widget = JsonTextarea
    # {} and [] are values to validate (an input schema of {} is wrong), not "nothing entered".
    empty_values = [None, ""]

    def __init__(self, *, empty_json: Any = _MODEL_DEFAULT, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.empty_json = empty_json

    def to_python(self, value: Any) -> Any:
        if self.disabled or not isinstance(value, str):
            return super().to_python(value)
        if not value.strip():
            return self._empty()
        try:
            return json.loads(value, parse_constant=_reject_constant)
        except json.JSONDecodeError as exc:
            raise ValidationError(
                f"{self.label}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                code="invalid",
            ) from None
        except ValueError as exc:
            raise ValidationError(f"{self.label}: {exc}", code="invalid") from None

    def validate(self, value: Any) -> None:
        # An empty object or list is a value, not "missing".
        if value is None and self.required:
            raise ValidationError(self.error_messages["required"], code="required")

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, str):  # InvalidJSONInput and raw text: show what was typed
            return value
        if value is None:
            return ""
        return json.dumps(value, indent=2, ensure_ascii=False)

    def _empty(self) -> Any:
        value = self.initial if self.empty_json is _MODEL_DEFAULT else self.empty_json
        return value() if callable(value) else value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# ModelAdmin.formfield_overrides entry for models.JSONField.
JSON_FORMFIELD = {"form_class": JsonTextField, "widget": JsonTextarea}


class ToolForm(forms.ModelForm):
    """Edits a tool; the kind's config is entered through the function / template fields."""

    function = forms.ChoiceField(
        required=False,
        help_text=(
            "Python tools: the registered function to run. Leave description and input schema "
            "empty to fill them in from the function."
        ),
    )
    template = forms.CharField(
        required=False,
        widget=CodeTextarea(attrs={"rows": 6}),
        strip=False,
        help_text=(
            "Template tools: Django template text; the arguments are the context, e.g. "
            "Hello {{ name }}!"
        ),
    )
    template_output = forms.ChoiceField(
        choices=[(output, output) for output in OUTPUTS],
        initial="text",
        required=False,
        label="Template output",
        help_text='"json" parses the rendered text into structuredContent.',
    )
    endpoints = forms.ModelMultipleChoiceField(
        queryset=Endpoint.objects.order_by("slug"),
        required=False,
        widget=FilteredSelectMultiple("endpoints", is_stacked=False),
        help_text="Endpoints that publish this tool. A name can appear once per endpoint.",
    )

    class Meta:
        model = Tool
        fields = [
            "name", "title", "description", "enabled", "kind", "input_schema", "output_schema",
            "read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint", "icons",
            "meta",
        ]  # fmt: skip
        field_classes = {
            "input_schema": JsonTextField,
            "output_schema": JsonTextField,
            "icons": JsonTextField,
            "meta": JsonTextField,
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["function"].choices = [("", "---------")] + [
            (name, f"{name}: {function.description}")
            for name, function in sorted(tool_functions().items())
        ]
        # Empty means "fill in from the python function" (or the no-argument schema).
        self.fields["input_schema"].required = False
        self.fields["input_schema"].empty_json = None
        self.fields["description"].required = False
        config = self.instance.config or {}
        if self.instance.kind == Tool.Kind.PYTHON:
            self.initial.setdefault("function", config.get("function", ""))
        elif self.instance.kind == Tool.Kind.TEMPLATE:
            self.initial.setdefault("template", config.get("template", ""))
            self.initial.setdefault("template_output", config.get("output", "text"))
        if self.instance.pk is not None:
            self.initial.setdefault("endpoints", list(self.instance.endpoints.all()))

    def clean_input_schema(self) -> Any:
        schema = self.cleaned_data["input_schema"]
        if schema is not None:  # None: filled in by clean()
            validate_input_schema(schema)
        return schema

    def clean_output_schema(self) -> Any:
        schema = self.cleaned_data["output_schema"]
        validate_output_schema(schema)
        return schema

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        kind = data.get("kind")
        if kind == Tool.Kind.PYTHON:
            self._clean_python(data)
        elif kind == Tool.Kind.TEMPLATE:
            self._clean_template(data)
        if "input_schema" in data and data["input_schema"] is None:
            data["input_schema"] = default_input_schema()
        if "description" in data and not data["description"].strip():
            self.add_error("description", "A tool needs a description.")
        self._check_name_unique(data)
        return data

    def _clean_python(self, data: dict[str, Any]) -> None:
        name = data.get("function")
        if not name:
            self.add_error("function", "Choose the python function this tool runs.")
            return
        config = {"function": name}
        if not self._config_ok(Tool.Kind.PYTHON, config, "function"):
            return
        self.instance.config = config
        defaults = python_tool_defaults(name)
        if not data.get("description", "").strip():
            data["description"] = defaults["description"]
            if not data.get("title"):
                data["title"] = defaults["title"]
            if all(data.get(hint) is None for hint in _HINT_FIELDS):
                data.update({hint: defaults[hint] for hint in _HINT_FIELDS if hint in defaults})
        if data.get("input_schema", ...) is None:
            data["input_schema"] = defaults["input_schema"]
            if data.get("output_schema") is None:
                data["output_schema"] = defaults["output_schema"]

    def _clean_template(self, data: dict[str, Any]) -> None:
        config = {
            "template": data.get("template", ""),
            "output": data.get("template_output") or "text",
        }
        if self._config_ok(Tool.Kind.TEMPLATE, config, "template"):
            self.instance.config = config

    def _config_ok(self, kind: str, config: Mapping[str, Any], field: str) -> bool:
        try:
            get_executor(kind).validate_config(config)
        except ConfigError as exc:
            self.add_error(field, exc.message)
            return False
        return True

    def _check_name_unique(self, data: Mapping[str, Any]) -> None:
        name, endpoints = data.get("name"), data.get("endpoints")
        if not name or not endpoints:
            return
        try:
            check_unique_tool_names(
                endpoint_ids=[endpoint.pk for endpoint in endpoints],
                tools=[(self.instance.pk, name)],
            )
        except ValidationError as exc:
            self.add_error("name", exc)

    def _save_m2m(self) -> None:
        super()._save_m2m()
        self.instance.endpoints.set(self.cleaned_data["endpoints"])


class ResourceTemplateForm(forms.ModelForm):
    """Edits a resource template; the resolver config comes from the function / template fields."""

    function = forms.ChoiceField(
        required=False, help_text="Python resolver: the registered resource function to call."
    )
    template = forms.CharField(
        required=False,
        strip=False,
        widget=CodeTextarea(attrs={"rows": 6}),
        help_text="Template resolver: Django template text; the URI variables are the context.",
    )

    class Meta:
        model = ResourceTemplate
        fields = [
            "uri_template", "name", "title", "description", "mime_type", "kind", "completions",
            "icons", "enabled",
        ]  # fmt: skip
        field_classes = {"completions": JsonTextField, "icons": JsonTextField}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["function"].choices = [("", "---------")] + [
            (name, f"{name}: {function.description}" if function.description else name)
            for name, function in sorted(resource_functions().items())
        ]
        config = self.instance.config or {}
        self.initial.setdefault("function", config.get("function", ""))
        self.initial.setdefault("template", config.get("template", ""))

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("kind") == ResourceTemplate.Kind.PYTHON:
            if not data.get("function"):
                self.add_error("function", "Choose the resource function that resolves URIs.")
                return data
            self.instance.config = {"function": data["function"]}
        elif data.get("kind") == ResourceTemplate.Kind.TEMPLATE:
            if not data.get("template"):
                self.add_error("template", "Enter the template text.")
                return data
            try:
                get_executor(Tool.Kind.TEMPLATE).validate_config({"template": data["template"]})
            except ConfigError as exc:
                self.add_error("template", exc.message)
                return data
            self.instance.config = {"template": data["template"]}
        return data


class EndpointForm(forms.ModelForm):
    class Meta:
        model = Endpoint
        fields = [
            "slug", "title", "description", "instructions", "enabled", "allowed_origins",
            "tools", "resources", "resource_templates", "prompts",
        ]  # fmt: skip

    def clean_tools(self) -> Any:
        tools = self.cleaned_data["tools"]
        # The full intended set: only names repeated within it can clash.
        check_unique_tool_names(endpoint_ids=(), tools=[(tool.pk, tool.name) for tool in tools])
        return tools
