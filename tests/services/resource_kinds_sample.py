"""A resource-template kind defined outside the product, listed only by the tests that add it
to MCP_RESOURCE_TEMPLATE_KINDS (in this process with override_settings, in a live server's
through its environment)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms

from mcp_app.executors.base import ConfigError, ConfigFormError
from mcp_app.executors.resource_kinds.base import (
    Contents,
    ReadContext,
    Resolver,
    TemplateSource,
    text_contents,
)

PATH = f"{__name__}.ShoutResolver"


class ShoutResolverForm(forms.Form):
    shout_suffix = forms.CharField(required=False, help_text="What follows the shouted word.")


class ShoutResolver(Resolver):
    """``{"suffix": "!"}``: each URI's ``word`` variable in capitals, then the suffix."""

    kind = "shout"
    label = "Shout"
    config_form = ShoutResolverForm

    def validate_config(self, config: Mapping[str, Any]) -> None:
        suffix = config.get("suffix")
        if set(config) != {"suffix"} or not isinstance(suffix, str) or not suffix:
            raise ConfigError('A shout needs {"suffix": "<text>"}.')

    async def resolve(
        self,
        template: TemplateSource,
        uri: str,
        variables: Mapping[str, str],
        context: ReadContext,
    ) -> Contents | None:
        word = variables.get("word", "")
        text = f"{word.upper()}{template.config['suffix']}"
        return [text_contents(uri, template.mime_type or "text/plain", text)]

    def form_initial(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return {"shout_suffix": config.get("suffix", "")}

    def config_from_form(self, data: Mapping[str, Any]) -> dict[str, Any]:
        if not data.get("shout_suffix"):
            raise ConfigFormError({"shout_suffix": "Enter what follows the shouted word."})
        return {"suffix": data["shout_suffix"]}
