"""``completion/complete`` (server/utilities/completion, every revision).

Values come from the catalog: a prompt argument's admin-defined ``completions``, or a
resource template's per-variable ``completions``. They are filtered by a case-insensitive
prefix match on what the user typed so far, in catalog order, capped at 100 (schema limit)
with ``total`` and ``hasMore`` telling the client how many matched in all. A prompt or
template of an upstream server is completed there (the ``Completer`` port) when it can,
else from its own values.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from mcp_app.protocol.catalog import PromptDef, ResourceTemplateDef
from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.errors import InvalidParams
from mcp_app.protocol.messages import CompleteParams
from mcp_app.protocol.uritemplate import variables

MAX_VALUES: Final = 100


def _reference(
    ctx: RequestContext, params: CompleteParams
) -> PromptDef | ResourceTemplateDef | None:
    """The prompt or template whose argument is typed; None for a concrete resource's URI.

    Raises:
        InvalidParams: the prompt, template or argument does not exist.
    """
    if params.ref_type == "ref/prompt":
        prompt = ctx.catalog.prompt(params.ref)
        if prompt is None:
            raise InvalidParams(f"Unknown prompt: {params.ref}")
        if all(argument.name != params.argument_name for argument in prompt.arguments):
            raise InvalidParams(f"Prompt {params.ref} has no argument {params.argument_name}")
        return prompt
    for template in ctx.catalog.resource_templates:
        if template.uri_template == params.ref:
            if params.argument_name not in variables(template.uri_template, ctx.templates):
                raise InvalidParams(
                    f"Resource template {params.ref} has no variable {params.argument_name}"
                )
            return template
    if ctx.catalog.resource(params.ref) is not None:
        return None  # a concrete URI has no variables to complete
    raise InvalidParams(f"Unknown resource template: {params.ref}")


def _candidates(item: PromptDef | ResourceTemplateDef | None, name: str) -> Iterable[str]:
    if item is None:
        return ()
    if isinstance(item, PromptDef):
        return next(a.completions for a in item.arguments if a.name == name)
    return item.completions.get(name, ())


async def handle_completion_complete(ctx: RequestContext, params: CompleteParams) -> dict[str, Any]:
    """Return completion values for one prompt argument or template variable.

    An item served from elsewhere (an upstream's) is completed there when the source can
    (``ctx.completions``), else from the def's own values.

    Raises:
        InvalidParams: the prompt, template or argument does not exist.
        McpError: the item's source refused or could not be reached.
    """
    item = _reference(ctx, params)
    if item is not None and ctx.completions is not None:
        found = await ctx.completions.complete(
            item, params.argument_name, params.argument_value, params.context_arguments
        )
        if found is not None:
            return {"completion": dict(found)}
    typed = params.argument_value.casefold()
    matches = [v for v in _candidates(item, params.argument_name) if v.casefold().startswith(typed)]
    return {
        "completion": {
            "values": matches[:MAX_VALUES],
            "total": len(matches),
            "hasMore": len(matches) > MAX_VALUES,
        }
    }
