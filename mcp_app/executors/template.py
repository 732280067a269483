"""Kind "template": a Django template rendered with the call's arguments, as text or JSON.

Templates run on a dedicated ``Engine`` with no loaders and only Django's default tags and
filters, minus ``debug`` (dumps ``sys.modules`` under DEBUG), ``load`` and ``url``; the loader
tags (``include``, ``extends``) are absent. The context holds only the (JSON) arguments, so an
operator's template cannot run code, read files or reach other templates.
Config: ``{"template": "<text>", "output": "text" | "json"}``.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from django import forms
from django.template import (
    Context,
    Engine,
    Library,
    Node,
    NodeList,
    Template,
    TemplateSyntaxError,
    Variable,
    defaultfilters,
    defaulttags,
)
from django.template.base import FilterExpression
from django.template.smartif import TokenBase

from mcp_app.conf import get_conf
from mcp_app.executors.base import (
    ConfigError,
    ConfigFormError,
    Executor,
    PreparedConfig,
    shown,
)
from mcp_app.executors.forms import CodeTextarea
from mcp_app.protocol.context import ToolCallContext
from mcp_app.protocol.results import ToolError, ToolResult

OUTPUTS = ("text", "json")
_BLOCKED_TAGS = frozenset({"debug", "load", "url"})


@functools.cache
def template_engine() -> Engine:
    """Return the sandboxed engine: no loaders, no tag libraries to load, autoescape off."""
    engine = Engine(loaders=[], libraries={}, autoescape=False, debug=False)
    builtins = Library()
    builtins.tags.update(
        (name, tag) for name, tag in defaulttags.register.tags.items() if name not in _BLOCKED_TAGS
    )
    builtins.filters.update(defaultfilters.register.filters)
    # A copy, so the site's own templates keep every default tag.
    engine.template_builtins = [builtins]
    return engine


@functools.lru_cache(maxsize=512)
def compile_template(source: str) -> Template:
    """Compile ``source`` once per distinct text.

    Raises:
        ConfigError: the template does not parse; the message is Django's.
    """
    try:
        return template_engine().from_string(source)
    except TemplateSyntaxError as exc:
        raise ConfigError(f"Template syntax error: {exc}") from exc


def render_template(source: str, variables: Mapping[str, Any]) -> str:
    """Render ``source`` with ``variables`` as the context, capped at MCP_TEMPLATE_MAX_OUTPUT.

    Raises:
        ConfigError: the template does not parse.
        ToolError: the output is longer than the cap.
    """
    return render_compiled(compile_template(source), variables)


def render_compiled(template: Template, variables: Mapping[str, Any]) -> str:
    """Render a compiled template with ``variables``, capped at MCP_TEMPLATE_MAX_OUTPUT.

    Raises:
        ToolError: the output is longer than the cap.
    """
    # A JSON round trip gives the template private, plain data: nothing callable with effects
    # outside this render (a "{{ items.pop }}" only pops from the copy).
    context = orjson.loads(orjson.dumps(dict(variables)))
    rendered = template.render(Context(context, autoescape=False))
    limit = get_conf().MCP_TEMPLATE_MAX_OUTPUT
    if len(rendered) > limit:
        raise ToolError(f"Template output is longer than the limit of {limit} characters.")
    return rendered


# Names every template context has (django.template.context.BaseContext), and those the
# "for" tag sets.
_BUILTIN_NAMES = frozenset({"True", "False", "None", "forloop"})
# Node attributes naming what a tag binds ("for x in", "with x=", "... as x").
_BINDING_ATTRIBUTES = ("loopvars", "var_name", "variable_name", "asvar")


def template_variables(template: Template) -> set[str]:
    """Return the names ``template`` reads from its context: the first part of each variable
    (``user`` of ``{{ user.name }}``), filter arguments included, less the names its own tags
    bind anywhere (``for``, ``with``, ``... as``) and the context's built-ins."""
    used: set[str] = set()
    bound: set[str] = set(_BUILTIN_NAMES)

    def visit_arguments(expression: FilterExpression) -> None:
        for _function, arguments in expression.filters:
            for _is_variable, argument in arguments:
                visit(argument)

    def visit(item: Any) -> None:
        if isinstance(item, Variable):
            if item.lookups:  # None for a literal ("text", 3)
                used.add(item.lookups[0])
        elif isinstance(item, FilterExpression):
            visit(item.var)
            visit_arguments(item)
        elif isinstance(item, defaulttags.FilterNode):
            # "{% filter upper %}" applies "var|upper" to its own output: only the filters'
            # arguments come from the context.
            visit_arguments(item.filter_expr)
            visit(item.nodelist)
        elif isinstance(item, Node | TokenBase):
            for name, value in vars(item).items():
                if name in _BINDING_ATTRIBUTES:
                    names = value if isinstance(value, list) else [value]
                    bound.update(each for each in names if isinstance(each, str))
                elif name == "extra_context" and isinstance(value, dict):  # "with"
                    bound.update(value)
                    visit(list(value.values()))
                elif name not in ("token", "origin", "expression"):
                    # "expression" is regroup's "by", read from each item, not the context.
                    visit(value)
        elif isinstance(item, NodeList | list | tuple):
            for child in item:
                visit(child)

    visit(template.nodelist)
    return used - bound


@dataclass(frozen=True, slots=True)
class TemplateConfig(PreparedConfig):
    """``{"template": text, "output": "text" | "json"}`` with the template compiled."""

    template: Template
    output: str = "text"


class TemplateConfigForm(forms.Form):
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


class TemplateExecutor(Executor[TemplateConfig]):
    kind = "template"
    label = "Text template"
    config_form = TemplateConfigForm

    def prepare(self, config: Mapping[str, Any]) -> TemplateConfig:
        source = config.get("template")
        if not isinstance(source, str) or not source:
            raise ConfigError("A template tool needs its template text.")
        output = config.get("output", "text")
        if output not in OUTPUTS:
            raise ConfigError(f'The output must be "text" or "json", not {shown(output)}.')
        if unknown := sorted(set(config) - {"template", "output"}):
            raise ConfigError(f"Unknown config keys: {', '.join(unknown)}.")
        return TemplateConfig(template=compile_template(source), output=output)

    async def run(
        self, prepared: TemplateConfig, arguments: Mapping[str, Any], ctx: ToolCallContext
    ) -> ToolResult:
        # Rendering is CPU work of unbounded length (loops): keep it off the event loop so the
        # runner's timeout still answers the caller.
        rendered = await asyncio.to_thread(render_compiled, prepared.template, arguments)
        if prepared.output != "json":
            return ToolResult.text(rendered)
        try:
            structured = json.loads(rendered)
        except json.JSONDecodeError as exc:
            raise ToolError(
                f"The template did not render valid JSON: {exc.msg} at line {exc.lineno} "
                f"column {exc.colno}."
            ) from None
        return ToolResult(content=[{"type": "text", "text": rendered}], structured=structured)

    def config_problems(
        self, config: Mapping[str, Any], input_schema: Mapping[str, Any] | None
    ) -> dict[str, str]:
        # As HTTP tools' placeholders: a variable no argument can fill would always render
        # empty, whatever the client sends.
        declared = set((input_schema or {}).get("properties", {}))
        if names := sorted(template_variables(self.prepare(config).template) - declared):
            listed = ", ".join("{{ " + name + " }}" for name in names)
            return {"template": f"{listed} names no property of the input schema."}
        return {}

    def form_field_of(self, key: str) -> str | None:
        return {"template": "template", "output": "template_output"}.get(key)

    def form_initial(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "template": config.get("template", ""),
            "template_output": config.get("output", "text"),
        }

    def config_from_form(
        self, data: Mapping[str, Any], input_schema: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        config = {
            "template": data.get("template", ""),
            "output": data.get("template_output") or "text",
        }
        try:
            self.prepare(config)
        except ConfigError as exc:
            raise ConfigFormError({"template": exc.message}) from None
        return config
