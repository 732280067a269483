"""``prompts/list`` and ``prompts/get`` (server/prompts, every revision).

Rendering substitutes ``{argument}`` placeholders in a message's ``text`` and ``uri``:
``{{`` and ``}}`` are literal braces; a placeholder naming a declared argument the caller
left out becomes the empty string (only optional ones can be left out); a placeholder naming
no declared argument stays as written, so operator text such as ``{"json": 1}`` or
``{example}`` survives untouched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mcp_app.protocol.catalog import PromptDef, PromptMessageDef
from mcp_app.protocol.context import RequestContext
from mcp_app.protocol.cursors import paginate
from mcp_app.protocol.errors import InternalError, InvalidParams
from mcp_app.protocol.messages import GetPromptParams, ListParams
from mcp_app.protocol.shaping import shape_content, shape_prompt

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]+)\}")


async def handle_prompts_list(ctx: RequestContext, params: ListParams) -> dict[str, Any]:
    """Return one page of prompts."""
    page, next_cursor = paginate(
        ctx.catalog.prompts,
        lambda prompt: prompt.name,
        params.cursor,
        list_name="prompts",
        page_size=ctx.page_size,
        secret=ctx.cursor_secret,
    )
    result: dict[str, Any] = {"prompts": [shape_prompt(p, ctx.version) for p in page]}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result


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


async def handle_prompts_get(ctx: RequestContext, params: GetPromptParams) -> dict[str, Any]:
    """Render a prompt with the caller's arguments.

    Raises:
        InvalidParams: unknown prompt, or a required argument is missing.
    """
    prompt = ctx.catalog.prompt(params.name)
    if prompt is None:
        raise InvalidParams(f"Unknown prompt: {params.name}")
    missing = [a.name for a in prompt.arguments if a.required and a.name not in params.arguments]
    if missing:
        raise InvalidParams(f"Missing required arguments: {', '.join(missing)}")
    messages = [
        {"role": m["role"], "content": shape_content(m["content"], ctx.version)}
        for m in render_prompt(prompt, params.arguments)
    ]
    result: dict[str, Any] = {"messages": messages}
    if prompt.description:
        result["description"] = prompt.description
    return result
