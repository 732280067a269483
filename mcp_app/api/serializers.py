"""Serializers: rows as JSON, validated by the models' own checks (``full_clean``).

Catalog rows name their endpoints by slug and their groups by name. Catalog rows (endpoints,
tools, resources, templates, prompts) are checked and written by the one write path,
``services.catalog_writes``, which the admin and catalog import use too; the other rows run
the model's ``full_clean()`` here.
"""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models, transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.relations import ManyRelatedField, RelatedField

from mcp_app.api.errors import django_errors
from mcp_app.api.parsers import TOO_DEEP_MESSAGE, check_value, loads
from mcp_app.auth.clients import client_names
from mcp_app.conf import get_conf
from mcp_app.models import (
    BackgroundCall,
    CallLog,
    Credential,
    Endpoint,
    Policy,
    Prompt,
    PromptArgument,
    PromptMessage,
    Resource,
    ResourceTemplate,
    Session,
    Tool,
    Upstream,
)
from mcp_app.services import history, teams
from mcp_app.services.calllog.capture import as_captured
from mcp_app.services.catalog_io import CatalogFormatError, catalog_parse
from mcp_app.services.catalog_writes import (
    catalog_row_check,
    catalog_row_save,
    prompt_messages_check,
    prompt_parts_set,
    tool_values,
)
from mcp_app.services.credentials import credential_set_secret
from mcp_app.services.icons import icon_check, public_icons, stored_icons
from mcp_app.services.policies.writes import policy_check, policy_save
from mcp_app.services.row_writes import setting_row_save

ACCESS_FIELDS = ["required_scope", "allowed_groups"]
_M2M = ("endpoints", "allowed_groups", "tools", "resources", "resource_templates", "prompts")


def _full_clean(instance: Any, attrs: Mapping[str, Any], exclude: list[str] | None = None) -> None:
    for name, value in attrs.items():
        if name not in _M2M and name not in ("arguments", "messages", "secret"):
            setattr(instance, name, value)
    try:
        instance.full_clean(exclude=exclude)
    except DjangoValidationError as exc:
        raise serializers.ValidationError(django_errors(exc)) from None


class CheckedJSONField(serializers.JSONField):
    """A JSON field whose value may come as a form field's text (the browsable API's forms):
    that text is read as JSON bodies are (``parsers.loads``: bounded nesting, no NUL), where
    DRF's ``json.loads`` would recurse itself out of stack on deep nesting."""

    def to_internal_value(self, data: Any) -> Any:
        if getattr(data, "is_json_string", False):
            try:
                return loads(str(data))
            except ParseError:
                self.fail("invalid")
        return super().to_internal_value(data)


@extend_schema_field(
    {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "src": {"type": "string"},
                "mimeType": {"type": "string"},
                "sizes": {"type": "array", "items": {"type": "string"}},
                "theme": {"type": "string", "enum": ["light", "dark"]},
            },
            "required": ["src"],
        },
    }
)
class IconsField(CheckedJSONField):
    """A row's ``icons``: read as clients get them (an uploaded icon's URL under the site's
    public base URL), written as links; this site's icon URLs come back to their paths."""

    def to_representation(self, value: Any) -> Any:
        return list(public_icons(value)) if isinstance(value, list) else value

    def to_internal_value(self, data: Any) -> Any:
        return stored_icons(super().to_internal_value(data))


class IconUploadSerializer(serializers.Serializer[Any]):
    """An icon's bytes, base64 in JSON (``POST icons/``); checked as an admin upload is."""

    base64 = serializers.CharField(help_text="The image file, base64-encoded.")
    filename = serializers.CharField(
        required=False, default="", help_text="Its name; the extension must match the bytes."
    )
    theme = serializers.ChoiceField(choices=["", "light", "dark"], required=False, default="")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        limit = get_conf().MCP_MAX_ICON_BYTES
        text = attrs["base64"]
        if len(text) > limit * 4 // 3 + 4:  # refused before it is decoded
            raise serializers.ValidationError(
                {"base64": [f"The icon is larger than the {limit} bytes allowed."]}
            )
        try:
            data = base64.b64decode(text, validate=True)
        except (ValueError, binascii.Error):
            raise serializers.ValidationError({"base64": ["Not valid base64."]}) from None
        try:
            attrs["icon"] = icon_check(data, filename=attrs["filename"])
        except DjangoValidationError as exc:
            raise serializers.ValidationError({"base64": exc.messages}) from None
        return attrs


@extend_schema_field(OpenApiTypes.OBJECT)
class JsonObjectField(CheckedJSONField):
    """A JSON object (a whole document): anything else, null included, is refused."""

    def to_internal_value(self, data: Any) -> Any:
        return _json_object(super().to_internal_value(data))


@functools.cache
def _strict_text(field_class: type[serializers.CharField]) -> type[serializers.CharField]:
    """``field_class`` refusing a number where text is expected.

    DRF's text fields turn ``0`` into ``"0"``: a client sending the wrong type (a number for
    ``scopes``) would have it stored as text instead of hearing about it. Form input is
    always text, so the browsable API is unaffected.
    """

    class StrictText(field_class):  # type: ignore[misc, valid-type]  # a class given at run time
        def to_internal_value(self, data: Any) -> Any:
            if isinstance(data, int | float):  # bool is an int, and refused as ever
                self.fail("invalid")
            return super().to_internal_value(data)

    StrictText.__name__ = StrictText.__qualname__ = f"Strict{field_class.__name__}"
    return StrictText


class TeamScopedFieldsMixin:
    """Related fields offer only the rows the user's teams see (``services.teams``): naming
    another team's endpoint, credential or upstream fails as naming a missing one does, and
    ``team`` and ``allowed_groups`` take the user's teams."""

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields: dict[str, serializers.Field[Any, Any, Any, Any]] = super().get_fields()  # type: ignore[misc]
        request = self.context.get("request")  # type: ignore[attr-defined]
        user = request.user if request is not None else None
        for name, field in fields.items():
            related = field.child_relation if isinstance(field, ManyRelatedField) else field
            if not isinstance(related, RelatedField):
                continue
            queryset = related.get_queryset()
            if queryset is None:
                continue
            # The stubs type ``queryset`` as a Manager, which mypy reads as a descriptor.
            if name in ("team", "allowed_groups"):
                related.queryset = teams.team_choices(user)  # type: ignore[arg-type]
            elif teams.is_scoped(queryset.model):
                related.queryset = teams.visible(queryset, user)  # type: ignore[arg-type]
        return fields


def _team_field() -> serializers.SlugRelatedField[Any]:
    return serializers.SlugRelatedField(
        slug_field="name",
        queryset=Group.objects.all(),
        allow_null=True,
        required=False,
        help_text=(
            "The team (group name) that manages this row; null: site-wide. A team member's "
            "new row without one is their team's (when they are in one team)."
        ),
    )


class ModelCheckedSerializer(TeamScopedFieldsMixin, serializers.ModelSerializer[Any]):
    """Runs the model's ``full_clean()`` on a copy of the row with the new values."""

    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.JSONField: CheckedJSONField,
    }

    def build_standard_field(
        self, field_name: str, model_field: Any
    ) -> tuple[type, dict[str, Any]]:
        field_class, field_kwargs = super().build_standard_field(field_name, model_field)
        if field_name == "icons":
            field_class = IconsField
        if issubclass(field_class, serializers.CharField):
            # A class is hashable (the stubs' Field defines __eq__ without __hash__).
            field_class = _strict_text(field_class)  # type: ignore[arg-type]
        return field_class, field_kwargs

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        model: Any = self.Meta.model  # the subclass's
        instance = model() if self.instance is None else model.objects.get(pk=self.instance.pk)
        _full_clean(instance, attrs)
        self.checked = instance
        return attrs


class CatalogRowSerializer(ModelCheckedSerializer):
    """A catalog row, checked (``catalog_row_check``) and saved (``catalog_row_save``) by the
    write path, as the API's user."""

    team = _team_field()

    def row_values(self, row: Any, attrs: Mapping[str, Any]) -> Mapping[str, Any]:
        """The row's field values to set from ``attrs`` (a tool's are completed)."""
        return attrs

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        model: Any = self.Meta.model  # the subclass's
        row = model() if self.instance is None else model.objects.get(pk=self.instance.pk)
        for name, value in self.row_values(row, attrs).items():
            if name not in _M2M and name not in ("arguments", "messages"):
                setattr(row, name, value)
        try:
            catalog_row_check(row, relations=_relations(attrs))
        except DjangoValidationError as exc:
            raise serializers.ValidationError(django_errors(exc)) from None
        self.checked = row
        return attrs

    def create(self, validated_data: dict[str, Any]) -> Any:
        return self._save(validated_data)

    def update(self, instance: Any, validated_data: dict[str, Any]) -> Any:
        return self._save(validated_data)

    def _save(self, validated_data: Mapping[str, Any]) -> Any:
        row = self.checked
        try:
            catalog_row_save(
                row,
                relations=_relations(validated_data),
                actor=self.context["request"].user,
                source=history.API,
            )
        except DjangoValidationError as exc:
            raise serializers.ValidationError(django_errors(exc)) from None
        return row


def _relations(attrs: Mapping[str, Any]) -> dict[str, list[Any]]:
    return {name: list(attrs[name]) for name in _M2M if name in attrs}


class CatalogItemSerializer(CatalogRowSerializer):
    endpoints = serializers.SlugRelatedField(
        many=True, slug_field="slug", queryset=Endpoint.objects.all(), required=False
    )
    allowed_groups = serializers.SlugRelatedField(
        many=True, slug_field="name", queryset=Group.objects.all(), required=False
    )


class EndpointSerializer(CatalogRowSerializer):
    tools: serializers.SlugRelatedField[Tool] = serializers.SlugRelatedField(
        many=True, slug_field="name", read_only=True
    )
    resources: serializers.SlugRelatedField[Resource] = serializers.SlugRelatedField(
        many=True, slug_field="uri", read_only=True
    )
    resource_templates: serializers.SlugRelatedField[ResourceTemplate] = (
        serializers.SlugRelatedField(many=True, slug_field="uri_template", read_only=True)
    )
    prompts: serializers.SlugRelatedField[Prompt] = serializers.SlugRelatedField(
        many=True, slug_field="name", read_only=True
    )
    url = serializers.CharField(source="public_url", read_only=True)

    class Meta:
        model = Endpoint
        fields = [
            "id", "slug", "team", "title", "description", "instructions", "enabled", "listed",
            "icons",
            "allowed_origins", "auth_mode", "scopes", "base_scope", "require_review",
            "catalog_version", "url", "tools", "resources", "resource_templates", "prompts",
            "created_at", "updated_at",
        ]  # fmt: skip
        read_only_fields = ["catalog_version", "created_at", "updated_at"]


class ToolSerializer(CatalogItemSerializer):
    class Meta:
        model = Tool
        fields = [
            "id", "name", "team", "title", "description", "enabled", "kind", "config",
            "input_schema",
            "output_schema", "read_only_hint", "destructive_hint", "idempotent_hint",
            "open_world_hint", "icons", "meta", "capture_mode", "capture_max_bytes",
            "capture_redact", "execution_mode", "task_support", "soft_time_limit",
            "hard_time_limit", "ui_resource_uri", *ACCESS_FIELDS, "endpoints", "created_at",
            "updated_at",
        ]  # fmt: skip
        read_only_fields = ["created_at", "updated_at"]
        extra_kwargs = {"description": {"required": False}}

    def row_values(self, row: Any, attrs: Mapping[str, Any]) -> Mapping[str, Any]:
        return tool_values(tool=row, data=attrs)


def _upstream_field() -> serializers.SlugRelatedField[Any]:
    return serializers.SlugRelatedField(
        slug_field="name",
        queryset=Upstream.objects.all(),
        allow_null=True,
        required=False,
        help_text="The upstream MCP server this is read from (its name), or null.",
    )


class ResourceSerializer(CatalogItemSerializer):
    upstream = _upstream_field()

    class Meta:
        model = Resource
        fields = [
            "id", "uri", "name", "team", "title", "description", "mime_type", "text", "file",
            "size", "upstream", "remote_uri", "icons", "ui_meta", "enabled", *ACCESS_FIELDS,
            "endpoints",
            "created_at", "updated_at",
        ]  # fmt: skip
        read_only_fields = ["size", "created_at", "updated_at"]


class ResourceTemplateSerializer(CatalogItemSerializer):
    upstream = _upstream_field()

    class Meta:
        model = ResourceTemplate
        fields = [
            "id", "uri_template", "name", "team", "title", "description", "mime_type", "kind",
            "config",
            "upstream", "remote_uri_template", "completions", "icons", "enabled",
            *ACCESS_FIELDS, "endpoints", "created_at", "updated_at",
        ]  # fmt: skip
        read_only_fields = ["created_at", "updated_at"]


class PromptArgumentSerializer(serializers.ModelSerializer[PromptArgument]):
    class Meta:
        model = PromptArgument
        fields = ["name", "title", "description", "required", "completion_values"]


class PromptMessageSerializer(serializers.ModelSerializer[PromptMessage]):
    # Files are uploaded in the admin or carried by an import file; here they are read-only.
    file = serializers.FileField(read_only=True)

    class Meta:
        model = PromptMessage
        fields = ["role", "kind", "text", "file", "mime_type", "uri", "name"]


class PromptSerializer(CatalogItemSerializer):
    arguments = PromptArgumentSerializer(many=True, required=False)
    messages = PromptMessageSerializer(many=True, required=False)
    upstream = _upstream_field()

    class Meta:
        model = Prompt
        fields = [
            "id", "name", "team", "title", "description", "icons", "enabled", "arguments",
            "messages",
            "upstream", "remote_name", *ACCESS_FIELDS, "endpoints", "created_at", "updated_at",
        ]  # fmt: skip
        read_only_fields = ["created_at", "updated_at"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        errors: dict[str, Any] = {}
        prompt: Prompt = self.checked
        messages = attrs.get("messages")
        if messages is None and self.instance is not None:
            messages = list(self.instance.messages.all())
        try:
            prompt_messages_check(prompt, messages or [])
        except DjangoValidationError as exc:
            errors["messages"] = exc.messages
        for key, model in (("arguments", PromptArgument), ("messages", PromptMessage)):
            items = []
            for position, values in enumerate(attrs.get(key) or ()):
                part = model(position=position, **values)
                try:
                    part.full_clean(exclude=["prompt"])
                except DjangoValidationError as exc:
                    items.append(django_errors(exc))
                else:
                    items.append({})
            if any(items):
                errors[key] = items
        if errors:
            raise serializers.ValidationError(errors)
        return attrs

    def create(self, validated_data: dict[str, Any]) -> Prompt:
        parts = {key: validated_data.pop(key, None) for key in ("arguments", "messages")}
        with transaction.atomic():
            prompt: Prompt = super().create(validated_data)
            self._write_parts(prompt, parts)
        return prompt

    def update(self, instance: Prompt, validated_data: dict[str, Any]) -> Prompt:
        parts = {key: validated_data.pop(key, None) for key in ("arguments", "messages")}
        with transaction.atomic():
            prompt: Prompt = super().update(instance, validated_data)
            self._write_parts(prompt, parts)
        return prompt

    def _write_parts(self, prompt: Prompt, parts: Mapping[str, Any]) -> None:
        # A list given replaces the prompt's list; an omitted one is kept.
        prompt_parts_set(
            prompt,
            arguments=_parts(PromptArgument, parts["arguments"]),
            messages=_parts(PromptMessage, parts["messages"]),
            actor=self.context["request"].user,
            source=history.API,
        )


def _parts(model: type[Any], items: Any) -> list[Any] | None:
    return None if items is None else [model(**values) for values in items]


class SettingRowSerializer(ModelCheckedSerializer):
    """An upstream or a credential: checked here, then saved through the write path
    (``setting_row_save``) as the API's user."""

    def create(self, validated_data: dict[str, Any]) -> Any:
        return self._save(validated_data)

    def update(self, instance: Any, validated_data: dict[str, Any]) -> Any:
        return self._save(validated_data)

    def _save(self, validated_data: Mapping[str, Any]) -> Any:
        row = self.checked
        try:
            setting_row_save(
                row,
                actor=self.context["request"].user,
                source=history.API,
            )
        except DjangoValidationError as exc:
            raise serializers.ValidationError(django_errors(exc)) from None
        return row


class CredentialSerializer(SettingRowSerializer):
    team = _team_field()
    secret = serializers.CharField(
        write_only=True,
        required=False,
        trim_whitespace=False,
        style={"input_type": "password"},
        help_text="Stored encrypted, never returned; omit it on update to keep the stored one.",
    )
    has_secret = serializers.BooleanField(read_only=True)

    class Meta:
        model = Credential
        fields = [
            "id", "name", "team", "kind", "description", "header_name", "query_param", "username",
            "token_url", "client_id", "scopes", "secret", "has_secret", "created_at",
            "updated_at",
        ]  # fmt: skip
        read_only_fields = ["created_at", "updated_at"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        secret = attrs.get("secret", "")
        if not secret and self.instance is None:
            raise serializers.ValidationError({"secret": ["Enter the secret."]})
        row = Credential() if self.instance is None else Credential.objects.get(pk=self.instance.pk)
        if secret:
            credential_set_secret(credential=row, secret=secret)  # stored encrypted, never echoed
        _full_clean(row, attrs)
        self.checked = row
        return attrs


class PolicySerializer(ModelCheckedSerializer):
    """A policy around an endpoint's calls: checked by its kind (``policy_check``) and saved
    through the write path (``policy_save``) as the API's user."""

    endpoint = serializers.SlugRelatedField(
        slug_field="slug", queryset=Endpoint.objects.all(), help_text="The endpoint's slug."
    )

    class Meta:
        model = Policy
        fields = [
            "id", "endpoint", "name", "kind", "mode", "position", "target", "config",
            "created_at", "updated_at",
        ]  # fmt: skip
        read_only_fields = ["created_at", "updated_at"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        row = Policy() if self.instance is None else Policy.objects.get(pk=self.instance.pk)
        for name, value in attrs.items():
            setattr(row, name, value)
        try:
            policy_check(row)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(django_errors(exc)) from None
        self.checked = row
        return attrs

    def create(self, validated_data: dict[str, Any]) -> Any:
        return self._save()

    def update(self, instance: Any, validated_data: dict[str, Any]) -> Any:
        return self._save()

    def _save(self) -> Policy:
        row: Policy = self.checked
        try:
            policy_save(row, actor=self.context["request"].user, source=history.API)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(django_errors(exc)) from None
        return row


class UpstreamSerializer(SettingRowSerializer):
    team = _team_field()
    credential = serializers.SlugRelatedField(
        slug_field="name",
        queryset=Credential.objects.all(),
        allow_null=True,
        required=False,
        help_text="The credential sent to the upstream (its name), or null.",
    )

    class Meta:
        model = Upstream
        fields = [
            "id", "name", "team", "description", "transport", "url", "credential", "stdio_server",
            "stdio_args", "stdio_cwd", "stdio_env", "connect_timeout", "call_timeout",
            "allow_networks", "enabled", "failure_threshold", "cooldown_seconds",
            "stateless", "session_idle_seconds", "max_sessions",
            "probe_interval_seconds", "probe_timeout", "unhealthy_threshold",
            "last_success_at", "last_error", "last_error_at", "protocol_version",
            "consecutive_failures", "circuit_open_until", "tools_changed_at", "tools_synced_at",
            "tools_out_of_sync", "probe_state", "last_probe_at", "probe_failures",
            "sync_policy", "tools_fingerprint", "auth_mode", "oauth_client_id", "oauth_scopes",
            "forward_headers", "created_at", "updated_at",
        ]  # fmt: skip
        # Health and breaker state are the site's observations, not settings.
        read_only_fields = [
            "last_success_at", "last_error", "last_error_at", "protocol_version",
            "consecutive_failures", "circuit_open_until", "tools_changed_at", "tools_synced_at",
            "tools_out_of_sync", "probe_state", "last_probe_at", "probe_failures",
            "tools_fingerprint", "created_at", "updated_at",
        ]  # fmt: skip


class CallLogListSerializer(serializers.ListSerializer[Any]):
    """A page of call-log rows: the OAuth clients' names in one query for the page."""

    def to_representation(self, data: Any) -> list[Any]:
        rows = list(data.all() if hasattr(data, "all") else data)
        ids = sorted({row.client_id for row in rows if row.client_id})
        # The child's context is this root serializer's own dict (typed read-only).
        self.child.context["oauth_names"] = client_names(ids) if ids else {}  # type: ignore[union-attr, index]
        page: list[Any] = super().to_representation(rows)
        return page


class CallLogSerializer(serializers.ModelSerializer[CallLog]):
    class Meta:
        model = CallLog
        exclude = ["principal"]
        list_serializer_class = CallLogListSerializer

    def to_representation(self, instance: CallLog) -> dict[str, Any]:
        data: dict[str, Any] = super().to_representation(instance)
        data["principal"] = instance.principal.get_username() if instance.principal else None
        names = self.context.get("oauth_names")
        if names is None and instance.client_id:
            names = client_names([instance.client_id])
        data["oauth_client_name"] = (names or {}).get(instance.client_id, "")
        request = self.context.get("request")
        if request is None or not request.user.has_perm("mcp_app.view_call_payloads"):
            # As /audit/: payloads need their own permission.
            data["arguments"] = data["result"] = None
        return data


class BackgroundCallSerializer(serializers.ModelSerializer[BackgroundCall]):
    endpoint: serializers.SlugRelatedField[Endpoint] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )

    class Meta:
        model = BackgroundCall
        # continuation: plumbing between a worker and the retries of its held run.
        exclude = ["tool", "input_responses", "client_capabilities", "continuation"]

    def to_representation(self, instance: BackgroundCall) -> dict[str, Any]:
        data: dict[str, Any] = super().to_representation(instance)
        request = self.context.get("request")
        if request is None or not request.user.has_perm("mcp_app.view_call_payloads"):
            # As the call log: payloads need their own permission.
            data["arguments"] = data["result"] = None
        else:
            # The row keeps them whole for its worker; clients of the API see what the tool's
            # capture policy keeps, as on its call-log row.
            data["arguments"], data["result"] = as_captured(
                instance.tool, instance.arguments, instance.result
            )
        return data


class SessionSerializer(serializers.ModelSerializer[Session]):
    endpoint: serializers.SlugRelatedField[Endpoint] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    user: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )

    class Meta:
        model = Session
        fields = [
            "id", "endpoint", "protocol_version", "client_info", "log_level", "subscriptions",
            "created_at", "last_seen_at", "closed_at", "user", "oauth_client_id",
        ]  # fmt: skip


class TryItSerializer(serializers.Serializer[Any]):
    arguments = serializers.DictField(default=dict)


class OpenApiImportSerializer(TeamScopedFieldsMixin, serializers.Serializer[Any]):
    document = JsonObjectField(help_text="The OpenAPI 3.x document (an object).")
    operations = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text='Keys of the operations to create, e.g. "GET /pets"; omitted: all.',
    )
    endpoints = serializers.SlugRelatedField(
        many=True, slug_field="slug", queryset=Endpoint.objects.all(), required=False
    )
    base_url = serializers.CharField(required=False, allow_blank=True, default="")
    credential = serializers.SlugRelatedField(
        slug_field="name", queryset=Credential.objects.all(), required=False, allow_null=True
    )
    preview = serializers.BooleanField(default=True, help_text="Only list the drafts.")


class CatalogImportSerializer(serializers.Serializer[Any]):
    document = JsonObjectField(
        required=False, help_text="A document written by export (format, ...)."
    )
    file = serializers.FileField(
        required=False,
        help_text="Or the exported file itself (YAML or JSON), as multipart/form-data.",
    )
    prune = serializers.BooleanField(default=False)
    dry_run = serializers.BooleanField(default=False)
    as_draft = serializers.BooleanField(
        default=False,
        help_text="Save the document as one draft (docs/api.md, Drafts) instead of making it "
        "live; not with prune or dry_run.",
    )
    title = serializers.CharField(
        max_length=200,
        required=False,
        default="",
        allow_blank=True,
        help_text="The draft's title (as_draft).",
    )

    def validate_file(self, value: Any) -> Any:
        """The file's document is held to what a JSON body is (``parsers.check_value``).

        YAML and ``json`` parse recursively: a deeply nested file runs out of stack, which
        is caught here. What is not a catalog document at all is left to the import's own
        error.
        """
        text = value.read()
        value.seek(0)
        try:
            document = catalog_parse(text)
        except CatalogFormatError:
            return value
        except RecursionError:
            raise serializers.ValidationError(TOO_DEEP_MESSAGE, code="too_deep") from None
        check_value(document)
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("document" in attrs) == ("file" in attrs):
            raise serializers.ValidationError("Send either document or file.")
        if attrs["title"] and not attrs["as_draft"]:
            raise serializers.ValidationError({"title": ["A title names a draft: send as_draft."]})
        return attrs


class DraftFieldDiffSerializer(serializers.Serializer[Any]):
    """A field a draft changes: its live value beside the draft's."""

    name = serializers.CharField()
    live = serializers.JSONField(help_text="The live value (null: the row is new).")
    draft = serializers.JSONField()
    conflict = serializers.BooleanField(
        help_text="Changed live since the draft was made, to another value than the draft's."
    )


class DraftEntryDiffSerializer(serializers.Serializer[Any]):
    """One entry of a draft beside its live row (``services.drafts.EntryDiff``)."""

    section = serializers.CharField(help_text="endpoints, tools, resources, ... (catalog).")
    key = serializers.CharField(help_text="The row's natural key (slug, name, URI).")
    action = serializers.ChoiceField(choices=["create", "update", "unchanged"])
    changed_live = serializers.ListField(
        child=serializers.CharField(),
        help_text="Fields the draft leaves alone that changed live since (a publish keeps them).",
    )
    problem = serializers.CharField(
        help_text="The row was created or deleted live since the draft was made ('' if not)."
    )
    conflicts = serializers.BooleanField(help_text="A publish now would be refused for it.")

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        # "fields" cannot be declared: a serializer's own ``fields`` attribute has the name.
        declared = super().get_fields()
        names = ["section", "key", "action", "fields", "changed_live", "problem", "conflicts"]
        declared["fields"] = DraftFieldDiffSerializer(many=True)
        return {name: declared[name] for name in names}


def _json_object(value: Any) -> Any:
    if not isinstance(value, dict):
        raise serializers.ValidationError("Expected a JSON object.")
    return value


class HistoryVersionSerializer(serializers.Serializer[Any]):
    """One version of a row: when, by whom, from where (admin, api, import, upstream sync)."""

    history_id = serializers.IntegerField()
    history_date = serializers.DateTimeField()
    history_type = serializers.ChoiceField(
        choices=["+", "~", "-"], help_text="+ created, ~ changed, - deleted."
    )
    user = serializers.SerializerMethodField()
    # Named as a Field attribute; DRF's metaclass moves declared fields out of the way.
    source = serializers.SerializerMethodField()  # type: ignore[assignment]

    def get_user(self, record: Any) -> str | None:
        return record.history_user.get_username() if record.history_user else None

    def get_source(self, record: Any) -> str:
        return str(record.history_change_reason or "")


class FieldChangeSerializer(serializers.Serializer[Any]):
    field = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # as ``source`` above
    old = serializers.CharField(help_text="The older version's value, as text.")
    new = serializers.CharField()
    lines = serializers.ListField(
        child=serializers.CharField(), help_text="A unified diff of multi-line values."
    )


class VersionDiffSerializer(serializers.Serializer[Any]):
    older = serializers.IntegerField(help_text="The older version's history_id.")
    newer = serializers.IntegerField()
    changes = FieldChangeSerializer(many=True)


class RevertSerializer(serializers.Serializer[Any]):
    history_id = serializers.IntegerField(
        min_value=1, help_text="The version to give the row back (from its history)."
    )


def _names(help_text: str) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.CharField(max_length=2048), required=False, default=list,
        help_text=help_text,
    )  # fmt: skip


class UpstreamSyncSerializer(serializers.Serializer[Any]):
    """What to apply of what the upstream offers (names as the sync preview lists them)."""

    add_tools = _names("Upstream tool names to create.")
    update_tools = _names("Upstream tool names whose changes to take (or to enable again).")
    remove_tools = _names("Upstream tool names gone from the upstream to disable.")
    add_resources = _names("Upstream resource URIs to create.")
    update_resources = _names("Upstream resource URIs whose changes to take (or to enable).")
    remove_resources = _names("Upstream resource URIs gone from the upstream to disable.")
    add_templates = _names("Upstream URI templates to create.")
    update_templates = _names("Upstream URI templates whose changes to take (or to enable).")
    remove_templates = _names("Upstream URI templates gone from the upstream to disable.")
    add_prompts = _names("Upstream prompt names to create.")
    update_prompts = _names("Upstream prompt names whose changes to take (or to enable).")
    remove_prompts = _names("Upstream prompt names gone from the upstream to disable.")
    endpoints = serializers.SlugRelatedField(
        slug_field="slug", queryset=Endpoint.objects.all(), many=True, required=False,
        default=list,  # type: ignore[arg-type]  # many=True: the default is the list's
        help_text="Endpoints (slugs) publishing the rows created.",
    )  # fmt: skip
    enabled = serializers.BooleanField(
        default=False, help_text="Create rows enabled (default: disabled, for review)."
    )
