"""``prompts/list`` and ``prompts/get`` (server/prompts, every revision).

Rendering substitutes ``{argument}`` placeholders in a message's ``text`` and ``uri``:
``{{`` and ``}}`` are literal braces; a placeholder naming a declared argument the caller
left out becomes the empty string (only optional ones can be left out); a placeholder naming
no declared argument stays as written, so operator text such as ``{"json": 1}`` or
``{example}`` survives untouched.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

from mcp_app.protocol import mrtr
from mcp_app.protocol.catalog import PromptArgumentDef, PromptDef, PromptMessageDef
from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.errors import InternalError, InvalidParams
from mcp_app.protocol.handlers.listing import list_page
from mcp_app.protocol.messages import GetPromptParams, ListParams
from mcp_app.protocol.policies import (
    PROMPTS_GET,
    PolicyCall,
    PolicyRecord,
    PolicyRefused,
    policy_refusal,
)
from mcp_app.protocol.shaping import shape_content, shape_prompt
from mcp_app.protocol.versions import Feature

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]+)\}")


async def handle_prompts_list(ctx: RequestContext, params: ListParams) -> dict[str, Any]:
    """Return one page of prompts."""
    return list_page(
        ctx,
        params,
        items=ctx.catalog.prompts,
        key=lambda prompt: prompt.name,
        list_name="prompts",
        result_key="prompts",
        shape=shape_prompt,
    )


def render(template: str, values: Mapping[str, str]) -> str:
    """Substitute ``{name}`` placeholders whose name is a key of ``values``."""

    def replace(found: re.Match[str]) -> str:
        token = found.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        name = found.group(1)
        return values.get(name, token)

    return _PLACEHOLDER.sub(replace, template)


def _content(message: PromptMessageDef, values: Mapping[str, str]) -> dict[str, Any]:
    kind = message.kind
    if kind == "text":
        return {"type": "text", "text": render(message.text, values)}
    if kind in ("image", "audio"):
        return {"type": kind, "data": message.data, "mimeType": message.mime_type}
    if kind == "resource":
        resource: dict[str, Any] = {"uri": render(message.uri, values)}
        if message.mime_type:
            resource["mimeType"] = message.mime_type
        if message.data:
            resource["blob"] = message.data
        else:
            resource["text"] = render(message.text, values)
        return {"type": "resource", "resource": resource}
    if kind == "resource_link":
        uri = render(message.uri, values)
        link: dict[str, Any] = {"type": "resource_link", "uri": uri, "name": message.name or uri}
        if message.mime_type:
            link["mimeType"] = message.mime_type
        if message.text:
            link["description"] = render(message.text, values)
        return link
    raise InternalError("Prompt is misconfigured")


def render_prompt(prompt: PromptDef, arguments: Mapping[str, str]) -> list[dict[str, Any]]:
    """Return the unshaped ``messages`` of ``prompt`` for validated ``arguments``."""
    values = {arg.name: arguments.get(arg.name, "") for arg in prompt.arguments}
    return [{"role": m.role, "content": _content(m, values)} for m in prompt.messages]


async def handle_prompts_get(
    ctx: RequestContext, params: GetPromptParams, record: PolicyRecord
) -> dict[str, Any]:
    """Render a prompt with the caller's arguments; what the endpoint's policies do about it
    goes to ``record``.

    A 2026-07-28 client that accepts forms is asked for missing required arguments
    (``input_required``, then a retry); anyone else gets ``-32602`` for them.

    Raises:
        InvalidParams: unknown prompt, a required argument is missing (and was not given when
            asked), or a tampered, expired or foreign ``requestState``.
    """
    prompt = ctx.named_item
    if type(prompt) is not PromptDef or prompt.name != params.name:
        prompt = ctx.catalog.prompt(params.name)
    if prompt is None:
        raise InvalidParams(f"Unknown prompt: {params.name}")
    arguments = dict(params.arguments)
    missing = [a for a in prompt.arguments if a.required and a.name not in arguments]
    if missing and _can_ask_for_arguments(ctx):
        asked = _asked_arguments(ctx, params, missing)
        if isinstance(asked, dict) and "inputRequests" in asked:
            return asked
        arguments.update(asked)
        missing = [a for a in missing if a.name not in arguments]
    if missing:
        names = ", ".join(a.name for a in missing)
        raise InvalidParams(f"Missing required arguments: {names}")
    policies = ctx.catalog.policies
    if policies is None:
        return await _rendered(ctx, prompt, arguments)
    call = PolicyCall(PROMPTS_GET, prompt.name)
    record.logged_arguments = policies.logged_arguments(call, arguments)
    try:
        arguments = dict(policies.before(call, arguments, record.decisions))
    except PolicyRefused as refused:
        raise policy_refusal(refused) from None
    return policies.after(call, await _rendered(ctx, prompt, arguments), record.decisions)


async def _rendered(
    ctx: RequestContext, prompt: PromptDef, arguments: Mapping[str, Any]
) -> dict[str, Any]:
    """The prompt rendered with ``arguments`` (by the server it came from, if another)."""
    if ctx.prompts is not None:
        got = await ctx.prompts.get_prompt(prompt, arguments)
        if got is not None:
            return _shaped_elsewhere(ctx, prompt, got)
    messages = [
        {"role": m["role"], "content": shape_content(m["content"], ctx.version)}
        for m in render_prompt(prompt, arguments)
    ]
    result: dict[str, Any] = {"messages": messages}
    if prompt.description:
        result["description"] = prompt.description
    return result


def _shaped_elsewhere(
    ctx: RequestContext, prompt: PromptDef, got: Mapping[str, Any]
) -> dict[str, Any]:
    """A prompt another server rendered: its messages as they came, shaped for the revision."""
    messages = [
        {"role": message["role"], "content": shape_content(message["content"], ctx.version)}
        for message in got.get("messages", ())
    ]
    result: dict[str, Any] = {"messages": messages}
    description = got.get("description") or prompt.description
    if isinstance(description, str) and description:
        result["description"] = description
    return result


# The key of the form that asks for a prompt's missing arguments.
ARGUMENTS_KEY = "prompt_arguments"


def _can_ask_for_arguments(ctx: RequestContext) -> bool:
    """2026-07-28 clients that accept forms are asked for missing arguments (MRTR)."""
    if not ctx.supports(Feature.INPUT_REQUIRED):
        return False
    elicitation = ctx.client_capabilities.get("elicitation")
    return isinstance(elicitation, Mapping) and (not elicitation or "form" in elicitation)


def _asked_arguments(
    ctx: RequestContext, params: GetPromptParams, missing: list[PromptArgumentDef]
) -> dict[str, Any]:
    """Return the arguments the user gave, or the ``input_required`` result that asks them.

    A declined or cancelled form leaves the arguments missing (the caller then reports
    them); an answer without the required values asks again.
    """
    binding = mrtr.Binding(
        endpoint=ctx.catalog.endpoint.slug,
        principal=ctx.principal,
        method="prompts/get",
        request_digest=mrtr.request_digest(params.name, params.arguments),
    )
    answers: dict[str, Any] = {}
    if params.request_state is not None:
        answers = mrtr.unseal(
            params.request_state, secret=ctx.state_secret, binding=binding, now=time.time()
        )
    answers.update(params.input_responses)
    answer = answers.get(ARGUMENTS_KEY)
    if isinstance(answer, Mapping) and answer.get("action") in ("decline", "cancel"):
        return {}
    content = answer.get("content") if isinstance(answer, Mapping) else None
    if isinstance(content, Mapping) and all(isinstance(content.get(a.name), str) for a in missing):
        return {a.name: content[a.name] for a in missing}
    schema = {
        "type": "object",
        "properties": {
            a.name: {
                "type": "string",
                **({"title": a.title} if a.title else {}),
                **({"description": a.description} if a.description else {}),
            }
            for a in missing
        },
        "required": [a.name for a in missing],
    }
    request = {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": f"The prompt {params.name} needs: {', '.join(a.name for a in missing)}.",
            "requestedSchema": schema,
        },
    }
    return {
        "resultType": "input_required",
        "inputRequests": {ARGUMENTS_KEY: request},
        "requestState": mrtr.seal(
            secret=ctx.state_secret, binding=binding, answers=answers, now=time.time()
        ),
    }
