"""Admin forms: the tool (composed with its kind's fields), template, endpoint and credential
forms, and the JSON text field setting for models' JSON columns.

Forms parse and check input; the rules of catalog rows (a tool's defaults, what its config
names, tool names unique per endpoint) are asked of ``services.catalog_writes``, through which
the catalog admins save (``admin/writes.py``).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson
from django import forms
from django.contrib.admin.widgets import FilteredSelectMultiple
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.forms.fields import InvalidJSONInput
from django.utils.html import format_html
from django.utils.safestring import SafeString

from mcp_app.admin.access import ACCESS_FIELDS
from mcp_app.admin.icons import IconRowForm
from mcp_app.executors import get_executor, get_executors
from mcp_app.executors.base import ConfigFormError, CredentialChoiceField, Executor
from mcp_app.executors.forms import JsonTextarea, JsonTextField
from mcp_app.executors.resource_kinds import get_resolver, get_resolvers
from mcp_app.models import Credential, Endpoint, ResourceTemplate, Tool
from mcp_app.models.fields import validate_input_schema, validate_output_schema
from mcp_app.protocol.storable import is_storable_text, unstorable_path
from mcp_app.services.catalog_writes import tool_values
from mcp_app.services.credentials import credential_set_secret


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


# How deep a JSON field's value may nest: the API's bound (docs/api.md, Limits), where the
# request body's own object is the first of 64 levels.
MAX_JSON_DEPTH: Final = 63
UNSTORABLE_MESSAGE: Final = (
    "Holds a NUL character or an unpaired surrogate, which this server cannot store."
)
TOO_DEEP_MESSAGE: Final = f"Objects and arrays are nested deeper than {MAX_JSON_DEPTH} levels."


def refuse_hostile(value: Any, *, json_text: bool = False) -> None:
    """Refuse a submitted value PostgreSQL cannot store (NUL, an unpaired surrogate) or, for
    a JSON field's text, JSON nested deeper than ``MAX_JSON_DEPTH`` (``json.loads`` and the
    schema checks recurse: 10,000 levels would raise RecursionError, a 500).

    Raises:
        ValidationError: what is wrong, as the field's error.
    """
    texts = value if isinstance(value, list | tuple) else [value]
    if any(isinstance(text, str) and not is_storable_text(text) for text in texts):
        raise ValidationError(UNSTORABLE_MESSAGE, code="unstorable")
    if not json_text or not isinstance(value, str) or not value.strip():
        return
    try:
        parsed = orjson.loads(value)  # iterative: never runs out of stack
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):
            raise ValidationError(TOO_DEEP_MESSAGE, code="too_deep") from None
        if "surrogate" in str(exc):
            raise ValidationError(UNSTORABLE_MESSAGE, code="unstorable") from None
        return  # the field's own parse reports it, with line and column
    if unstorable_path(parsed, "") is not None:
        raise ValidationError(UNSTORABLE_MESSAGE, code="unstorable")
    if _nesting(parsed) > MAX_JSON_DEPTH:
        raise ValidationError(TOO_DEEP_MESSAGE, code="too_deep")


def _nesting(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            stack.extend(
                (item, depth + 1) for item in (node.values() if isinstance(node, dict) else node)
            )
    return deepest


class StorableJsonTextField(JsonTextField):
    """``JsonTextField`` refusing what ``refuse_hostile`` refuses, for the admins that take
    the field through ``JSON_FORMFIELD``."""

    def to_python(self, value: Any) -> Any:
        if not self.disabled:
            refuse_hostile(value, json_text=True)
        return super().to_python(value)

    def bound_data(self, data: Any, initial: Any) -> Any:
        return _shown_back(super().bound_data, data, initial)


# ModelAdmin.formfield_overrides entry for models.JSONField.
JSON_FORMFIELD = {"form_class": StorableJsonTextField, "widget": JsonTextarea}


class StorableInputForm(forms.BaseForm):
    """Every field (a kind's config fields too) refuses hostile values (``refuse_hostile``)
    before its own cleaning, so none reaches a parser, a schema check or the database."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            guard_field(field)


def guard_field(field: forms.Field) -> None:
    """Make ``field`` (this form instance's own copy) refuse what ``refuse_hostile`` refuses."""
    json_text = isinstance(field, forms.JSONField)
    field.clean = _guarded(field.clean, json_text=json_text)  # type: ignore[method-assign]
    if json_text:
        # A form with errors shows what was typed, which the field parses again.
        field.bound_data = functools.partial(_shown_back, field.bound_data)  # type: ignore[method-assign]


def _guarded(clean: Callable[..., Any], *, json_text: bool) -> Callable[..., Any]:
    def guarded_clean(value: Any, *args: Any) -> Any:  # a FileField's also takes the initial
        refuse_hostile(value, json_text=json_text)
        return clean(value, *args)

    return guarded_clean


def _shown_back(bound_data: Callable[[Any, Any], Any], data: Any, initial: Any) -> Any:
    """A JSON field's submitted text as the form shows it back: hostile text as typed,
    never parsed again (which would recurse, or render a lone surrogate)."""
    try:
        refuse_hostile(data, json_text=True)
    except ValidationError:
        return InvalidJSONInput(data)
    return bound_data(data, initial)


class ToolForm(StorableInputForm, IconRowForm):
    """Edits a tool; the kind's config is entered through the fields its executor supplies.

    Each executor's ``config_form`` fields are added to this form (``kind_config_fields``),
    marked with their kind for static/mcp_app/tool_form.js, which shows only the chosen kind's;
    the executor turns them into the row's config (``config_from_form``).
    """

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
        # Set by clean() when the kind's fields did not make a config.
        self._config_incomplete = False
        self._add_kind_fields()
        # Empty means "fill in from the python function" (or the no-argument schema).
        input_schema = self.fields["input_schema"]
        assert isinstance(input_schema, JsonTextField)  # Meta.field_classes
        input_schema.required = False
        input_schema.empty_json = None
        input_schema.help_text = (
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
        executor = get_executors().get(self.instance.kind)
        if executor is not None:
            for name, value in executor.form_initial(self.instance.config or {}).items():
                self.initial.setdefault(name, value)
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
        super().clean()
        data = self.cleaned_data
        executor = get_executors().get(data.get("kind", ""))
        if executor is not None:
            self._clean_config(executor, data)
        # Fields left empty take what the config declares (a python function's).
        given = {name: data[name] for name in self._meta.fields or () if name in data}
        data.update(tool_values(tool=self.instance, data={**given, "config": self.instance.config}))
        data.pop("config", None)
        return data

    def _add_kind_fields(self) -> None:
        for kind, names in kind_config_fields().items():
            form_class = get_executor(kind).config_form
            assert form_class is not None  # kind_config_fields lists only kinds with a form
            for name in names:
                field = copy.deepcopy(form_class.base_fields[name])
                field.widget.attrs["data-tool-kind"] = kind
                if isinstance(field, CredentialChoiceField):
                    field.choices = _credential_choices
                self.fields[name] = field

    def _clean_config(self, executor: Executor[Any], data: dict[str, Any]) -> None:
        names = kind_config_fields().get(executor.kind, [])
        if any(name in self.errors for name in names):
            self._config_incomplete = True
            return  # a field did not parse: its own error says why
        fields = {name: data.get(name) for name in names if name in data}
        try:
            config = executor.config_from_form(fields, data.get("input_schema"))
        except ConfigFormError as exc:
            for name, message in exc.errors.items():
                self.add_error(name, message)
            self._config_incomplete = True
            return
        self.instance.config = config

    def _post_clean(self) -> None:
        super()._post_clean()
        # A kind whose config declares Tool fields (a python function's description) fills an
        # empty description once its config is right: until then, the config's error is the
        # one to fix, and "A tool needs a description" would ask for what it will supply.
        executor = get_executors().get(self.cleaned_data.get("kind", ""))
        if (
            self._config_incomplete
            and executor is not None
            and type(executor).tool_defaults is not Executor.tool_defaults
            and not (self.cleaned_data.get("description") or "").strip()
        ):
            self.errors.pop("description", None)


def _config_fields(
    registry: Mapping[str, Any], form: type[forms.ModelForm[Any]], role: str, form_name: str
) -> dict[str, list[str]]:
    """The names of each kind's config fields in ``registry`` (executors or resolvers: their
    ``config_form``), for a kind form of ``form``.

    Raises:
        ImproperlyConfigured: two kinds, or a kind and ``form``, use one field name.
    """
    taken = set(form.base_fields)
    fields: dict[str, list[str]] = {}
    for kind, implementation in registry.items():
        if implementation.config_form is None:
            continue
        names = list(implementation.config_form.base_fields)
        if clash := taken.intersection(names):
            raise ImproperlyConfigured(
                f"The {kind} {role}'s form fields {sorted(clash)} are already in the {form_name}."
            )
        taken.update(names)
        fields[kind] = names
    return fields


def kind_config_fields() -> dict[str, list[str]]:
    """Return the names of each tool kind's config fields (its executor's ``config_form``).

    Raises:
        ImproperlyConfigured: two kinds, or a kind and the tool form, use one field name.
    """
    return _config_fields(get_executors(), ToolForm, "executor", "tool form")


def _credential_choices() -> list[tuple[str, str]]:
    return [("", "---------")] + [
        (credential.name, str(credential)) for credential in Credential.objects.order_by("name")
    ]


class ResourceTemplateForm(StorableInputForm, IconRowForm):
    """Edits a resource template; the kind's config is entered through the fields its resolver
    supplies.

    As ``ToolForm`` does with executors: each resolver's ``config_form`` fields are added
    (``template_kind_config_fields``), marked with their kind for static/mcp_app/tool_form.js,
    and the chosen kind's resolver turns them into the row's config (``config_from_form``).
    """

    class Meta:
        model = ResourceTemplate
        fields = [
            "uri_template", "name", "title", "description", "mime_type", "kind", "upstream",
            "remote_uri_template", "completions", "icons", "enabled", *ACCESS_FIELDS,
        ]  # fmt: skip
        field_classes = {"completions": JsonTextField, "icons": JsonTextField}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for kind, names in template_kind_config_fields().items():
            form_class = get_resolver(kind).config_form
            assert form_class is not None  # template_kind_config_fields lists only those
            for name in names:
                field = copy.deepcopy(form_class.base_fields[name])
                field.widget.attrs["data-tool-kind"] = kind
                guard_field(field)  # added after StorableInputForm guarded the others
                self.fields[name] = field
        resolver = get_resolvers().get(self.instance.kind)
        if resolver is not None:
            for name, value in resolver.form_initial(self.instance.config or {}).items():
                self.initial.setdefault(name, value)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        resolver = get_resolvers().get(data.get("kind", ""))
        if resolver is None:
            return data
        names = template_kind_config_fields().get(resolver.kind, [])
        if any(name in self.errors for name in names):
            return data  # a field did not parse: its own error says why
        try:
            self.instance.config = resolver.config_from_form(
                {name: data.get(name) for name in names if name in data}
            )
        except ConfigFormError as exc:
            for name, message in exc.errors.items():
                self.add_error(name, message)
        return data


def template_kind_config_fields() -> dict[str, list[str]]:
    """Return the names of each resource-template kind's config fields (its resolver's
    ``config_form``).

    Raises:
        ImproperlyConfigured: two kinds, or a kind and the template form, use one field name.
    """
    return _config_fields(
        get_resolvers(), ResourceTemplateForm, "resolver", "resource template form"
    )


class EndpointForm(StorableInputForm, IconRowForm):
    class Meta:
        model = Endpoint
        fields = [
            "slug", "title", "description", "instructions", "enabled", "listed", "icons",
            "allowed_origins", "tools", "resources", "resource_templates", "prompts",
            "auth_mode", "scopes", "base_scope", "require_review",
        ]  # fmt: skip
        field_classes = {"icons": JsonTextField}


class CredentialForm(StorableInputForm, forms.ModelForm):
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
        super().clean()
        data = self.cleaned_data
        secret = data.get("secret", "")
        if secret:
            credential_set_secret(credential=self.instance, secret=secret)
        elif not self.instance.secret_encrypted:
            self.add_error("secret", "Enter the secret.")
        return data
