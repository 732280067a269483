"""Kind "python": a registered resource function (``@mcp_resource_function``) resolves URIs.

Config: ``{"function": "<registered resource function>"}``. The function takes the URI and its
variables and returns text, bytes, a list of contents, or None (nothing there).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from typing import Any

from django import forms

from mcp_app.executors.base import ConfigError, ConfigFormError
from mcp_app.executors.python import ResourceFunction, resource_functions
from mcp_app.executors.resource_kinds.base import (
    DEFAULT_TEMPLATE_MIME,
    Contents,
    ReadContext,
    Resolver,
    TemplateSource,
    bytes_contents,
    text_contents,
)


def _function_choices() -> list[tuple[str, str]]:
    return [("", "---------")] + [
        (name, f"{name}: {function.description}" if function.description else name)
        for name, function in sorted(resource_functions().items())
    ]


class PythonResolverForm(forms.Form):
    function = forms.ChoiceField(
        required=False,
        choices=_function_choices,
        help_text="Python resolver: the registered resource function to call.",
    )


class PythonResolver(Resolver):
    kind = "python"
    label = "Python resource function"
    config_form = PythonResolverForm

    def validate_config(self, config: Mapping[str, Any]) -> None:
        _function(config)

    async def resolve(
        self,
        template: TemplateSource,
        uri: str,
        variables: Mapping[str, str],
        context: ReadContext,
    ) -> Contents | None:
        function = _function(template.config).function
        if inspect.iscoroutinefunction(function):
            value = await function(uri, dict(variables))
        else:
            value = await asyncio.to_thread(function, uri, dict(variables))
        if value is None:
            return None
        if isinstance(value, str):
            return [text_contents(uri, template.mime_type or DEFAULT_TEMPLATE_MIME, value)]
        if isinstance(value, bytes):
            return [bytes_contents(uri, template.mime_type, value)]
        return list(value)

    def form_initial(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return {"function": config.get("function", "")}

    def config_from_form(self, data: Mapping[str, Any]) -> dict[str, Any]:
        if not data.get("function"):
            raise ConfigFormError({"function": "Choose the resource function that resolves URIs."})
        return {"function": data["function"]}


def _function(config: Mapping[str, Any]) -> ResourceFunction:
    functions = resource_functions()
    function = config.get("function")
    if not isinstance(function, str) or function not in functions:
        known = ", ".join(sorted(functions)) or "none"
        raise ConfigError(f"Unknown resource function {function!r} (registered: {known}).")
    return functions[function]
