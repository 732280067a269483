"""Building an endpoint's catalog snapshot: its enabled rows as the protocol core's defs.

``build_snapshot`` turns an endpoint's enabled rows into the plain ``protocol.catalog`` defs in
a fixed number of queries; each def's ``binding`` (``ToolBinding`` and its siblings) carries
what the Django side needs to serve the item (the runner, the reader, the access rules).
Snapshots are kept per endpoint and catalog version (``snapshot_of``), and a tool's def per row
version.
Which endpoint a request names, and when its state is read again, is
``services/endpoint_directory.py``'s business.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.db.models import Prefetch

from mcp_app.executors import get_executor
from mcp_app.executors.base import ConfigError, PreparedConfig
from mcp_app.models import (
    Endpoint,
    Prompt,
    PromptArgument,
    PromptMessage,
    Resource,
    ResourceTemplate,
    Tool,
)
from mcp_app.protocol import apps
from mcp_app.protocol.catalog import (
    CatalogSnapshot,
    EndpointInfo,
    PromptArgumentDef,
    PromptDef,
    PromptMessageDef,
    ResourceDef,
    ResourceTemplateDef,
    ToolDef,
)
from mcp_app.services import history
from mcp_app.services.icons import public_icons
from mcp_app.services.policies.pipeline import endpoint_policies

logger = logging.getLogger(__name__)

# Endpoints whose snapshot stays in memory; least recently used ones are dropped beyond this.
SNAPSHOT_CACHE_SIZE = 256


@dataclass(frozen=True, slots=True)
class Access:
    """Who may use one catalog item on an OAuth endpoint (``mcp_app.auth.access`` decides).

    ``scope``: the OAuth scope a token needs to use it (listed anyway, so clients can step
    up); ``groups``: Django group names whose members see it at all (empty: everyone).
    """

    scope: str = ""
    groups: frozenset[str] = frozenset()


OPEN = Access()


def _access(row: Any, groups: frozenset[str] | None = None) -> Access:
    """The access rules of a catalog row.

    ``groups``: the row's allowed group names when the caller read them already; otherwise
    they come from ``allowed_groups`` (no query when it was prefetched).
    """
    if groups is None:
        groups = frozenset(group.name for group in row.allowed_groups.all())
    if not row.required_scope and not groups:
        return OPEN
    return Access(scope=row.required_scope, groups=groups)


@dataclass(frozen=True, slots=True)
class ToolBinding:
    """What the runner needs to call a tool: ``ToolDef.binding``. ``config`` must not be
    mutated."""

    pk: int
    kind: str
    config: Mapping[str, Any]
    # The executor's typed config, built with the snapshot; the ConfigError instead when the
    # row's config no longer prepares (the tool stays listed, and its calls fail as before).
    prepared: PreparedConfig | ConfigError = field(compare=False, repr=False)
    # Where calls run (Tool.Execution) and, on a worker, the tool's own time limits.
    execution: str = "inline"
    soft_time_limit: float | None = None
    hard_time_limit: float | None = None
    # Who may call it (mcp_app.auth).
    access: Access = OPEN
    # The tool's newest history row when this definition was read (services/history.py):
    # call-log rows name it, so an auditor opens the definition that answered the call.
    history_id: int | None = None
    # Its executor relays questions within one run held open between rounds
    # (``Executor.holds_questions``; never for a config that does not prepare).
    holds_questions: bool = False


@dataclass(frozen=True, slots=True)
class ResourceBinding:
    """What the reader needs to serve a resource: ``ResourceDef.binding``.

    Text resources carry their text, so reading them needs no query; files are opened from
    storage on read.
    """

    pk: int
    text: str | None = None
    file_name: str | None = None
    access: Access = OPEN
    # A resource read from an upstream MCP server: the upstream's name and the URI there.
    upstream: str | None = None
    remote_uri: str = ""
    # An MCP Apps view's _meta.ui (protocol/apps.py), served with its contents.
    ui_meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ResourceTemplateBinding:
    """``ResourceTemplateDef.binding``: the resolver kind and its config."""

    pk: int
    kind: str
    config: Mapping[str, Any]
    access: Access = OPEN
    # A kind read from an upstream: the upstream's name and the template to fill in there.
    upstream: str | None = None
    remote_uri_template: str = ""


@dataclass(frozen=True, slots=True)
class PromptBinding:
    """``PromptDef.binding``: what access checks need and, for an upstream's prompt, where to get
    it (other prompts render from the def)."""

    pk: int
    access: Access = OPEN
    upstream: str | None = None
    remote_name: str = ""


def build_snapshot(endpoint: Endpoint) -> CatalogSnapshot:
    """Return what ``endpoint`` publishes: its enabled tools, resources, templates and prompts.

    Runs a fixed number of queries whatever the catalog size (one per kind of row, one per
    kind for the allowed groups, plus two prefetches for prompt arguments and messages, one
    more for tools: see ``_tool_defs``, and one for the endpoint's policies).
    """
    tools = _tool_defs(endpoint)
    resources = tuple(
        _resource_def(resource)
        for resource in endpoint.resources.filter(enabled=True)
        .select_related("upstream")
        .prefetch_related("allowed_groups")
    )
    templates = tuple(
        _template_def(template)
        for template in endpoint.resource_templates.filter(enabled=True)
        .select_related("upstream")
        .prefetch_related("allowed_groups")
    )
    prompts = tuple(
        _prompt_def(prompt)
        for prompt in endpoint.prompts.filter(enabled=True)
        .select_related("upstream")
        .prefetch_related(
            "allowed_groups",
            Prefetch("arguments", queryset=PromptArgument.objects.order_by("position", "id")),
            Prefetch("messages", queryset=PromptMessage.objects.order_by("position", "id")),
        )
    )
    # A tool links only a view this endpoint publishes (the extension: the resource "MUST
    # exist on the server"); the link is kept on the row and shows again once it does.
    views = {
        resource.uri for resource in resources if apps.is_view(resource.uri, resource.mime_type)
    }
    tools = tuple(
        tool if not tool.view_uri or tool.view_uri in views else replace(tool, view_uri="")
        for tool in tools
    )
    return CatalogSnapshot(
        endpoint=EndpointInfo(
            slug=endpoint.slug,
            title=endpoint.title,
            description=endpoint.description,
            instructions=endpoint.instructions,
            icons=public_icons(endpoint.icons),
        ),
        tools=tools,
        resources=resources,
        resource_templates=templates,
        prompts=prompts,
        version=endpoint.catalog_version,
        caller_bound=any(
            item.binding.upstream is not None
            for items in (resources, templates, prompts)
            for item in items
        ),
        policies=endpoint_policies(endpoint),
    )


class _ToolDefCache:
    """ToolDefs by tool id, reused by later snapshot builds while their row is unchanged.

    A one-tool edit of an endpoint with thousands of tools then re-reads and rebuilds one
    definition, not all of them. Every save of a tool moves its ``updated_at``; its groups
    are compared separately (group membership is a separate table).
    """

    # Entries kept at most; past this the cache starts over (the next build re-reads rows).
    LIMIT = 200_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[int, tuple[datetime, frozenset[str], ToolDef]] = {}

    def get(self, pk: int, stamp: datetime, groups: frozenset[str]) -> ToolDef | None:
        item = self._items.get(pk)
        if item is None or item[0] != stamp or item[1] != groups:
            return None
        return item[2]

    def put(self, tool: Tool, groups: frozenset[str], definition: ToolDef) -> None:
        with self._lock:
            if len(self._items) >= self.LIMIT:
                self._items.clear()
            self._items[tool.pk] = (tool.updated_at, groups, definition)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_tool_defs_cache = _ToolDefCache()


def _tool_defs(endpoint: Endpoint) -> tuple[ToolDef, ...]:
    """The endpoint's enabled tools, reading in full only rows not already defined here.

    Four queries: each tool's id and ``updated_at``, the allowed groups of all of them, and
    the full rows and newest history ids of those that are new or changed (all rows on a
    cold build).
    """
    enabled = endpoint.tools.filter(enabled=True)
    stamps = list(enabled.values_list("pk", "updated_at"))
    groups: dict[int, set[str]] = {}
    for pk, name in Tool.allowed_groups.through.objects.filter(
        tool_id__in=enabled.values("pk")
    ).values_list("tool_id", "group__name"):
        groups.setdefault(pk, set()).add(name)
    groups_of = {pk: frozenset(names) for pk, names in groups.items()}
    defs: list[ToolDef] = []
    missing: list[int] = []
    for pk, stamp in stamps:
        found = _tool_defs_cache.get(pk, stamp, groups_of.get(pk, frozenset()))
        if found is None:
            missing.append(pk)
        else:
            defs.append(found)
    if missing:
        rows = enabled if len(missing) * 2 > len(stamps) else Tool.objects.filter(pk__in=missing)
        wanted = set(missing)
        versions = history.latest_history_ids(Tool, missing)
        for tool in rows:
            if tool.pk not in wanted:
                continue
            tool_groups = groups_of.get(tool.pk, frozenset())
            definition = tool_def(tool, tool_groups, history_id=versions.get(tool.pk))
            _tool_defs_cache.put(tool, tool_groups, definition)
            defs.append(definition)
    return tuple(defs)


def tool_def(
    tool: Tool, groups: frozenset[str] | None = None, *, history_id: int | None = None
) -> ToolDef:
    """The protocol's definition of ``tool``, with the key the runner calls it by.

    ``groups``: the tool's allowed group names, when already read; ``history_id``: the
    version this definition is (``services.history.latest_history_ids``).
    """
    prepared = prepare_config(tool)
    # A link in the tool's own _meta (an upstream's) goes out as the operator's does.
    meta, meta_view = apps.split_view_link(tool.meta or {})
    return ToolDef(
        name=tool.name,
        title=tool.title,
        description=tool.description,
        input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        annotations=tool.annotations(),
        icons=public_icons(tool.icons),
        meta=meta,
        view_uri=tool.ui_resource_uri or meta_view,
        execution=tool.execution_mode,
        task_support="forbidden" if tool.execution_mode == "inline" else tool.task_support,
        binding=ToolBinding(
            pk=tool.pk,
            kind=tool.kind,
            config=tool.config or {},
            prepared=prepared,
            execution=tool.execution_mode,
            soft_time_limit=tool.soft_time_limit,
            hard_time_limit=tool.hard_time_limit,
            access=_access(tool, groups),
            history_id=history_id,
            holds_questions=(
                not isinstance(prepared, ConfigError) and get_executor(tool.kind).holds_questions
            ),
        ),
    )


def prepare_config(tool: Tool) -> PreparedConfig | ConfigError:
    """Return the tool's config prepared by its executor, or why it does not prepare.

    A config that was valid when saved can stop preparing (a python function unregistered, an
    executor removed from MCP_EXECUTORS): the tool stays listed, with a warning logged here, and
    each call fails with the error, as a call of the row would.
    """
    try:
        prepared: PreparedConfig = get_executor(tool.kind).prepare(tool.config or {})
        return prepared
    except (ConfigError, LookupError) as exc:
        message = exc.message if isinstance(exc, ConfigError) else str(exc)
        logger.warning(
            "Tool %s (id %s) has a config that does not prepare: %s", tool.name, tool.pk, message
        )
        return ConfigError(message)


def _resource_def(resource: Resource) -> ResourceDef:
    size: int | None
    if resource.upstream is not None:
        key = ResourceBinding(
            pk=resource.pk,
            access=_access(resource),
            upstream=resource.upstream.name,
            remote_uri=resource.upstream_uri,
        )
        size = None
    elif resource.file:
        key = ResourceBinding(
            pk=resource.pk,
            file_name=resource.file.name,
            access=_access(resource),
            ui_meta=resource.ui_meta or {},
        )
        size = resource.size
    else:
        key = ResourceBinding(
            pk=resource.pk,
            text=resource.text,
            access=_access(resource),
            ui_meta=resource.ui_meta or {},
        )
        size = len(resource.text.encode())
    return ResourceDef(
        uri=resource.uri,
        name=resource.name,
        title=resource.title,
        description=resource.description,
        mime_type=resource.mime_type,
        size=size,
        icons=public_icons(resource.icons),
        # Read in the caller's upstream session: what it holds may differ per caller.
        private=resource.upstream is not None,
        binding=key,
    )


def _template_def(template: ResourceTemplate) -> ResourceTemplateDef:
    return ResourceTemplateDef(
        uri_template=template.uri_template,
        name=template.name,
        title=template.title,
        description=template.description,
        mime_type=template.mime_type,
        icons=public_icons(template.icons),
        completions={name: tuple(values) for name, values in (template.completions or {}).items()},
        private=template.upstream is not None,
        binding=ResourceTemplateBinding(
            pk=template.pk,
            kind=template.kind,
            config=template.config or {},
            access=_access(template),
            upstream=template.upstream.name if template.upstream is not None else None,
            remote_uri_template=template.upstream_uri_template,
        ),
    )


def _prompt_def(prompt: Prompt) -> PromptDef:
    return PromptDef(
        name=prompt.name,
        title=prompt.title,
        description=prompt.description,
        icons=public_icons(prompt.icons),
        arguments=tuple(
            PromptArgumentDef(
                name=argument.name,
                title=argument.title,
                description=argument.description,
                required=argument.required,
                completions=argument.completion_list(),
            )
            for argument in prompt.arguments.all()
        ),
        messages=tuple(_message_def(message) for message in prompt.messages.all()),
        binding=PromptBinding(
            pk=prompt.pk,
            access=_access(prompt),
            upstream=prompt.upstream.name if prompt.upstream is not None else None,
            remote_name=prompt.upstream_name,
        ),
    )


def _message_def(message: PromptMessage) -> PromptMessageDef:
    data = ""
    if message.file:
        # Read once per catalog version; uploads are capped by MCP_MAX_RESOURCE_BYTES.
        with message.file.open("rb") as handle:
            data = base64.b64encode(handle.read()).decode("ascii")
    return PromptMessageDef(
        role=message.role,
        kind=message.kind,
        text=message.text,
        data=data,
        mime_type=message.mime_type,
        uri=message.uri,
        name=message.name,
    )


class _SnapshotCache:
    """A small thread-safe LRU of snapshots by endpoint id, tagged with what they were built at.

    Builds are single-flight per endpoint: a thread that finds no snapshot for the tag it
    needs takes that endpoint's build lock, and whoever waited on it finds the snapshot built.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[int, tuple[tuple[int, datetime], CatalogSnapshot]] = OrderedDict()
        self._build_locks: dict[int, threading.Lock] = {}
        # Builds done, for tests that check there is one per version (never reset).
        self.builds = 0

    def get(self, endpoint_id: int, tag: tuple[int, datetime]) -> CatalogSnapshot | None:
        with self._lock:
            item = self._items.get(endpoint_id)
            if item is None or item[0] != tag:
                return None
            self._items.move_to_end(endpoint_id)
            return item[1]

    def put(self, endpoint_id: int, tag: tuple[int, datetime], snapshot: CatalogSnapshot) -> None:
        with self._lock:
            self._items[endpoint_id] = (tag, snapshot)
            self._items.move_to_end(endpoint_id)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def get_or_build(self, endpoint: Endpoint) -> CatalogSnapshot:
        """The snapshot of ``endpoint`` at its current tag, built at most once per tag."""
        # updated_at is part of the tag: an Endpoint.save() from a stale instance can write an
        # old catalog_version back before its post_save bump, and updated_at tells them apart.
        tag = (endpoint.catalog_version, endpoint.updated_at)
        snapshot = self.get(endpoint.pk, tag)
        if snapshot is not None:
            return snapshot
        with self._lock:
            build_lock = self._build_locks.setdefault(endpoint.pk, threading.Lock())
        with build_lock:
            snapshot = self.get(endpoint.pk, tag)
            if snapshot is None:
                snapshot = build_snapshot(endpoint)
                self.builds += 1
                self.put(endpoint.pk, tag, snapshot)
        return snapshot

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_snapshots = _SnapshotCache(SNAPSHOT_CACHE_SIZE)


def snapshot_builds() -> int:
    """How many snapshots this process has built (tests check one build per version)."""
    return _snapshots.builds


def snapshot_of(endpoint: Endpoint) -> CatalogSnapshot:
    """The snapshot of ``endpoint`` at its current catalog version, built at most once."""
    return _snapshots.get_or_build(endpoint)


def forget_snapshots() -> None:
    """Forget every snapshot and tool def this process built (tests, database resets)."""
    _snapshots.clear()
    _tool_defs_cache.clear()
