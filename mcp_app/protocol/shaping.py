"""Per-revision wire shapes: what each protocol revision may see of a definition or result.

The catalog keeps one full definition; each revision gets the subset its schema defines
(protocol.md §3.2-3.4, §3.15, §5). Fields a revision lacks are dropped rather than sent,
and content types it lacks are downgraded to text, so an older client never meets a shape
its schema rejects:

- tool ``annotations`` from 2025-03-26; ``title``, ``outputSchema``, ``_meta`` from
  2025-06-18; ``icons`` from 2025-11-25. Legacy schemas require an object-rooted
  ``outputSchema`` and an object ``structuredContent``; other shapes are withheld there.
  ``execution.taskSupport`` exists in 2025-11-25 only.
- ``audio`` content becomes a text note for 2024-11-05, ``resource_link`` becomes text
  before 2025-06-18; ``structuredContent`` is dropped before 2025-06-18.
- modern results carry ``resultType``, ``_meta["io.modelcontextprotocol/serverInfo"]`` and,
  on cacheable results, ``ttlMs``/``cacheScope`` (2026-07-28 server/utilities/caching).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import orjson

from mcp_app.protocol import apps
from mcp_app.protocol.catalog import (
    JSON,
    PromptArgumentDef,
    PromptDef,
    ResourceDef,
    ResourceTemplateDef,
    ToolDef,
)
from mcp_app.protocol.results import ToolResult
from mcp_app.protocol.versions import Feature, supports

SERVER_INFO_KEY: Final = "io.modelcontextprotocol/serverInfo"
# Lists do not depend on the caller yet: nothing user-specific, so shared caches may keep
# them; a TTL of 0 keeps admin edits visible at once.
DEFAULT_TTL_MS: Final = 0
DEFAULT_CACHE_SCOPE: Final = "public"


def _json_object(value: Mapping[str, JSON]) -> dict[str, JSON]:
    # orjson serialises dict, not arbitrary Mappings; definitions may hold read-only views.
    return value if isinstance(value, dict) else dict(value)


def _put_common(
    shaped: dict[str, Any],
    version: str,
    *,
    title: str = "",
    description: str = "",
    icons: Iterable[Mapping[str, JSON]] = (),
) -> None:
    if title and supports(version, Feature.TITLES):
        shaped["title"] = title
    if description:
        shaped["description"] = description
    icons = list(icons)
    if icons and supports(version, Feature.ICONS):
        shaped["icons"] = [_json_object(icon) for icon in icons]


def output_schema_allowed(schema: Mapping[str, Any], version: str) -> bool:
    """Whether ``version`` may see ``schema`` as a tool's ``outputSchema``."""
    if not supports(version, Feature.STRUCTURED_OUTPUT):
        return False
    return supports(version, Feature.ANY_JSON_STRUCTURED) or schema.get("type") == "object"


def shape_tool(tool: ToolDef, version: str, *, views: bool = False) -> dict[str, Any]:
    """Return ``tool`` as ``tools/list`` shows it to a client of ``version``.

    ``views``: the client renders MCP Apps views (``apps.client_renders_apps``), so the
    tool's view is linked in ``_meta.ui.resourceUri``.
    """
    shaped: dict[str, Any] = {"name": tool.name}
    _put_common(shaped, version, title=tool.title, description=tool.description, icons=tool.icons)
    # The input schema goes out verbatim ($schema, $defs, additionalProperties included).
    shaped["inputSchema"] = _json_object(tool.input_schema)
    if tool.output_schema is not None and output_schema_allowed(tool.output_schema, version):
        shaped["outputSchema"] = _json_object(tool.output_schema)
    if tool.annotations and supports(version, Feature.TOOL_ANNOTATIONS):
        shaped["annotations"] = _json_object(tool.annotations)
    meta = apps.with_view_link(tool.meta, tool.view_uri) if views and tool.view_uri else tool.meta
    if meta and supports(version, Feature.TITLES):
        shaped["_meta"] = _json_object(meta)
    if tool.task_support != "forbidden" and supports(version, Feature.TASKS_CORE):
        # Absent means "forbidden" (2025-11-25 basic/utilities/tasks, "Tool-Level
        # Negotiation"); 2026-07-28 removed the field (the tasks extension is server-directed).
        shaped["execution"] = {"taskSupport": tool.task_support}
    return shaped


def shape_resource(resource: ResourceDef, version: str) -> dict[str, Any]:
    """Return ``resource`` as ``resources/list`` shows it to a client of ``version``."""
    shaped: dict[str, Any] = {"uri": resource.uri, "name": resource.name}
    _put_common(
        shaped,
        version,
        title=resource.title,
        description=resource.description,
        icons=resource.icons,
    )
    if resource.mime_type:
        shaped["mimeType"] = resource.mime_type
    if resource.size is not None:
        shaped["size"] = resource.size
    if resource.annotations:
        shaped["annotations"] = _shape_annotations(resource.annotations, version)
    return shaped


def shape_resource_template(template: ResourceTemplateDef, version: str) -> dict[str, Any]:
    """Return ``template`` as ``resources/templates/list`` shows it."""
    shaped: dict[str, Any] = {"uriTemplate": template.uri_template, "name": template.name}
    _put_common(
        shaped,
        version,
        title=template.title,
        description=template.description,
        icons=template.icons,
    )
    if template.mime_type:
        shaped["mimeType"] = template.mime_type
    if template.annotations:
        shaped["annotations"] = _shape_annotations(template.annotations, version)
    return shaped


def _shape_argument(argument: PromptArgumentDef, version: str) -> dict[str, Any]:
    shaped: dict[str, Any] = {"name": argument.name}
    _put_common(shaped, version, title=argument.title, description=argument.description)
    if argument.required:
        shaped["required"] = True
    return shaped


def shape_prompt(prompt: PromptDef, version: str) -> dict[str, Any]:
    """Return ``prompt`` as ``prompts/list`` shows it."""
    shaped: dict[str, Any] = {"name": prompt.name}
    _put_common(
        shaped, version, title=prompt.title, description=prompt.description, icons=prompt.icons
    )
    if prompt.arguments:
        shaped["arguments"] = [_shape_argument(arg, version) for arg in prompt.arguments]
    return shaped


def _shape_annotations(annotations: Mapping[str, JSON], version: str) -> dict[str, JSON]:
    # `lastModified` arrived with 2025-06-18; `audience` and `priority` exist everywhere.
    if supports(version, Feature.TITLES):
        return _json_object(annotations)
    return {k: v for k, v in annotations.items() if k != "lastModified"}


def shape_content(block: Mapping[str, Any], version: str) -> dict[str, Any]:
    """Return one content block in a form ``version`` understands.

    ``audio`` (2025-03-26+) and ``resource_link`` (2025-06-18+) become text blocks that say
    what was there, so an older client still tells the model something true.
    """
    kind = block.get("type")
    if kind == "audio" and not supports(version, Feature.AUDIO_CONTENT):
        mime = block.get("mimeType") or "unknown type"
        shaped: dict[str, Any] = {
            "type": "text",
            "text": f"[audio content ({mime}) omitted: not supported by protocol {version}]",
        }
    elif kind == "resource_link" and not supports(version, Feature.RESOURCE_LINK):
        label = block.get("title") or block.get("name") or block.get("uri", "")
        text = f"Resource: {label} <{block.get('uri', '')}>"
        if block.get("description"):
            text += f"\n{block['description']}"
        shaped = {"type": "text", "text": text}
    else:
        shaped = dict(block)
        if not supports(version, Feature.TITLES):
            # `_meta` on content blocks is a 2025-06-18 addition.
            shaped.pop("_meta", None)
        if kind == "resource_link":
            _put_common(
                shaped, version, title=shaped.pop("title", ""), icons=shaped.pop("icons", ())
            )
    if isinstance(block.get("annotations"), Mapping):
        shaped["annotations"] = _shape_annotations(block["annotations"], version)
    return shaped


def structured_text(structured: Any) -> str:
    """Return the JSON text of a structured result (the SHOULD-have text mirror)."""
    return orjson.dumps(structured).decode("utf-8")


def shape_call_result(result: ToolResult, version: str) -> dict[str, Any]:
    """Return a ``tools/call`` result (before the modern envelope) for ``version``."""
    shaped: dict[str, Any] = {
        "content": [shape_content(block, version) for block in result.content],
    }
    if result.has_structured and supports(version, Feature.STRUCTURED_OUTPUT):
        value = result.structured
        if supports(version, Feature.ANY_JSON_STRUCTURED) or isinstance(value, dict):
            shaped["structuredContent"] = value
    shaped["isError"] = result.is_error
    if result.meta:
        shaped["_meta"] = _json_object(result.meta)
    return shaped


def finish_result(
    result: dict[str, Any],
    version: str,
    server_info: Mapping[str, Any],
    *,
    cacheable: bool,
    ttl_ms: int = DEFAULT_TTL_MS,
    cache_scope: str = DEFAULT_CACHE_SCOPE,
) -> dict[str, Any]:
    """Add the modern result envelope to ``result`` (in place); legacy results pass through.

    Modern results get ``resultType: "complete"`` (MUST), the server's identity in ``_meta``
    (SHOULD) and, when ``cacheable``, ``ttlMs``/``cacheScope`` (MUST on discover, the four
    lists and ``resources/read``).
    """
    if not supports(version, Feature.RESULT_TYPE):
        return result
    # A handler may have answered "input_required" (MRTR); everything else is complete.
    result.setdefault("resultType", "complete")
    meta = dict(result.get("_meta") or {})
    meta[SERVER_INFO_KEY] = _json_object(server_info)
    result["_meta"] = meta
    complete = result["resultType"] == "complete"
    # ttlMs/cacheScope belong to complete results only (2026-07-28 server/utilities/caching).
    if cacheable and complete and supports(version, Feature.CACHEABLE_RESULTS):
        result["ttlMs"] = ttl_ms
        # A handler may have narrowed the scope (a response that depends on the caller);
        # nothing widens "private".
        if result.get("cacheScope") != "private":
            result["cacheScope"] = cache_scope
    return result
