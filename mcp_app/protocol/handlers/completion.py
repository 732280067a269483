"""``completion/complete`` (server/utilities/completion, every revision).

Values come from the catalog: a prompt argument's admin-defined ``completions``, or a
resource template's per-variable ``completions``. They are filtered by a case-insensitive
prefix match on what the user typed so far, in catalog order, capped at 100 (schema limit)
with ``total`` and ``hasMore`` telling the client how many matched in all.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.errors import InvalidParams
from mcp_app.protocol.messages import CompleteParams
from mcp_app.protocol.uritemplate import variables

MAX_VALUES: Final = 100


def _candidates(ctx: RequestContext, params: CompleteParams) -> Iterable[str]:
    if params.ref_type == "ref/prompt":
        prompt = ctx.catalog.prompt(params.ref)
        if prompt is None:
            raise InvalidParams(f"Unknown prompt: {params.ref}")
        for argument in prompt.arguments:
            if argument.name == params.argument_name:
                return argument.completions
        raise InvalidParams(f"Prompt {params.ref} has no argument {params.argument_name}")
    for template in ctx.catalog.resource_templates:
        if template.uri_template == params.ref:
            if params.argument_name not in variables(template.uri_template):
                raise InvalidParams(
                    f"Resource template {params.ref} has no variable {params.argument_name}"
                )
            return template.completions.get(params.argument_name, ())
    if ctx.catalog.resource(params.ref) is not None:
        return ()  # a concrete URI has no variables to complete
    raise InvalidParams(f"Unknown resource template: {params.ref}")


async def handle_completion_complete(ctx: RequestContext, params: CompleteParams) -> dict[str, Any]:
    """Return completion values for one prompt argument or template variable.

    Raises:
        InvalidParams: the prompt, template or argument does not exist.
    """
    typed = params.argument_value.casefold()
    matches = [v for v in _candidates(ctx, params) if v.casefold().startswith(typed)]
    return {
        "completion": {
            "values": matches[:MAX_VALUES],
            "total": len(matches),
            "hasMore": len(matches) > MAX_VALUES,
        }
    }
