"""Form fields the kinds' admin config fields are built from: JSON and code as text.

Plain ``django.forms`` only, so an executor can declare its fields without importing the admin;
``admin/forms.py`` uses the same fields for the models' JSON columns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

# JsonTextField's empty_json default: use the model field's default (passed as ``initial``).
MODEL_DEFAULT: Any = object()


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

    def __init__(self, *, empty_json: Any = MODEL_DEFAULT, **kwargs: Any) -> None:
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
        value = self.initial if self.empty_json is MODEL_DEFAULT else self.empty_json
        return value() if callable(value) else value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")
