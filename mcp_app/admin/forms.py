"""Admin forms: JSON text fields with precise errors; the tool, template, endpoint and
credential forms.

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
from django.utils.html import format_html
from django.utils.safestring import SafeString

from mcp_app.admin.access import ACCESS_FIELDS
from mcp_app.executors import get_executor
from mcp_app.executors.base import ConfigError
from mcp_app.executors.http import BODY_MODES, MAX_RETRIES, METHODS, undeclared_placeholders
from mcp_app.executors.python import resource_functions, tool_functions
from mcp_app.executors.template import OUTPUTS
from mcp_app.models import Credential, Endpoint, ResourceTemplate, Tool
from mcp_app.models.fields import (
    default_input_schema,
    validate_input_schema,
    validate_output_schema,
)
from mcp_app.services.catalog import check_unique_tool_names, python_tool_defaults
from mcp_app.services.credentials import credential_set_secret

_HINT_FIELDS = ("read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint")


# JsonTextField's empty_json default: use the model field's default (passed as ``initial``).
_MODEL_DEFAULT: Any = object()


class JsonTextarea(forms.Textarea):
    """A monospace textarea for JSON (styled by static/mcp_app/admin.css)."""

    def __init__(self, attrs: Mapping[str, Any] | None = None) -> None:
        defaults = {"class": "mcp-code", "rows": 10, "spellcheck": "false"}
        super().__init__(attrs={**defaults, **(attrs or {})})


class Picker(FilteredSelectMultiple):
    """The admin's two-box picker for a plain form field, beside its label.

    The admin wraps a model's many-to-many widget in a ``related-widget-wrapper``; a form
    field's widget is not, so SelectFilter2.js would put the boxes before the label (it
    prepends them to the widget's parent). The wrapper here gives the boxes their own parent.
    """

    def __init__(self, verbose_name: str) -> None:
        super().__init__(verbose_name, is_stacked=False)

    def render(self, *args: Any, **kwargs: Any) -> SafeString:
        return format_html('<div class="mcp-picker">{}</div>', super().render(*args, **kwargs))


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
    http_method = forms.ChoiceField(
        choices=[(method, method) for method in METHODS],
        initial="GET",
        required=False,
        label="HTTP method",
        help_text="GET, HEAD, PUT, DELETE and OPTIONS are retried; the others never are.",
    )
    http_url = forms.CharField(
        required=False,
        max_length=2000,
        label="URL template",
        widget=forms.TextInput(attrs={"class": "vLargeTextField"}),
        help_text=(
            "E.g. https://api.example.com/users/{user}/repos: {name} inserts the argument "
            "(percent-encoded); the scheme and host are fixed."
        ),
    )
    http_query = JsonTextField(
        required=False,
        empty_json={},
        label="Query parameters",
        widget=JsonTextarea(attrs={"rows": 3}),
        help_text='E.g. {"q": "{query}", "limit": "20"}; a parameter of an absent argument '
        "is left out.",
    )
    http_headers = JsonTextField(
        required=False,
        empty_json={},
        label="Headers",
        widget=JsonTextarea(attrs={"rows": 3}),
        help_text='E.g. {"Accept": "application/json"}. Put secrets in a credential instead.',
    )
    http_body = forms.ChoiceField(
        choices=[(mode, mode) for mode in BODY_MODES],
        initial="none",
        required=False,
        label="Body",
        help_text='"arguments": the arguments as JSON; "json": the body template; "form": the '
        "body template's fields, form-encoded.",
    )
    http_body_template = JsonTextField(
        required=False,
        empty_json=None,
        label="Body template",
        widget=JsonTextarea(attrs={"rows": 5}),
        help_text='json: a document where "{name}" is the argument\'s JSON value and other '
        'strings interpolate; form: {"field": "{name}"}.',
    )
    http_timeout = forms.FloatField(
        required=False,
        min_value=0.001,
        label="Timeout (s)",
        help_text="Per attempt; empty: MCP_HTTP_TIMEOUT_SECONDS.",
    )
    http_retries = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_RETRIES,
        label="Retries",
        help_text="On connection errors and 502/503/504, idempotent methods only.",
    )
    http_expected_status = forms.CharField(
        required=False,
        initial="2xx",
        label="Expected statuses",
        help_text="Comma separated codes or classes, e.g. 2xx, 304. Others are error results.",
    )
    http_select = forms.CharField(
        required=False,
        label="Select",
        help_text="Optional dotted path into the JSON response, e.g. data.items[0].",
    )
    http_credential = forms.ModelChoiceField(
        queryset=Credential.objects.order_by("name"),
        to_field_name="name",
        required=False,
        label="Credential",
        help_text="How the request authenticates; secrets live in Credentials.",
    )
    http_allow_hosts = forms.CharField(
        required=False,
        label="Allowed private hosts",
        help_text="Host names this tool may reach although they resolve to private or "
        "loopback addresses, comma separated.",
    )
    http_allow_networks = forms.CharField(
        required=False,
        label="Allowed private networks",
        help_text="Networks (CIDR) this tool may reach although not public, comma separated, "
        "e.g. 10.20.0.0/16.",
    )
    endpoints = forms.ModelMultipleChoiceField(
        queryset=Endpoint.objects.order_by("slug"),
        required=False,
        widget=Picker("endpoints"),
        help_text="Endpoints that publish this tool. A name can appear once per endpoint.",
    )

    class Meta:
        model = Tool
        fields = [
            "name", "title", "description", "enabled", "kind", "input_schema", "output_schema",
            "read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint", "icons",
            "meta", "capture_mode", "capture_max_bytes", "capture_redact", "execution_mode",
            "task_support", "soft_time_limit", "hard_time_limit",
            *ACCESS_FIELDS,
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
        self.fields["input_schema"].help_text = (
            'JSON Schema (2020-12 unless $schema says otherwise) with "type": "object". Empty: '
            "the python function's own schema, or no arguments."
        )
        if self.instance._state.adding and "input_schema" not in kwargs.get("initial", {}):
            # The model's default (no arguments) offered here would be saved as typed and
            # shadow a python function's own schema.
            self.initial["input_schema"] = None
        self.fields["description"].required = False
        # Omitted from a POST (a script, an older form), the call-log policy keeps its value.
        self.fields["capture_mode"].required = False
        self.fields["capture_max_bytes"].required = False
        config = self.instance.config or {}
        if self.instance.kind == Tool.Kind.PYTHON:
            self.initial.setdefault("function", config.get("function", ""))
        elif self.instance.kind == Tool.Kind.TEMPLATE:
            self.initial.setdefault("template", config.get("template", ""))
            self.initial.setdefault("template_output", config.get("output", "text"))
        elif self.instance.kind == Tool.Kind.HTTP:
            self._initial_http(config)
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
        elif kind == Tool.Kind.HTTP:
            self._clean_http(data)
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

    def _initial_http(self, config: Mapping[str, Any]) -> None:
        initial = {
            "http_method": config.get("method", "GET"),
            "http_url": config.get("url", ""),
            "http_query": config.get("query", {}),
            "http_headers": config.get("headers", {}),
            "http_body": config.get("body", "none"),
            "http_body_template": config.get("body_template"),
            "http_timeout": config.get("timeout"),
            "http_retries": config.get("retries"),
            "http_expected_status": ", ".join(
                str(item) for item in config.get("expected_status", ["2xx"])
            ),
            "http_select": config.get("select", ""),
            "http_credential": config.get("credential"),
            "http_allow_hosts": ", ".join(config.get("allow_hosts", [])),
            "http_allow_networks": ", ".join(config.get("allow_networks", [])),
        }
        for name, value in initial.items():
            self.initial.setdefault(name, value)

    def _clean_http(self, data: dict[str, Any]) -> None:
        if any(f"http_{key}" in self.errors for key in _HTTP_FIELD_KEYS):
            return  # a field did not parse: its own error says why
        if not data.get("http_url"):
            self.add_error("http_url", "Enter the URL template of the request.")
            return
        config: dict[str, Any] = {"method": data.get("http_method") or "GET"}
        config["url"] = data["http_url"]
        optional = {
            "query": data.get("http_query") or None,
            "headers": data.get("http_headers") or None,
            "body": data.get("http_body") if data.get("http_body") not in ("", "none") else None,
            "body_template": data.get("http_body_template"),
            "timeout": data.get("http_timeout"),
            "retries": data.get("http_retries"),
            "expected_status": _status_list(data.get("http_expected_status", "")),
            "select": data.get("http_select") or None,
            "credential": data["http_credential"].name if data.get("http_credential") else None,
            "allow_hosts": _split_list(data.get("http_allow_hosts", "")),
            "allow_networks": _split_list(data.get("http_allow_networks", "")),
        }
        config.update((key, value) for key, value in optional.items() if value not in (None, []))
        try:
            get_executor(Tool.Kind.HTTP).validate_config(config)
        except ConfigError as exc:
            key = next((key for key in _HTTP_FIELD_KEYS if exc.message.startswith(key)), "url")
            self.add_error(f"http_{key}", exc.message)
            return
        if not self._http_placeholders_declared(config, data.get("input_schema")):
            return
        self.instance.config = config

    def _http_placeholders_declared(
        self, config: Mapping[str, Any], schema: Mapping[str, Any] | None
    ) -> bool:
        unknown = undeclared_placeholders(config, schema)
        for key, message in unknown.items():
            self.add_error(f"http_{key}", message)
        return not unknown

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


# Config keys with a form field "http_<key>", longest first: an error message starting with a
# key belongs to that field ("body_template ..." before "body ...").
_HTTP_FIELD_KEYS = (
    "expected_status", "allow_networks", "body_template", "allow_hosts", "credential",
    "timeout", "retries", "headers", "method", "select", "query", "body", "url",
)  # fmt: skip


def _split_list(value: str) -> list[str]:
    return [item for item in value.replace(",", " ").split() if item]


def _status_list(value: str) -> list[int | str] | None:
    items = _split_list(value)
    if items == ["2xx"] or not items:
        return None  # the default
    return [int(item) if item.isdigit() else item for item in items]


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
            "icons", "enabled", *ACCESS_FIELDS,
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
            "auth_mode", "scopes", "base_scope",
        ]  # fmt: skip

    def clean_tools(self) -> Any:
        tools = self.cleaned_data["tools"]
        # The full intended set: only names repeated within it can clash.
        check_unique_tool_names(endpoint_ids=(), tools=[(tool.pk, tool.name) for tool in tools])
        return tools


class CredentialForm(forms.ModelForm):
    """Edits a credential; the secret is write-only (never rendered back, empty keeps it)."""

    secret = forms.CharField(
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=(
            "The token, password, API key or OAuth client secret. Stored encrypted and never "
            "shown again; leave empty to keep the stored one."
        ),
    )

    class Meta:
        model = Credential
        fields = [
            "name", "kind", "description", "header_name", "query_param", "username",
            "token_url", "client_id", "scopes",
        ]  # fmt: skip
        # An operator must type the scheme: a token URL is fetched with a client secret.
        field_classes = {"token_url": forms.CharField}

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        secret = data.get("secret", "")
        if secret:
            credential_set_secret(credential=self.instance, secret=secret)
        elif not self.instance.secret_encrypted:
            self.add_error("secret", "Enter the secret.")
        return data
