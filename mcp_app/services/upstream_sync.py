"""Discovery: what an upstream MCP server offers, compared with the rows read from it and
applied.

A sync (by hand from the admin or the API, or by the upstream's sync policy) plans the
differences between an upstream's tools, resources, templates and prompts and the catalog's
rows (``upstream_sync_plan``, ``upstream_offer_plan``), and applies the ones chosen through
the catalog's one write path (``services/catalog_writes.py``). Reaching the upstream to list
its offer is ``services/upstream_targets.py``'s.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from mcp_app.models import (
    Endpoint,
    Prompt,
    PromptArgument,
    Resource,
    ResourceTemplate,
    Tool,
    Upstream,
)
from mcp_app.models.fields import UPLOADED_ICON_PATH, validate_icons
from mcp_app.services import history
from mcp_app.services.catalog_writes import (
    Actor,
    catalog_row_enable,
    catalog_row_save,
    prompt_parts_set,
)
from mcp_app.services.openapi import tool_names_on_endpoints

logger = logging.getLogger(__name__)


def tools_fingerprint(remote_tools: list[dict[str, Any]]) -> str:
    """A digest of the upstream's whole tool list: every field of every tool (schemas,
    descriptions, annotations, titles, icons, _meta, execution), in name order."""
    ordered = sorted(remote_tools, key=lambda tool: str(tool.get("name")))
    text = json.dumps(ordered, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


# The fields a sync takes from the upstream's definition of a tool (``_synced_values``).
SYNCED_FIELDS = (
    "title", "description", "input_schema", "output_schema", "read_only_hint",
    "destructive_hint", "idempotent_hint", "open_world_hint", "meta", "icons",
    "execution_mode", "task_support",
)  # fmt: skip


# Compared with the row whatever the last sync took: arguments are checked against our copy of
# the schemas, so one that differs from the upstream's refuses or passes the wrong calls.
_ALWAYS_COMPARED = frozenset({"input_schema", "output_schema"})


@dataclass(slots=True)
class SyncPlan:
    """How an upstream's tool list compares with the catalog rows that call it.

    Rows are matched by the upstream tool name in their config. A row has "changed" when the
    upstream changed a field of its definition (``SYNCED_FIELDS``: title, description,
    annotations, icons, ``_meta``, task support) since the sync that last took it, and the
    row does not hold the new value already: an operator's own edit of a field the upstream
    left alone is not a difference. Schemas differ whenever ours is not the upstream's. A row
    synced before definitions were kept is compared field by field. A tool a sync disabled
    because the upstream no longer had it has changed when it is back (``enabled``: restored).
    ``fields`` holds, per upstream tool name, each changed field as (ours, the upstream's).
    """

    added: list[dict[str, Any]] = field(default_factory=list)
    changed: list[tuple[Tool, dict[str, Any]]] = field(default_factory=list)
    removed: list[Tool] = field(default_factory=list)
    unchanged: list[Tool] = field(default_factory=list)
    fields: dict[str, dict[str, tuple[Any, Any]]] = field(default_factory=dict)


def _remote_name(tool: Tool) -> str:
    return str(tool.config.get("tool") or tool.name)


def upstream_tool_rows(upstream: Upstream) -> list[Tool]:
    """Return the tools calling ``upstream``, by name."""
    return list(
        Tool.objects.filter(kind=Tool.Kind.MCP_UPSTREAM, config__upstream=upstream.name).order_by(
            "name"
        )
    )


def _synced_values(remote: Mapping[str, Any]) -> dict[str, Any]:
    """The row's values for the upstream's definition ``remote``, every synced field set."""
    values = _definition_fields(remote)
    values.setdefault("execution_mode", Tool.Execution.INLINE)
    values.setdefault("task_support", Tool.TaskSupport.OPTIONAL)
    return {name: values[name] for name in SYNCED_FIELDS}


def _tool_changes(
    upstream: Upstream, row: Tool, remote: Mapping[str, Any], *, cautious: bool
) -> dict[str, Any]:
    name = _remote_name(row)
    new = _synced_values(remote)
    baseline = upstream.synced_tools.get(name) if isinstance(upstream.synced_tools, dict) else None
    old = _synced_values(baseline) if isinstance(baseline, Mapping) else None
    if old is None and cautious:
        # Nothing says which of its fields are an operator's: only the schemas, which must
        # match whatever the last sync took.
        old = new
    changes = {
        field_name: (getattr(row, field_name), value)
        for field_name, value in new.items()
        if getattr(row, field_name) != value
        and (old is None or old[field_name] != value or field_name in _ALWAYS_COMPARED)
    }
    if name in upstream.tools_gone and not row.enabled:
        changes["enabled"] = (False, True)
    return changes


def upstream_sync_plan(
    upstream: Upstream, remote_tools: list[dict[str, Any]], *, cautious: bool = False
) -> SyncPlan:
    """Compare the upstream's tools (as listed) with the rows calling it.

    ``cautious`` (the sync policy's): a row synced before definitions were kept has changed
    only when its schemas differ, so no operator's edit is overwritten unseen.
    """
    rows = {_remote_name(tool): tool for tool in upstream_tool_rows(upstream)}
    plan = SyncPlan()
    seen: set[str] = set()
    for remote in remote_tools:
        name = remote.get("name")
        if not isinstance(name, str) or name in seen:
            continue
        seen.add(name)
        row = rows.get(name)
        if row is None:
            plan.added.append(remote)
        elif changes := _tool_changes(upstream, row, remote, cautious=cautious):
            plan.changed.append((row, remote))
            plan.fields[name] = changes
        else:
            plan.unchanged.append(row)
    plan.removed = [row for name, row in rows.items() if name not in seen]
    return plan


@dataclass(slots=True)
class SyncOutcome:
    created: list[Any] = field(default_factory=list)
    updated: list[Any] = field(default_factory=list)
    disabled: list[Any] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def upstream_sync_apply(
    upstream: Upstream,
    remote_tools: list[dict[str, Any]],
    *,
    add: set[str],
    update: set[str],
    remove: set[str],
    endpoints: Sequence[Endpoint] = (),
    enabled: bool = False,
    cautious: bool = False,
    actor: Actor = None,
) -> SyncOutcome:
    """Apply the ticked parts of the plan: create tools, take the upstream's changes, disable.

    New rows are published on ``endpoints`` and disabled unless ``enabled`` (an operator
    reviews them first), and renamed only when the upstream's name is taken by a tool on
    one of those endpoints (``<upstream>_<name>``, then a number): tool names are unique
    per endpoint, not in the catalog. A changed row takes the fields the plan names; one a
    sync disabled because it was gone is enabled again. Removed tools are disabled, not
    deleted, so the operator's settings stay. A tool whose schema this host cannot serve is
    skipped and named in ``skipped``. Every row is written by ``services.catalog_writes`` as
    "upstream sync" by ``actor`` (the operator; None: the sync policy).
    """
    outcome = SyncOutcome()
    with transaction.atomic(), history.catalog_change(source=history.UPSTREAM_SYNC, actor=actor):
        # One sync of an upstream at a time (by hand, the API, its policy), each reading what
        # the one before kept.
        kept = (
            Upstream.objects.select_for_update()
            .filter(pk=upstream.pk)
            .values_list("synced_tools", "tools_gone")
            .first()
        )
        if kept is not None:
            upstream.synced_tools, upstream.tools_gone = kept
        plan = upstream_sync_plan(upstream, remote_tools, cautious=cautious)
        taken = tool_names_on_endpoints(endpoints=endpoints)
        synced = dict(upstream.synced_tools) if isinstance(upstream.synced_tools, dict) else {}
        gone = [name for name in upstream.tools_gone if isinstance(name, str)]
        for remote in plan.added:
            if remote["name"] not in add:
                continue
            tool = Tool(
                name=_free_name(upstream.name, remote["name"], taken),
                kind=Tool.Kind.MCP_UPSTREAM,
                config={"upstream": upstream.name, "tool": remote["name"]},
                enabled=enabled,
                team_id=upstream.team_id,  # an upstream's items are its team's
                **_definition_fields(remote),
            )
            if not _saved(tool, outcome, actor, {"endpoints": list(endpoints)}):
                continue
            taken.add(tool.name)
            synced[remote["name"]] = remote
            outcome.created.append(tool)
        for row, remote in plan.changed:
            name = _remote_name(row)
            if name not in update:
                continue
            for field_name, (_ours, theirs) in plan.fields[name].items():
                setattr(row, field_name, theirs)
            if _saved(row, outcome, actor):
                synced[name] = remote
                outcome.updated.append(row)
        listed = _distinct(remote_tools, "name")
        for row in plan.unchanged:
            synced[_remote_name(row)] = listed[_remote_name(row)]
        for row in plan.removed:
            if _remote_name(row) in remove and row.enabled:
                catalog_row_enable(row, enabled=False, actor=actor, source=history.UPSTREAM_SYNC)
                gone.append(_remote_name(row))
                outcome.disabled.append(row)
        # Back and enabled again (by this sync or by an operator): no longer "gone".
        enabled_now = {_remote_name(row) for row in upstream_tool_rows(upstream) if row.enabled} & {
            str(remote.get("name")) for remote in remote_tools
        }
        # What the operator reviewed: the probe compares later lists with it.
        Upstream.objects.filter(pk=upstream.pk).update(
            tools_synced_at=timezone.now(),
            tools_fingerprint=tools_fingerprint(remote_tools),
            synced_tools=synced,
            tools_gone=sorted(set(gone) - enabled_now),
        )
        upstream.synced_tools, upstream.tools_gone = synced, sorted(set(gone) - enabled_now)
    return outcome


def _definition_fields(remote: Mapping[str, Any]) -> dict[str, Any]:
    raw = remote.get("annotations")
    annotations: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    title = remote.get("title") or annotations.get("title") or ""
    hints = {
        field_name: annotations.get(key) if isinstance(annotations.get(key), bool) else None
        for field_name, key in (
            ("read_only_hint", "readOnlyHint"),
            ("destructive_hint", "destructiveHint"),
            ("idempotent_hint", "idempotentHint"),
            ("open_world_hint", "openWorldHint"),
        )
    }
    description = remote.get("description")
    meta = remote.get("_meta")
    return {
        "title": str(title)[:200],
        "description": description if isinstance(description, str) and description.strip()
        else f"The tool {remote['name']} of an upstream MCP server.",
        "input_schema": remote.get("inputSchema"),
        "output_schema": remote.get("outputSchema") or None,
        **hints,
        "meta": dict(meta) if isinstance(meta, Mapping) else {},
        "icons": _icons_of(remote),
        **_task_fields(remote),
    }  # fmt: skip


def _icons_of(remote: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The upstream tool's icons this host can serve (an icon it refuses is left out, not the
    tool)."""
    raw = remote.get("icons")
    kept = []
    for icon in raw if isinstance(raw, list) else []:
        if not isinstance(icon, dict) or UPLOADED_ICON_PATH.fullmatch(str(icon.get("src"))):
            continue  # a path names this site's uploads, never the upstream's
        try:
            validate_icons([icon])
        except ValidationError:
            continue
        kept.append(icon)
    return kept


def _task_fields(remote: Mapping[str, Any]) -> dict[str, Any]:
    """How the upstream lets its tool run as an MCP task (2025-11-25 ``execution.taskSupport``),
    as this host's execution mode: optional runs inline unless the client asks for a task,
    required runs only as a task (on a worker). Absent or forbidden: inline, as any draft."""
    execution = remote.get("execution")
    support = execution.get("taskSupport") if isinstance(execution, Mapping) else None
    if support == Tool.TaskSupport.OPTIONAL:
        return {"execution_mode": Tool.Execution.AUTO, "task_support": support}
    if support == Tool.TaskSupport.REQUIRED:
        return {"execution_mode": Tool.Execution.BACKGROUND, "task_support": support}
    return {}


def _free_name(upstream: str, name: str, taken: set[str]) -> str:
    candidates = [name, f"{upstream}_{name}"]
    candidates += [f"{upstream}_{name}_{number}" for number in range(2, 1000)]
    for candidate in candidates:
        candidate = candidate[:128]
        if candidate not in taken:
            return candidate
    raise ValueError(f"no free name for {name!r}")  # pragma: no cover


def _saved(
    row: Tool | Resource | ResourceTemplate | Prompt,
    outcome: SyncOutcome,
    actor: Actor,
    relations: Mapping[str, Sequence[Endpoint]] | None = None,
    *,
    arguments: Sequence[Mapping[str, Any]] | None = None,
) -> bool:
    """Write ``row`` (and, given, a prompt's ``arguments``: PromptArgument values) through the
    catalog's write path; False (and named in ``skipped``, nothing written) when it refuses
    them."""
    source = history.UPSTREAM_SYNC
    try:
        with transaction.atomic():
            catalog_row_save(row, actor=actor, source=source, relations=relations)
            if isinstance(row, Prompt) and arguments is not None:
                parts = [PromptArgument(**values) for values in arguments]
                prompt_parts_set(row, arguments=parts, messages=None, actor=actor, source=source)
    except ValidationError as exc:
        outcome.skipped.append(f"{_remote_key(row)}: {'; '.join(exc.messages)}")
        return False
    return True


@dataclass(slots=True)
class ItemPlan:
    """How an upstream's resources (templates, prompts) compare with the rows read from it.

    Resources are matched by their URI there, templates by their URI template there, prompts
    by their name there. As for tools (``SyncPlan``), a row has "changed" when the upstream
    changed a field an operator reviews (``_item_values``: title, description, MIME type,
    icons, a prompt's arguments) since the sync that last took it and the row does not hold
    the new value already; a prompt whose argument names or required flags differ from the
    upstream's has changed whatever the last sync took (the upstream checks them). A row a
    sync disabled because the upstream no longer had it has changed when it is back
    (``enabled``: restored). ``fields`` holds, per key there, each change as (ours, theirs).
    """

    added: list[dict[str, Any]] = field(default_factory=list)
    changed: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)
    removed: list[Any] = field(default_factory=list)
    unchanged: list[Any] = field(default_factory=list)
    fields: dict[str, dict[str, tuple[Any, Any]]] = field(default_factory=dict)

    def changes(self) -> list[tuple[Any, str, dict[str, tuple[Any, Any]]]]:
        """Each changed row with its key there and its changed fields (for the sync page)."""
        return [(row, _remote_key(row), self.fields[_remote_key(row)]) for row, _ in self.changed]


@dataclass(slots=True)
class UpstreamOffer:
    """Everything an upstream lists: tools, resources, templates and prompts (every page)."""

    tools: list[dict[str, Any]] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)
    resource_templates: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[dict[str, Any]] = field(default_factory=list)


# The kinds besides tools, as ``UpstreamOffer`` attributes and keys of ``synced_items``, with
# the key of each of their entries there.
ITEM_KINDS = {"resources": "uri", "resource_templates": "uriTemplate", "prompts": "name"}


def offer_fingerprint(offer: UpstreamOffer) -> str:
    """A digest of everything the upstream offers (every field of every tool, resource,
    template and prompt, each list in key order). An offer of tools alone has the digest
    ``tools_fingerprint`` gives, so one kept before resources and prompts counted still holds.
    """
    if not any(getattr(offer, kind) for kind in ITEM_KINDS):
        return tools_fingerprint(offer.tools)
    whole = {
        kind: sorted(getattr(offer, kind), key=_by(key))
        for kind, key in {"tools": "name", **ITEM_KINDS}.items()
    }
    text = json.dumps(whole, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _by(key: str) -> Callable[[Mapping[str, Any]], str]:
    def value(item: Mapping[str, Any]) -> str:
        return str(item.get(key))

    return value


def _distinct(remote: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for item in remote:
        value = item.get(key)
        if isinstance(value, str) and value and value not in found:
            found[value] = item
    return found


def _arguments_of(remote: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = remote.get("arguments")
    return [a for a in raw if isinstance(a, dict) and isinstance(a.get("name"), str)] if isinstance(
        raw, list
    ) else []  # fmt: skip


def _argument_shape(arguments: Sequence[Mapping[str, Any]]) -> list[tuple[str, bool]]:
    return [(str(a["name"]), a.get("required") is True) for a in arguments]


def _item_values(kind: str, item: Mapping[str, Any]) -> dict[str, Any]:
    """The row's values for the upstream's definition ``item`` of a ``kind``: what a sync
    takes, and an operator reviews, of it."""
    description = item.get("description")
    values: dict[str, Any] = {
        "title": str(item.get("title") or "")[:200],
        "description": description if isinstance(description, str) else "",
        "icons": _icons_of(item),
    }
    if kind != "prompts":
        values["mime_type"] = str(item.get("mimeType") or "")[:200]
        return values
    if not values["description"].strip():
        values["description"] = f"The prompt {item.get('name')} of an upstream MCP server."
    values["arguments"] = [
        {
            "name": str(argument["name"])[:128],
            "title": str(argument.get("title") or "")[:200],
            "description": str(argument.get("description") or ""),
            "required": argument.get("required") is True,
        }
        for argument in _arguments_of(item)
    ]
    return values


def _row_values(kind: str, row: Resource | ResourceTemplate | Prompt) -> dict[str, Any]:
    values: dict[str, Any] = {
        "title": row.title,
        "description": row.description,
        "icons": row.icons,
    }
    if isinstance(row, Prompt):
        values["arguments"] = [
            {"name": a.name, "title": a.title, "description": a.description, "required": a.required}
            for a in row.arguments.order_by("position", "id")
        ]
    else:
        values["mime_type"] = row.mime_type
    return values


def _item_changes(
    upstream: Upstream, kind: str, key: str, row: Any, item: Mapping[str, Any], *, cautious: bool
) -> dict[str, tuple[Any, Any]]:
    new = _item_values(kind, item)
    synced = upstream.synced_items.get(kind) if isinstance(upstream.synced_items, dict) else None
    baseline = synced.get(key) if isinstance(synced, dict) else None
    old = _item_values(kind, baseline) if isinstance(baseline, Mapping) else None
    if old is None and cautious:
        # Nothing says which of its fields are an operator's: only what the upstream checks.
        old = new
    ours = _row_values(kind, row)
    changes = {
        name: (ours[name], value)
        for name, value in new.items()
        if ours[name] != value
        and (
            old is None
            or old[name] != value
            or (name == "arguments" and _argument_shape(ours[name]) != _argument_shape(value))
        )
    }
    gone = upstream.items_gone.get(kind) if isinstance(upstream.items_gone, dict) else None
    if isinstance(gone, list) and key in gone and not row.enabled:
        changes["enabled"] = (False, True)
    return changes


def _item_plan(
    upstream: Upstream,
    kind: str,
    rows: Mapping[str, Any],
    remote: list[dict[str, Any]],
    cautious: bool,
) -> ItemPlan:
    offered = _distinct(remote, ITEM_KINDS[kind])
    plan = ItemPlan(removed=[row for name, row in rows.items() if name not in offered])
    for name, item in offered.items():
        row = rows.get(name)
        if row is None:
            plan.added.append(item)
        elif changes := _item_changes(upstream, kind, name, row, item, cautious=cautious):
            plan.changed.append((row, item))
            plan.fields[name] = changes
        else:
            plan.unchanged.append(row)
    return plan


def upstream_resources_plan(
    upstream: Upstream, remote: list[dict[str, Any]], *, cautious: bool = False
) -> ItemPlan:
    """Compare the upstream's resources (as listed) with the rows read from it."""
    rows = {row.upstream_uri: row for row in upstream.resources.order_by("uri")}
    return _item_plan(upstream, "resources", rows, remote, cautious)


def upstream_templates_plan(
    upstream: Upstream, remote: list[dict[str, Any]], *, cautious: bool = False
) -> ItemPlan:
    """Compare the upstream's resource templates (as listed) with the rows read from it."""
    rows = {
        row.upstream_uri_template: row
        for row in upstream.resource_templates.order_by("uri_template")
    }
    return _item_plan(upstream, "resource_templates", rows, remote, cautious)


def upstream_prompts_plan(
    upstream: Upstream, remote: list[dict[str, Any]], *, cautious: bool = False
) -> ItemPlan:
    """Compare the upstream's prompts (as listed) with the rows got from it."""
    rows = {row.upstream_name: row for row in upstream.prompts.order_by("name")}
    return _item_plan(upstream, "prompts", rows, remote, cautious)


def upstream_items_apply(
    upstream: Upstream,
    offer: UpstreamOffer,
    *,
    add_resources: set[str],
    remove_resources: set[str],
    add_templates: set[str],
    remove_templates: set[str],
    add_prompts: set[str],
    update_prompts: set[str],
    remove_prompts: set[str],
    update_resources: Collection[str] = (),
    update_templates: Collection[str] = (),
    endpoints: Sequence[Endpoint] = (),
    enabled: bool = False,
    cautious: bool = False,
    actor: Actor = None,
) -> SyncOutcome:
    """Apply the ticked resource, template and prompt changes, as ``upstream_sync_apply`` does
    for tools.

    New rows are published on ``endpoints``, disabled unless ``enabled``. URIs, URI templates
    and prompt names are unique in the whole catalog (database constraints), unlike tool
    names, so any row here holding one is a conflict: a resource whose URI is taken gets
    ``mcp-upstream://<upstream>/<its URI, quoted>``, a template whose URI template is taken
    gets ``mcp-upstream://<upstream>/<scheme>/<the rest>`` (same variables), a prompt whose
    name is taken gets ``<upstream>_<name>``. A changed row takes the fields the plan names
    (a prompt's arguments too); one a sync disabled because it was gone is enabled again.
    Rows the upstream no longer offers are disabled. Every row is written by
    ``services.catalog_writes`` as "upstream sync" by ``actor`` (None: the sync policy).
    """
    outcome = SyncOutcome()
    source = history.UPSTREAM_SYNC
    with transaction.atomic(), history.catalog_change(source=source, actor=actor):
        # One sync of an upstream at a time, each reading what the one before kept.
        kept = (
            Upstream.objects.select_for_update()
            .filter(pk=upstream.pk)
            .values_list("synced_items", "items_gone")
            .first()
        )
        if kept is not None:
            upstream.synced_items, upstream.items_gone = kept
        plans = {
            "resources": upstream_resources_plan(upstream, offer.resources, cautious=cautious),
            "resource_templates": upstream_templates_plan(
                upstream, offer.resource_templates, cautious=cautious
            ),
            "prompts": upstream_prompts_plan(upstream, offer.prompts, cautious=cautious),
        }
        resources, templates, prompts = plans.values()
        old_synced = upstream.synced_items if isinstance(upstream.synced_items, dict) else {}
        old_gone = upstream.items_gone if isinstance(upstream.items_gone, dict) else {}
        synced: dict[str, dict[str, Any]] = {
            kind: dict(old_synced.get(kind) or {}) for kind in ITEM_KINDS
        }
        gone: dict[str, list[str]] = {
            kind: [key for key in old_gone.get(kind) or [] if isinstance(key, str)]
            for kind in ITEM_KINDS
        }
        relations = {"endpoints": list(endpoints)}
        taken_templates = set(ResourceTemplate.objects.values_list("uri_template", flat=True))
        taken_uris = set(Resource.objects.values_list("uri", flat=True))
        taken_names = set(Prompt.objects.values_list("name", flat=True))
        for item in resources.added:
            if item["uri"] not in add_resources:
                continue
            uri = item["uri"]
            if uri in taken_uris:
                uri = f"mcp-upstream://{upstream.name}/{quote(item['uri'], safe='')}"[:2048]
            values = _item_values("resources", item)
            resource = Resource(
                uri=uri,
                name=str(item.get("name") or item["uri"])[:200],
                upstream=upstream,
                remote_uri=item["uri"] if uri != item["uri"] else "",
                enabled=enabled,
                team_id=upstream.team_id,
                **values,
            )
            if _saved(resource, outcome, actor, relations):
                taken_uris.add(uri)
                synced["resources"][item["uri"]] = item
                outcome.created.append(resource)
        for item in templates.added:
            if item["uriTemplate"] not in add_templates:
                continue
            template = _template_row(upstream, item, taken_templates)
            template.enabled = enabled
            if _saved(template, outcome, actor, relations):
                taken_templates.add(template.uri_template)
                synced["resource_templates"][item["uriTemplate"]] = item
                outcome.created.append(template)
        for item in prompts.added:
            if item["name"] not in add_prompts:
                continue
            values = _item_values("prompts", item)
            arguments = values.pop("arguments")
            prompt = Prompt(
                name=_free_name(upstream.name, item["name"], taken_names),
                upstream=upstream,
                enabled=enabled,
                team_id=upstream.team_id,
                **values,
            )
            prompt.remote_name = item["name"] if prompt.name != item["name"] else ""
            if _saved(prompt, outcome, actor, relations, arguments=arguments):
                taken_names.add(prompt.name)
                synced["prompts"][item["name"]] = item
                outcome.created.append(prompt)
        for kind, ticked in (
            ("resources", update_resources),
            ("resource_templates", update_templates),
            ("prompts", update_prompts),
        ):
            plan = plans[kind]
            for row, item in plan.changed:
                key = _remote_key(row)
                if key not in ticked:
                    continue
                changes = plan.fields[key]
                for name, (_ours, theirs) in changes.items():
                    if name != "arguments":
                        setattr(row, name, theirs)
                # The prompt first, then its parts, as an admin save: a version's parts are
                # those written after it (services.history.revert_prompt_parts).
                arguments = changes["arguments"][1] if "arguments" in changes else None
                if _saved(row, outcome, actor, arguments=arguments):
                    synced[kind][key] = item
                    outcome.updated.append(row)
            listed = _distinct(getattr(offer, kind), ITEM_KINDS[kind])
            for row in plan.unchanged:
                synced[kind][_remote_key(row)] = listed[_remote_key(row)]
        for kind, ticked in (
            ("resources", remove_resources),
            ("resource_templates", remove_templates),
            ("prompts", remove_prompts),
        ):
            for row in plans[kind].removed:
                if _remote_key(row) in ticked and row.enabled:
                    catalog_row_enable(row, enabled=False, actor=actor, source=source)
                    gone[kind].append(_remote_key(row))
                    outcome.disabled.append(row)
        # Back and enabled again (by this sync or by an operator): no longer "gone".
        for kind, key in ITEM_KINDS.items():
            offered = _distinct(getattr(offer, kind), key)
            rows = getattr(upstream, kind).filter(enabled=True)
            back = {_remote_key(row) for row in rows} & set(offered)
            gone[kind] = sorted(set(gone[kind]) - back)
        Upstream.objects.filter(pk=upstream.pk).update(synced_items=synced, items_gone=gone)
        upstream.synced_items, upstream.items_gone = synced, gone
    return outcome


def _remote_key(row: Tool | Resource | ResourceTemplate | Prompt) -> str:
    """What the upstream calls a row read from it: its tool name, URI, URI template or prompt
    name."""
    if isinstance(row, Tool):
        return _remote_name(row)
    if isinstance(row, Resource):
        return row.upstream_uri
    if isinstance(row, ResourceTemplate):
        return row.upstream_uri_template
    return row.upstream_name


def _template_row(upstream: Upstream, item: Mapping[str, Any], taken: set[str]) -> ResourceTemplate:
    remote = str(item["uriTemplate"])
    local = remote
    if local in taken:
        # Ours in a namespace of the upstream, its variables kept: mapped back on each read.
        scheme, separator, rest = remote.partition("://")
        local = f"mcp-upstream://{upstream.name}/{scheme}/{rest.lstrip('/')}"
        if not separator:
            local = f"mcp-upstream://{upstream.name}/{remote}"
    return ResourceTemplate(
        uri_template=local[:2048],
        name=str(item.get("name") or remote)[:200],
        kind=ResourceTemplate.Kind.UPSTREAM,
        upstream=upstream,
        remote_uri_template=remote if local != remote else "",
        enabled=False,
        team_id=upstream.team_id,
        **_item_values("resource_templates", item),
    )


@dataclass(frozen=True, slots=True)
class SyncChoice:
    """What to apply of an upstream's offer: the upstream's names (tools, prompts), URIs
    (resources) and URI templates ticked for each change."""

    add: frozenset[str] = frozenset()
    update: frozenset[str] = frozenset()
    remove: frozenset[str] = frozenset()
    add_resources: frozenset[str] = frozenset()
    update_resources: frozenset[str] = frozenset()
    remove_resources: frozenset[str] = frozenset()
    add_templates: frozenset[str] = frozenset()
    update_templates: frozenset[str] = frozenset()
    remove_templates: frozenset[str] = frozenset()
    add_prompts: frozenset[str] = frozenset()
    update_prompts: frozenset[str] = frozenset()
    remove_prompts: frozenset[str] = frozenset()


@dataclass(slots=True)
class OfferPlan:
    """The plans of every kind an upstream offers (``upstream_offer_plan``)."""

    tools: SyncPlan
    resources: ItemPlan
    templates: ItemPlan
    prompts: ItemPlan

    def additions_and_changes(self) -> SyncChoice:
        """Everything added or changed ticked, nothing removed (the sync policy "apply")."""
        return SyncChoice(
            add=frozenset(remote["name"] for remote in self.tools.added),
            update=frozenset(self.tools.fields),
            add_resources=frozenset(item["uri"] for item in self.resources.added),
            update_resources=frozenset(self.resources.fields),
            add_templates=frozenset(item["uriTemplate"] for item in self.templates.added),
            update_templates=frozenset(self.templates.fields),
            add_prompts=frozenset(item["name"] for item in self.prompts.added),
            update_prompts=frozenset(self.prompts.fields),
        )

    def enabled_removals(self) -> bool:
        """Whether a row the upstream no longer offers still serves (left for review)."""
        removed = (
            *self.tools.removed,
            *self.resources.removed,
            *self.templates.removed,
            *self.prompts.removed,
        )
        return any(row.enabled for row in removed)


def upstream_offer_plan(
    upstream: Upstream, offer: UpstreamOffer, *, cautious: bool = False
) -> OfferPlan:
    """Compare everything the upstream offers with the rows got from it."""
    return OfferPlan(
        tools=upstream_sync_plan(upstream, offer.tools, cautious=cautious),
        resources=upstream_resources_plan(upstream, offer.resources, cautious=cautious),
        templates=upstream_templates_plan(upstream, offer.resource_templates, cautious=cautious),
        prompts=upstream_prompts_plan(upstream, offer.prompts, cautious=cautious),
    )


def upstream_offer_apply(
    upstream: Upstream,
    offer: UpstreamOffer,
    *,
    choice: SyncChoice,
    endpoints: Sequence[Endpoint] = (),
    enabled: bool = False,
    cautious: bool = False,
    actor: Actor = None,
) -> tuple[SyncOutcome, SyncOutcome]:
    """Apply ``choice`` to the tools, then the resources, templates and prompts, in one
    transaction (so connected clients get one list_changed per endpoint); return both
    outcomes. Recorded in the history as "upstream sync" by ``actor`` (the operator; None:
    the sync policy). ``cautious``: as for ``upstream_sync_plan``. The probe compares later
    offers with this one (``offer_fingerprint``)."""
    with transaction.atomic():
        tools = upstream_sync_apply(
            upstream,
            offer.tools,
            add=set(choice.add),
            update=set(choice.update),
            remove=set(choice.remove),
            endpoints=endpoints,
            enabled=enabled,
            cautious=cautious,
            actor=actor,
        )
        items = upstream_items_apply(
            upstream,
            offer,
            add_resources=set(choice.add_resources),
            update_resources=choice.update_resources,
            remove_resources=set(choice.remove_resources),
            add_templates=set(choice.add_templates),
            update_templates=choice.update_templates,
            remove_templates=set(choice.remove_templates),
            add_prompts=set(choice.add_prompts),
            update_prompts=set(choice.update_prompts),
            remove_prompts=set(choice.remove_prompts),
            endpoints=endpoints,
            enabled=enabled,
            cautious=cautious,
            actor=actor,
        )
        Upstream.objects.filter(pk=upstream.pk).update(tools_fingerprint=offer_fingerprint(offer))
    return tools, items


def upstream_policy_apply(pk: int, offer: UpstreamOffer) -> tuple[SyncOutcome, SyncOutcome] | None:
    """Apply ``offer``'s additions and changes to the upstream ``pk`` if its sync policy is
    "apply" (None otherwise), leaving it out of sync while a row it dropped still serves."""
    with transaction.atomic():
        upstream = Upstream.objects.select_for_update().filter(pk=pk).first()
        if upstream is None or upstream.sync_policy != Upstream.SyncPolicy.APPLY:
            return None
        plan = upstream_offer_plan(upstream, offer, cautious=True)
        outcomes = upstream_offer_apply(
            upstream, offer, choice=plan.additions_and_changes(), cautious=True
        )
        if plan.enabled_removals():
            # Removals wait for an operator: the upstream stays out of sync until then.
            Upstream.objects.filter(pk=pk).update(tools_changed_at=timezone.now())
    return outcomes
