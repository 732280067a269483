"""Plain, immutable definitions of what an endpoint publishes: the catalog snapshot.

The Django side (``mcp_app.services.snapshots``) builds one ``CatalogSnapshot`` per endpoint and
catalog version from database rows; the protocol handlers only ever read it. Schemas and other
JSON values are kept verbatim as the operator wrote them (``$schema``, ``$defs`` and
``additionalProperties`` must come back unchanged).

Wire-shaped values (``annotations``, ``icons``, content blocks) are plain dicts in their MCP
camelCase form; per-revision trimming happens in ``shaping.py``, never here.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from mcp_app.protocol.policies import CallPolicies

JSON: TypeAlias = Mapping[str, "JSON"] | Sequence["JSON"] | str | int | float | bool | None
"""A JSON value as produced by ``orjson.loads``."""

# Derived values (shaped list pages) kept per snapshot, at most.
MEMO_SIZE = 512


@dataclass(frozen=True, slots=True)
class ToolDef:
    """One tool as ``tools/list`` publishes it, plus what the runner needs to call it."""

    name: str
    description: str
    input_schema: Mapping[str, JSON]
    title: str = ""
    output_schema: Mapping[str, JSON] | None = None
    annotations: Mapping[str, JSON] = field(default_factory=dict)
    icons: Sequence[Mapping[str, JSON]] = ()
    meta: Mapping[str, JSON] = field(default_factory=dict)
    # MCP Apps (protocol/apps.py): the ui:// view published as _meta.ui.resourceUri to
    # clients that render views; empty for none.
    view_uri: str = ""
    # Where calls run: "inline", "auto" (inline unless the call becomes an MCP task) or
    # "background" (always on a worker; a task whenever the request allows one).
    execution: str = "inline"
    # MCP task support (2025-11-25 `execution.taskSupport`): "forbidden", "optional" or
    # "required" (never served as a plain call).
    task_support: str = "forbidden"
    # Opaque to the protocol: handed back to the ToolRunner port (e.g. a primary key, the
    # executor kind and its config).
    binding: Any = None


@dataclass(frozen=True, slots=True)
class ResourceDef:
    """A concrete resource with a fixed URI."""

    uri: str
    name: str
    title: str = ""
    description: str = ""
    mime_type: str = ""
    size: int | None = None
    icons: Sequence[Mapping[str, JSON]] = ()
    annotations: Mapping[str, JSON] = field(default_factory=dict)
    # Its contents may depend on the caller (read from an upstream MCP server, in the
    # caller's session): 2026-07-28 reads say ``cacheScope: "private"``.
    private: bool = False
    binding: Any = None


@dataclass(frozen=True, slots=True)
class ResourceTemplateDef:
    """An RFC 6570 URI template resolved on read by the ResourceReader port."""

    uri_template: str
    name: str
    title: str = ""
    description: str = ""
    mime_type: str = ""
    icons: Sequence[Mapping[str, JSON]] = ()
    annotations: Mapping[str, JSON] = field(default_factory=dict)
    # Completion values per template variable, for completion/complete with ref/resource.
    completions: Mapping[str, Sequence[str]] = field(default_factory=dict)
    # As ``ResourceDef.private``, for every URI it serves.
    private: bool = False
    binding: Any = None


@dataclass(frozen=True, slots=True)
class PromptArgumentDef:
    name: str
    title: str = ""
    description: str = ""
    required: bool = False
    # Admin-defined values offered by completion/complete, filtered by prefix.
    completions: Sequence[str] = ()


@dataclass(frozen=True, slots=True)
class PromptMessageDef:
    """One message of a prompt template.

    ``kind`` is ``text``, ``image``, ``audio``, ``resource`` (embedded) or ``resource_link``.
    ``text`` and ``uri`` may contain ``{argument}`` placeholders; ``{{`` and ``}}`` are literal
    braces. ``data`` is base64 for image/audio and for a binary embedded resource (``blob``).
    """

    role: str
    kind: str = "text"
    text: str = ""
    data: str = ""
    mime_type: str = ""
    uri: str = ""
    name: str = ""


@dataclass(frozen=True, slots=True)
class PromptDef:
    name: str
    description: str = ""
    title: str = ""
    arguments: Sequence[PromptArgumentDef] = ()
    messages: Sequence[PromptMessageDef] = ()
    icons: Sequence[Mapping[str, JSON]] = ()
    # Opaque to the protocol, as on the other defs (the Django side keeps access rules here).
    binding: Any = None


@dataclass(frozen=True, slots=True)
class EndpointInfo:
    slug: str
    title: str = ""
    description: str = ""
    instructions: str = ""
    # serverInfo.icons, sent from 2025-11-25 (lifecycle.shape_server_info).
    icons: Sequence[Mapping[str, JSON]] = ()


def _sorted(items: Sequence[Any], key: str) -> tuple[Any, ...]:
    return tuple(sorted(items, key=lambda item: getattr(item, key)))


# What a request can name in a catalog (``inbound.Resolved.item``).
CatalogItem = ToolDef | PromptDef | ResourceDef | ResourceTemplateDef


@dataclass(frozen=True)
class CatalogSnapshot:
    """Everything one endpoint publishes, in a deterministic order (by name / URI).

    Lists are sorted once at construction so pagination is a binary search, independent of
    catalog size.
    """

    endpoint: EndpointInfo
    tools: tuple[ToolDef, ...] = ()
    resources: tuple[ResourceDef, ...] = ()
    resource_templates: tuple[ResourceTemplateDef, ...] = ()
    prompts: tuple[PromptDef, ...] = ()
    version: int = 0
    # Some resource, template or prompt is served by another server in the caller's own
    # session: a request's context then carries ports bound to its caller (a request of an
    # endpoint without any shares them).
    caller_bound: bool = False
    # The endpoint's operator policies around calls (protocol/policies.py); None: it has none.
    policies: CallPolicies | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tools", _sorted(self.tools, "name"))
        object.__setattr__(self, "resources", _sorted(self.resources, "uri"))
        object.__setattr__(
            self, "resource_templates", _sorted(self.resource_templates, "uri_template")
        )
        object.__setattr__(self, "prompts", _sorted(self.prompts, "name"))
        object.__setattr__(self, "_tools_by_name", {t.name: t for t in self.tools})
        object.__setattr__(self, "_prompts_by_name", {p.name: p for p in self.prompts})
        object.__setattr__(self, "_resources_by_uri", {r.uri: r for r in self.resources})
        object.__setattr__(self, "_memo", {})

    def tool(self, name: str) -> ToolDef | None:
        return self._tools_by_name.get(name)  # type: ignore[attr-defined, no-any-return]

    def prompt(self, name: str) -> PromptDef | None:
        return self._prompts_by_name.get(name)  # type: ignore[attr-defined, no-any-return]

    def resource(self, uri: str) -> ResourceDef | None:
        return self._resources_by_uri.get(uri)  # type: ignore[attr-defined, no-any-return]

    def remembered(self, key: Hashable) -> Any:
        """A value derived from this snapshot and kept with it (e.g. a shaped page), or None."""
        return self._memo.get(key)  # type: ignore[attr-defined]

    def remember(self, key: Hashable, value: Any) -> None:
        """Keep ``value`` for the life of this snapshot (bounded: the oldest go first)."""
        memo: dict[Hashable, Any] = self._memo  # type: ignore[attr-defined]
        if len(memo) >= MEMO_SIZE:
            memo.pop(next(iter(memo)))
        memo[key] = value
