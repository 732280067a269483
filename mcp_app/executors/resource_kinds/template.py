"""Kind "template": a Django template (the tool kind's sandboxed engine) rendered with the URI's
variables as its context.

Config: ``{"template": "<template text>"}``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from django import forms

from mcp_app.executors.base import ConfigError, ConfigFormError
from mcp_app.executors.forms import CodeTextarea
from mcp_app.executors.resource_kinds.base import (
    DEFAULT_TEMPLATE_MIME,
    Contents,
    ReadContext,
    Resolver,
    TemplateSource,
    text_contents,
)
from mcp_app.executors.template import compile_template, render_template


class TextTemplateResolverForm(forms.Form):
    template = forms.CharField(
        required=False,
        strip=False,
        widget=CodeTextarea(attrs={"rows": 6}),
        help_text="Template resolver: Django template text; the URI variables are the context.",
    )


class TextTemplateResolver(Resolver):
    kind = "template"
    label = "Text template"
    config_form = TextTemplateResolverForm

    def validate_config(self, config: Mapping[str, Any]) -> None:
        template = config.get("template")
        if not isinstance(template, str):
            raise ConfigError("A text template needs its template text.")
        compile_template(template)

    async def resolve(
        self,
        template: TemplateSource,
        uri: str,
        variables: Mapping[str, str],
        context: ReadContext,
    ) -> Contents | None:
        source = str(template.config.get("template", ""))
        text = await asyncio.to_thread(render_template, source, dict(variables))
        return [text_contents(uri, template.mime_type or DEFAULT_TEMPLATE_MIME, text)]

    def form_initial(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return {"template": config.get("template", "")}

    def config_from_form(self, data: Mapping[str, Any]) -> dict[str, Any]:
        text = data.get("template")
        if not text:
            raise ConfigFormError({"template": "Enter the template text."})
        try:
            compile_template(text)
        except ConfigError as exc:
            raise ConfigFormError({"template": exc.message}) from None
        return {"template": text}
